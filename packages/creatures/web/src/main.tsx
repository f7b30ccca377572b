/** Entry point of the creature web front end: mounts {@link App} with the urql client. */
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { Provider } from 'urql';
import { App } from './App.tsx';
import { createGraphQLClient } from './graphql.ts';
import './styles.css';

const root = document.getElementById('root');
if (!root) throw new Error('index.html lacks the #root element');
createRoot(root).render(
  <StrictMode>
    <Provider value={createGraphQLClient()}>
      <App />
    </Provider>
  </StrictMode>,
);
