/**
 * The interactive query explorer (GraphiQL 3 with its Docs panel) served entirely by this server: the
 * page, GraphiQL's prebuilt standalone bundle, React 18's and graphql-ws's UMD builds are read from the
 * installed npm packages at start, so the explorer works with no internet access (no CDN). Queries and
 * mutations go through GraphiQL's HTTP fetcher; subscriptions through graphql-ws (GraphQL over
 * WebSocket, `websocket.ts`).
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);

/** URL prefix of the explorer's assets. */
export const EXPLORER_ASSET_PREFIX = '/graphql/explorer/';

/** One static asset: its body and `content-type`. */
export interface ExplorerAsset {
  body: Buffer;
  contentType: string;
}

const JS = 'text/javascript; charset=utf-8';

const INIT_SCRIPT = `
(function () {
  var params = new URLSearchParams(location.search);
  var headers = { 'GraphQL-Require-Preflight': '1' };
  // Queries and mutations go over HTTP; subscriptions over GraphQL over WebSocket (graphql-transport-ws)
  // on the same endpoint. GraphiQL's fetcher tells them apart and shows each event as it arrives; its
  // Stop button completes the subscription.
  var wsClient = graphqlWs.createClient({
    url: (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + location.pathname,
    lazy: true,
  });
  var fetcher = GraphiQL.createFetcher({ url: location.pathname, headers: headers, wsClient: wsClient });
  // CodeMirror's input textareas carry no label: name each editor for assistive technology, as the
  // editors appear (the response pane, the variables and headers tabs are created later), and make
  // their scroll areas reachable by keyboard.
  function labelEditors() {
    var areas = document.querySelectorAll('.CodeMirror textarea:not([aria-label])');
    for (var i = 0; i < areas.length; i++) {
      var area = areas[i], label = 'Query editor';
      if (area.closest('.result-window')) label = 'Response';
      else if (area.closest('.graphiql-editor-tool')) {
        var editors = area.closest('.graphiql-editor-tool').querySelectorAll('.graphiql-editor');
        label = editors[1] && editors[1].contains(area) ? 'Request headers editor' : 'Variables editor';
      }
      area.setAttribute('aria-label', label);
    }
    // An editor narrower than its text scrolls: let the keyboard reach its scroll area too.
    var scrolls = document.querySelectorAll('.CodeMirror-scroll:not([tabindex="0"])');
    for (var j = 0; j < scrolls.length; j++) scrolls[j].setAttribute('tabindex', '0');
  }
  new MutationObserver(labelEditors).observe(document.getElementById('graphiql'), { childList: true, subtree: true });
  var root = ReactDOM.createRoot(document.getElementById('graphiql'));
  root.render(React.createElement(GraphiQL, {
    fetcher: fetcher,
    defaultQuery: params.get('query') || '{\\n  creature(name: "Pikachu") {\\n    id\\n    name\\n    weight { minimum maximum }\\n    attacks { fast { name type damage } }\\n    evolutions { name }\\n  }\\n}\\n',
    variables: params.get('variables') || undefined,
    isHeadersEditorEnabled: true,
    shouldPersistHeaders: false,
  }));
})();
`;

/**
 * GraphiQL's light-theme colour variables (hue, saturation, lightness) with the lightness lowered so
 * that syntax colours and links reach WCAG 2 AA contrast (4.5:1) on the white editor background.
 */
const EXPLORER_LIGHT_COLORS =
  '--color-primary: 320, 95%, 34%; --color-secondary: 242, 51%, 48%; --color-tertiary: 188, 100%, 24%; ' +
  '--color-info: 208, 100%, 33%; --color-success: 158, 60%, 26%; --color-warning: 36, 100%, 26%; ' +
  '--color-error: 13, 93%, 38%; --alpha-secondary: 0.85; --alpha-tertiary: 0.85;';

/** The explorer page (HTML); it loads only same-origin assets under {@link EXPLORER_ASSET_PREFIX}. */
export const EXPLORER_HTML = Buffer.from(`<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Creature GraphQL explorer</title>
  <link rel="icon" href="data:,">
  <link rel="stylesheet" href="${EXPLORER_ASSET_PREFIX}graphiql.min.css">
  <style>
    html, body, #graphiql { height: 100%; margin: 0; }
    /* Light theme: GraphiQL's syntax and link colours darkened to a contrast of at least 4.5:1 on white. */
    @media (prefers-color-scheme: light) {
      body:not(.graphiql-dark) .graphiql-container, body:not(.graphiql-dark) .CodeMirror-info,
      body:not(.graphiql-dark) .CodeMirror-lint-tooltip, body:not(.graphiql-dark) .graphiql-dialog,
      body:not(.graphiql-dark) .graphiql-tooltip, body:not(.graphiql-dark) [data-radix-popper-content-wrapper] {
        ${EXPLORER_LIGHT_COLORS}
      }
    }
    /* Docs panel links: underlined (not told apart by colour alone), targets at least 24 × 24 px. */
    .graphiql-doc-explorer-content a {
      text-decoration: underline;
      display: inline-block;
      min-width: 24px;
      min-height: 24px;
      line-height: 24px;
    }
    body.graphiql-light .graphiql-container, body.graphiql-light .CodeMirror-info,
    body.graphiql-light .CodeMirror-lint-tooltip, body.graphiql-light .graphiql-dialog,
    body.graphiql-light .graphiql-tooltip, body.graphiql-light [data-radix-popper-content-wrapper] {
      ${EXPLORER_LIGHT_COLORS}
    }
  </style>
</head>
<body>
  <div id="graphiql">Loading the explorer…</div>
  <script src="${EXPLORER_ASSET_PREFIX}react.production.min.js"></script>
  <script src="${EXPLORER_ASSET_PREFIX}react-dom.production.min.js"></script>
  <script src="${EXPLORER_ASSET_PREFIX}graphiql.min.js"></script>
  <script src="${EXPLORER_ASSET_PREFIX}graphql-ws.min.js"></script>
  <script src="${EXPLORER_ASSET_PREFIX}init.js"></script>
</body>
</html>
`);

/**
 * `content-security-policy` of the explorer page: only same-origin scripts and connections; GraphiQL
 * needs inline styles and data: fonts/images.
 */
export const EXPLORER_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
  "font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/**
 * Reads the explorer's assets from the installed `graphiql`, `react`, `react-dom` and `graphql-ws` packages.
 * Returns a map from file name (after {@link EXPLORER_ASSET_PREFIX}) to asset. Throws if a package is
 * missing.
 */
export function loadExplorerAssets(): Map<string, ExplorerAsset> {
  const file = (spec: string) => {
    const [pkg, ...rest] = spec.split('/');
    return readFileSync(join(dirname(require.resolve(`${pkg}/package.json`)), ...rest));
  };
  return new Map<string, ExplorerAsset>([
    ['graphiql.min.js', { body: file('graphiql/graphiql.min.js'), contentType: JS }],
    ['graphiql.min.css', { body: file('graphiql/graphiql.min.css'), contentType: 'text/css; charset=utf-8' }],
    ['react.production.min.js', { body: file('react/umd/react.production.min.js'), contentType: JS }],
    [
      'react-dom.production.min.js',
      { body: file('react-dom/umd/react-dom.production.min.js'), contentType: JS },
    ],
    ['graphql-ws.min.js', { body: file('graphql-ws/umd/graphql-ws.min.js'), contentType: JS }],
    ['init.js', { body: Buffer.from(INIT_SCRIPT), contentType: JS }],
  ]);
}
