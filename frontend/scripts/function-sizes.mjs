// Lists every function in frontend/src (declarations, methods, arrows, function expressions,
// constructors, accessors) longer than a limit, as JSON [{file, line, name, lines}], parsed with
// the TypeScript compiler so braces in strings, regexes and templates never miscount.
//   node scripts/function-sizes.mjs [limit=150] [folder=src]
// tests/unit/test_code_size.py runs it and fails listing the offenders.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");
const repo = join(root, "..");
const limit = Number(process.argv[2] ?? 150);
const folder = process.argv[3] ?? join(root, "src");

/** Every .ts file under `dir`, sorted, so the output is stable. */
function sources(dir) {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts"))
    .map((e) => join(e.parentPath ?? e.path, e.name))
    .sort();
}

/** A readable name for a function node: its own, or the variable/property/method it is assigned to. */
function nameOf(node) {
  if (node.name && ts.isIdentifier(node.name)) return node.name.text;
  if (node.name) return node.name.getText();
  const parent = node.parent;
  if (parent && (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent))) {
    return parent.name.getText();
  }
  return ts.isConstructorDeclaration(node) ? "constructor" : "<anonymous>";
}

function isFunction(node) {
  return ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node) || ts.isArrowFunction(node)
    || ts.isFunctionExpression(node) || ts.isConstructorDeclaration(node) || ts.isGetAccessor(node)
    || ts.isSetAccessor(node);
}

const offenders = [];
for (const file of sources(folder)) {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
  const visit = (node) => {
    if (isFunction(node) && node.body) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const lines = last - first + 1;
      if (lines > limit) offenders.push({ file: relative(repo, file), line: first + 1, name: nameOf(node), lines });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
}
console.log(JSON.stringify(offenders));
