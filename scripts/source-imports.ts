/**
 * The relative imports of TypeScript modules, read with the TypeScript compiler's parser, for the layering
 * tests of the packages (`packages/<name>/test/layering.test.ts`): each package states its own layers and
 * checks that no module imports a higher one and that value imports form no cycle.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';

/** One relative import of a module. */
export interface SourceImport {
  /** The specifier as written, e.g. `./store/types.ts`. */
  specifier: string;
  /** `import type …`, `export type … from`, or an import whose every named binding is `type`. */
  typeOnly: boolean;
  /** A literal `import()` call rather than a static declaration. */
  dynamic: boolean;
}

/**
 * The relative imports in a module's text: `import` and `export … from` declarations and literal
 * `import()` calls anywhere in it. Bare package specifiers are left out.
 * @param path the module's path (names the parsed file in diagnostics only).
 * @param text the module's source text.
 */
export function importsIn(path: string, text: string): SourceImport[] {
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const found: SourceImport[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      const named = clause?.namedBindings;
      const typeOnly =
        clause !== undefined &&
        (clause.isTypeOnly ||
          (clause.name === undefined &&
            named !== undefined &&
            ts.isNamedImports(named) &&
            named.elements.length > 0 &&
            named.elements.every((e) => e.isTypeOnly)));
      found.push({ specifier: node.moduleSpecifier.text, typeOnly, dynamic: false });
    } else if (
      ts.isExportDeclaration(node) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      found.push({ specifier: node.moduleSpecifier.text, typeOnly: node.isTypeOnly, dynamic: false });
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] !== undefined &&
      ts.isStringLiteralLike(node.arguments[0])
    ) {
      found.push({ specifier: node.arguments[0].text, typeOnly: false, dynamic: true });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found.filter((i) => i.specifier.startsWith('.'));
}

/** Every `.ts` file below `dir`, recursively, as paths joined to `dir`. */
export function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => join(e.parentPath, e.name));
}
