/**
 * Parsing GraphQL documents within limits, so that no request can make the parser (or anything that
 * walks the tree after it) recurse deep enough to overflow the stack or run long enough to stall the
 * event loop. graphql-js's parser is recursive descent: every nested selection set, list or object
 * value, and list type is a level of recursion, so a 90 KB text of nested brackets overflows it.
 *
 * Before graphql-js parses a text, {@link checkDocument} runs graphql-js's own `Lexer` (iterative, one
 * token at a time) over it and refuses, with a `GraphQLError` whose `extensions.code` is
 * `QUERY_TOO_LARGE` or `QUERY_TOO_NESTED`:
 * - a text longer than {@link ParseLimits.maxLength} characters;
 * - more than {@link ParseLimits.maxTokens} tokens (graphql-js's `maxTokens` parse option counts the
 *   same tokens and is passed too);
 * - brackets (`{`, `[`, `(`) nested deeper than {@link ParseLimits.maxNesting}.
 * A text that fails to lex is left to graphql-js's parser, which reports the syntax error. Servers
 * answer these errors like any parse error (GraphQL over HTTP: 400 for
 * `application/graphql-response+json`).
 */
import { GraphQLError, Lexer, parse as parse16, Source, TokenKind } from 'graphql';

/** The limits of {@link checkDocument}. */
export interface ParseLimits {
  /** Longest document text, in UTF-16 code units (characters for ASCII). */
  maxLength: number;
  /** Most lexical tokens (punctuators, names, values; comments not counted). */
  maxTokens: number;
  /** Deepest nesting of `{`, `[` and `(` brackets. */
  maxNesting: number;
}

/**
 * The defaults: 64 Ki characters, 1,000 tokens (GraphQL Armor's default too), 48 levels of brackets.
 * The operations of the web front end and the bench, and GraphiQL's introspection query (under 200
 * tokens), stay far below; the query depth limit (12 fields) stops legitimate documents far below 48
 * levels of brackets. graphql-js validates a new document of 1,000 tokens in a few milliseconds (its
 * validation took 30 ms for 1,800 tokens on a loaded 2-core machine).
 */
export const DEFAULT_PARSE_LIMITS: ParseLimits = { maxLength: 64 * 1024, maxTokens: 1000, maxNesting: 48 };

const OPENING = new Set<string>([TokenKind.BRACE_L, TokenKind.BRACKET_L, TokenKind.PAREN_L]);
const CLOSING = new Set<string>([TokenKind.BRACE_R, TokenKind.BRACKET_R, TokenKind.PAREN_R]);

/**
 * Checks a document text against `limits` before it is parsed (see the module comment). Throws a
 * `GraphQLError` with `extensions.code` `QUERY_TOO_LARGE` (length, tokens) or `QUERY_TOO_NESTED`
 * (brackets); returns normally for a text within the limits or one that does not lex (graphql-js then
 * reports the syntax error). Time and memory are linear in the text's length, with no recursion.
 */
export function checkDocument(text: string, limits: ParseLimits = DEFAULT_PARSE_LIMITS): void {
  if (text.length > limits.maxLength) {
    throw new GraphQLError(
      `Document of ${text.length} characters exceeds the limit of ${limits.maxLength} characters`,
      { extensions: { code: 'QUERY_TOO_LARGE', maxLength: limits.maxLength } },
    );
  }
  const lexer = new Lexer(new Source(text));
  let tokens = 0;
  let nesting = 0;
  try {
    for (let token = lexer.advance(); token.kind !== TokenKind.EOF; token = lexer.advance()) {
      if (++tokens > limits.maxTokens) {
        throw new GraphQLError(`Document exceeds the limit of ${limits.maxTokens} tokens`, {
          extensions: { code: 'QUERY_TOO_LARGE', maxTokens: limits.maxTokens },
        });
      }
      if (OPENING.has(token.kind)) {
        if (++nesting > limits.maxNesting) {
          throw new GraphQLError(
            `Document nests brackets deeper than the limit of ${limits.maxNesting} levels`,
            {
              source: lexer.source,
              positions: [token.start],
              extensions: { code: 'QUERY_TOO_NESTED', maxNesting: limits.maxNesting },
            },
          );
        }
      } else if (CLOSING.has(token.kind)) nesting--;
    }
  } catch (err) {
    if (err instanceof GraphQLError && err.extensions.code !== undefined) throw err;
    // A lexing (syntax) error: graphql-js's parser reports it with its usual message.
  }
}

/**
 * graphql-js 16 `parse` behind {@link checkDocument}, with `maxTokens` set. Throws `GraphQLError`: the
 * limit errors of {@link checkDocument} or graphql-js's syntax errors.
 */
export function parseWithLimits(text: string, limits: ParseLimits = DEFAULT_PARSE_LIMITS) {
  checkDocument(text, limits);
  return parse16(text, { maxTokens: limits.maxTokens });
}
