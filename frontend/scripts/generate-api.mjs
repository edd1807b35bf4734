// Generates src/generated/api.ts (git-ignored) from docs/api/openapi.yaml with openapi-typescript, so the
// contract the server is tested against (tests/unit/test_openapi.py) is the one the client compiles with.
// build.mjs calls it before bundling; `npm run typecheck`, `npm run lint` and `npm test` run it first.
//   node scripts/generate-api.mjs
import openapiTS, { astToString } from "openapi-typescript";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const spec = join(here, "..", "..", "docs", "api", "openapi.yaml");
export const generatedApi = join(here, "..", "src", "generated", "api.ts");

const HEADER = `// Generated from docs/api/openapi.yaml by frontend/scripts/generate-api.mjs (openapi-typescript): do not edit.
// Edit the OpenAPI file instead; the build regenerates this file.
`;

/** Write src/generated/api.ts, touching it only when its text changes (a watch build does not loop). */
export async function generateApiTypes() {
  // arrayLength: an array of fixed length (minItems = maxItems) is a tuple, as the client reads it ([start, end])
  const text = HEADER + astToString(await openapiTS(pathToFileURL(spec), { arrayLength: true }));
  if (existsSync(generatedApi) && readFileSync(generatedApi, "utf8") === text) return false;
  mkdirSync(dirname(generatedApi), { recursive: true });
  writeFileSync(generatedApi, text);
  return true;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  await generateApiTypes();
}
