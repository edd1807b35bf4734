// Lists every function in frontend/src (declarations, methods, arrows, function expressions,
// constructors, accessors) longer than a limit, and every class longer than a class limit, as JSON
// [{kind, file, line, name, lines}], parsed with the TypeScript compiler so braces in strings, regexes and
// templates never miscount.
//   node scripts/function-sizes.mjs [limit=80] [folder=src] [class limit=400]
// tests/unit/test_code_size.py runs it and fails listing the offenders.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");
const repo = join(root, "..");
const limit = Number(process.argv[2] ?? 80);
const folder = process.argv[3] || join(root, "src");
const classLimit = Number(process.argv[4] ?? 400);

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
    const isClass = ts.isClassDeclaration(node) || ts.isClassExpression(node);
    if ((isFunction(node) && node.body) || isClass) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const lines = last - first + 1;
      if (lines > (isClass ? classLimit : limit)) {
        const name = isClass ? (node.name?.text ?? "<anonymous class>") : nameOf(node);
        offenders.push({ kind: isClass ? "class" : "function", file: relative(repo, file), line: first + 1, name, lines });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
}
console.log(JSON.stringify(offenders));
