// ESLint flat config: typescript-eslint's type-aware rules for src/, plain JS rules for the build script.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["node_modules/**", "../tb_plugin/static/**", "src/generated/**"] },
  {
    files: ["**/*.ts"],
    extends: [js.configs.recommended, ...tseslint.configs.strictTypeChecked],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // Trace-derived strings must never reach the DOM as HTML.
      "no-restricted-properties": [
        "error",
        { property: "innerHTML", message: "Use textContent / the h() helper; never innerHTML." },
        { property: "outerHTML", message: "Use textContent / the h() helper; never outerHTML." },
        { property: "insertAdjacentHTML", message: "Use the h() helper; never insertAdjacentHTML." },
      ],
      "@typescript-eslint/restrict-template-expressions": ["error", { allowNumber: true }],
    },
  },
  {
    // node:test's describe/it return promises the runner itself awaits
    files: ["test/**/*.ts"],
    rules: {
      "@typescript-eslint/no-floating-promises": [
        "error",
        { allowForKnownSafeCalls: [{ from: "package", package: "node:test", name: ["describe", "it", "test"] }] },
      ],
    },
  },
  {
    files: ["**/*.js", "**/*.mjs"],
    extends: [js.configs.recommended],
    languageOptions: {
      globals: { console: "readonly", process: "readonly", URL: "readonly" },
    },
  },
);
