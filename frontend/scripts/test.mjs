// Runs the TypeScript unit tests (test/**/*.test.ts) with node's built-in test runner. Node 20 cannot run
// TypeScript itself, so each test file is bundled by esbuild (with the modules it imports from src/) into a
// temporary folder first (packages stay imports); a DOM, where a test needs one, comes from linkedom (test/dom.ts).
//   node scripts/test.mjs             every test file
//   node scripts/test.mjs format      only files whose name contains "format"
import * as esbuild from "esbuild";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { generateApiTypes } from "./generate-api.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const filter = process.argv[2] ?? "";
const tests = readdirSync(join(root, "test"))
  .filter((name) => name.endsWith(".test.ts") && name.includes(filter))
  .sort();
if (tests.length === 0) {
  console.error(`scripts/test.mjs: no test file in test/ matches ${JSON.stringify(filter)}`);
  process.exit(1);
}

await generateApiTypes();
// Inside frontend/ (git-ignored), so the bundles' imports of packages resolve to frontend/node_modules.
const outdir = mkdtempSync(join(root, ".test-build-"));
try {
  await esbuild.build({
    absWorkingDir: root,
    entryPoints: tests.map((name) => join("test", name)),
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node20",
    outdir,
    outExtension: { ".js": ".mjs" },
    packages: "external",
    loader: { ".css": "text" },
    sourcemap: "inline",
    logLevel: "warning",
  });
  const files = tests.map((name) => join(outdir, name.replace(/\.ts$/, ".mjs")));
  const run = spawnSync(process.execPath, ["--enable-source-maps", "--test", ...files], {
    stdio: "inherit",
    cwd: root,
  });
  process.exitCode = run.status ?? 1;
} finally {
  rmSync(outdir, { recursive: true, force: true });
}
