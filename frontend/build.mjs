// Generates src/generated/api.ts from docs/api/openapi.yaml, then bundles src/index.ts into ES modules under ../tb_plugin/static/ (git-ignored build output).
//   node build.mjs            minified build with source maps
//   node build.mjs --watch    rebuild on change (not minified)
// TensorBoard imports ./index.js and calls its exported render(); everything else (view pages,
// plotly.js) is split into lazily imported chunk-*.js files served from the same folder.
import * as esbuild from "esbuild";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { generateApiTypes } from "./scripts/generate-api.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const outdir = join(here, "..", "tb_plugin", "static");
const watch = process.argv.includes("--watch");

/** Remove only what earlier builds wrote, so stale hashed chunks never pile up. */
function cleanOutdir() {
  mkdirSync(outdir, { recursive: true });
  for (const name of readdirSync(outdir)) {
    if (/^(index|chunk-.*)\.js(\.map)?$/.test(name)) rmSync(join(outdir, name));
  }
}

/**
 * plotly.js ships already minified, so a source map of its chunk maps minified code onto itself
 * (10+ MB for nothing). Drop maps of chunks built only from third-party code; our own code keeps
 * its maps.
 * @param {import("esbuild").Metafile} metafile
 */
function dropVendorMaps(metafile) {
  for (const [file, out] of Object.entries(metafile.outputs)) {
    if (file.endsWith(".map")) continue;
    const inputs = Object.keys(out.inputs);
    if (inputs.length === 0 || !inputs.every((i) => i.includes("node_modules/"))) continue;
    const path = join(here, file);
    const code = readFileSync(path, "utf8").replace(/\n\/\/# sourceMappingURL=[^\n]*\s*$/, "\n");
    writeFileSync(path, code);
    rmSync(`${path}.map`, { force: true });
    delete metafile.outputs[`${file}.map`];
  }
}

/** @type {import("esbuild").BuildOptions} */
const options = {
  absWorkingDir: here,
  entryPoints: { index: "src/index.ts" },
  bundle: true,
  splitting: true,
  format: "esm",
  target: ["es2022", "chrome100", "firefox100", "safari15"],
  platform: "browser",
  outdir,
  entryNames: "[name]",
  chunkNames: "chunk-[hash]",
  minify: !watch,
  sourcemap: "linked",
  sourcesContent: true,
  legalComments: "eof",
  loader: { ".css": "text" },
  charset: "utf8",
  metafile: true,
  logLevel: "warning",
};

await generateApiTypes(); // src/generated/api.ts from docs/api/openapi.yaml (a watch build: restart after editing it)
cleanOutdir();
if (watch) {
  const ctx = await esbuild.context(options);
  await ctx.watch();
  console.log(`watching; writing to ${outdir}`);
} else {
  const result = await esbuild.build(options);
  dropVendorMaps(result.metafile);
  const index = readFileSync(join(outdir, "index.js"), "utf8");
  if (!/export\s*\{[^}]*\bas render\b[^}]*\}|export\s*\{[^}]*\brender\b[^}]*\}/.test(index)) {
    console.error("build.mjs: index.js does not export render()");
    process.exit(1);
  }
  // One line, not one per chunk: `--verbose` lists every output file with its size.
  const outputs = Object.entries(result.metafile.outputs).filter(([file]) => !file.endsWith(".map"));
  if (process.argv.includes("--verbose")) {
    for (const [file, out] of outputs) console.log(`${(out.bytes / 1024).toFixed(1).padStart(9)} KiB  ${file}`);
  }
  const total = outputs.reduce((sum, [, out]) => sum + out.bytes, 0);
  console.log(`frontend built: ${outputs.length} files, ${(total / 2 ** 20).toFixed(1)} MiB in ${outdir}`);
}
