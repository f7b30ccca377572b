/**
 * The interactive query explorer (GraphiQL 3 with its Docs panel) served entirely by this server: the
 * page, GraphiQL's prebuilt standalone bundle, React 18's and graphql-sse's UMD builds are read from the
 * installed npm packages at start, so the explorer works with no internet access (no CDN). Queries and
 * mutations go through GraphiQL's HTTP fetcher; subscriptions through graphql-sse (GraphQL over SSE).
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
  var http = GraphiQL.createFetcher({ url: location.pathname, headers: headers });
  // Subscriptions go over Server-Sent Events on the same endpoint (GraphQL over SSE, graphql-sse's
  // "distinct connections" mode); GraphiQL shows each event as it arrives and stops the stream on Stop.
  var sse = graphqlSse.createClient({ url: location.pathname, headers: headers });
  // The type of the operation to run: the keyword of the named one, or of the first operation (a bare
  // selection set is a query). Scans top-level definitions only (brace depth 0), skipping comments,
  // strings and fragments.
  function operationType(query, name) {
    var depth = 0, first = null, def = null, i = 0, n = query.length, m;
    var word = /[_A-Za-z][_0-9A-Za-z]*/y, ws = /[\\s,]*/y;
    while (i < n) {
      var c = query[i];
      if (c === '#') { while (i < n && query[i] !== '\\n') i++; continue; }
      if (c === '"') {
        var block = query.startsWith('"""', i);
        i += block ? 3 : 1;
        while (i < n && !(block ? query.startsWith('"""', i) : query[i] === '"')) i += query[i] === '\\\\' ? 2 : 1;
        i += block ? 3 : 1;
        continue;
      }
      if (c === '{') { if (depth === 0 && def === null && first === null) first = 'query'; depth++; i++; continue; }
      if (c === '}') { depth--; if (depth === 0) def = null; i++; continue; }
      word.lastIndex = i;
      if (depth === 0 && (m = word.exec(query))) {
        i = word.lastIndex;
        if (m[0] === 'fragment') def = m[0];
        if (m[0] === 'query' || m[0] === 'mutation' || m[0] === 'subscription') {
          def = m[0];
          ws.lastIndex = i; ws.exec(query); word.lastIndex = ws.lastIndex;
          var named = word.exec(query);
          if (name && named && named[0] === name) return m[0];
          if (first === null) first = m[0];
        }
        continue;
      }
      i++;
    }
    return first;
  }
  var fetcher = function (graphQLParams, opts) {
    if (operationType(graphQLParams.query || '', graphQLParams.operationName) === 'subscription') {
      return sse.iterate({
        query: graphQLParams.query,
        variables: graphQLParams.variables || undefined,
        operationName: graphQLParams.operationName || undefined,
      });
    }
    return http(graphQLParams, opts);
  };
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

/** The explorer page (HTML); it loads only same-origin assets under {@link EXPLORER_ASSET_PREFIX}. */
export const EXPLORER_HTML = Buffer.from(`<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Creature GraphQL explorer</title>
  <link rel="icon" href="data:,">
  <link rel="stylesheet" href="${EXPLORER_ASSET_PREFIX}graphiql.min.css">
  <style>html, body, #graphiql { height: 100%; margin: 0; }</style>
</head>
<body>
  <div id="graphiql">Loading the explorer…</div>
  <script src="${EXPLORER_ASSET_PREFIX}react.production.min.js"></script>
  <script src="${EXPLORER_ASSET_PREFIX}react-dom.production.min.js"></script>
  <script src="${EXPLORER_ASSET_PREFIX}graphiql.min.js"></script>
  <script src="${EXPLORER_ASSET_PREFIX}graphql-sse.min.js"></script>
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
 * Reads the explorer's assets from the installed `graphiql`, `react` and `react-dom` packages.
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
    ['graphql-sse.min.js', { body: file('graphql-sse/umd/graphql-sse.min.js'), contentType: JS }],
    ['init.js', { body: Buffer.from(INIT_SCRIPT), contentType: JS }],
  ]);
}
