// The frontend's import rules (as Perfetto's tools/check_imports keeps its core from reaching its plugins):
//   - a page (src/views/<name>/) imports only its own folder, views/common/, views/types.ts and the shared
//     modules of src/ (api, format, dom, urlState, ...): never another page, never the shell;
//   - views/common/ and views/types.ts (what pages share, their API) never import a page or the shell;
//   - the shared modules of src/ never import a view or the shell;
//   - only the shell (app.ts, index.ts, app/, views/registry.ts) sees every page.
// Every import form is read by the TypeScript compiler (import, export ... from, import(), import type).
//   node scripts/check-imports.mjs [src folder]   prints each offending import, exits 1 if there is one
// `make lint` runs it; tests/unit/test_frontend_imports.py plants a page-to-page import and sees it fail.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const here = dirname(fileURLToPath(import.meta.url));
const src = resolve(process.argv[2] ?? join(here, "..", "src"));

/** Which part of the frontend a file (relative to src/, "/"-separated) belongs to. */
export function partOf(rel) {
  const parts = rel.split("/");
  if (rel === "app.ts" || rel === "index.ts" || parts[0] === "app" || rel === "views/registry.ts") return "shell";
  if (parts[0] === "views") {
    if (parts.length === 2) return "common"; // views/types.ts: the pages' API
    return parts[1] === "common" ? "common" : `page:${parts[1]}`;
  }
  return "core"; // api, format, dom, urlState, components, generated/, lib/, ...
}

/** Whether `from` may import `to` (parts as partOf names them). */
export function allowed(from, to) {
  if (from === to || from === "shell") return true;
  if (to === "shell") return false;
  if (from === "core") return to === "core";
  if (from === "common") return to === "core";
  return to === "core" || to === "common"; // a page: never another page
}

function sources(dir) {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts") && !e.name.endsWith(".d.ts"))
    .map((e) => join(e.parentPath ?? e.path, e.name))
    .sort();
}

/** The src-relative file an import specifier names, or null for a package. */
function target(file, spec) {
  if (!spec.startsWith(".")) return null;
  const full = resolve(dirname(file), spec);
  const rel = relative(src, full).split(sep).join("/");
  return rel.endsWith(".ts") || rel.endsWith(".css") ? rel : `${rel}.ts`;
}

export function violations() {
  const out = [];
  for (const file of sources(src)) {
    const rel = relative(src, file).split(sep).join("/");
    const info = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
    for (const imported of info.importedFiles) {
      const to = target(file, imported.fileName);
      if (to === null || to.startsWith("..")) continue;
      const a = partOf(rel);
      const b = partOf(to);
      if (!allowed(a, b)) out.push(`src/${rel}: ${a} imports ${b} (${imported.fileName})`);
    }
  }
  return out;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const found = violations();
  for (const line of found) console.error(line);
  if (found.length) {
    console.error(`check-imports: ${found.length} import(s) across the frontend's layers; move what two pages ` +
      "share into src/views/common/ (see docs/architecture.md)");
    process.exit(1);
  }
  console.log("check-imports: every page imports only its own folder, views/common/ and the shared modules");
}
