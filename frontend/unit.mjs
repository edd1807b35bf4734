// Unit tests of the frontend's pure logic (formatting, eliding, step merging, layout): node unit.mjs
// Each test/*.test.ts exports `cases` ([name, fn] pairs; fn throws on failure). They are bundled by esbuild
// into a temporary folder and run here, so no test framework or Node type definitions are needed.
import * as esbuild from "esbuild";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const files = readdirSync(join(here, "test")).filter((f) => f.endsWith(".test.ts")).sort();
const outdir = mkdtempSync(join(tmpdir(), "ptp-unit-"));
let passed = 0;
let failed = 0;
try {
  await esbuild.build({
    absWorkingDir: here,
    entryPoints: files.map((f) => join("test", f)),
    bundle: true,
    format: "esm",
    platform: "node",
    outdir,
    outExtension: { ".js": ".mjs" },
    logLevel: "error",
  });
  for (const file of files) {
    const mod = await import(pathToFileURL(join(outdir, file.replace(/\.ts$/, ".mjs"))).href);
    for (const [name, fn] of mod.cases) {
      try {
        fn();
        passed++;
        console.log(`ok - ${file}: ${name}`);
      } catch (err) {
        failed++;
        console.log(`not ok - ${file}: ${name}\n  ${String(err instanceof Error ? err.message : err)}`);
      }
    }
  }
} finally {
  rmSync(outdir, { recursive: true, force: true });
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);
