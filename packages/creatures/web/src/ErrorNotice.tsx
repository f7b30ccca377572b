/** Shows a failed operation's error to the user (never swallowed). */
import type { CombinedError } from '@urql/core';
import { errorText } from './graphql.ts';

/** An alert with the server's error messages, one per line. */
export function ErrorNotice({ error }: { error: CombinedError | Error | string }) {
  const text = typeof error === 'string' ? error : errorText(error);
  return (
    <p role="alert" className="error">
      {text}
    </p>
  );
}
