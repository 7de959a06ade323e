// ESLint for static/js (`make lint`): one style, const/let and never var. Files loaded with
// <script type="module"> are checked as modules; the rest are classic deferred scripts.
import js from "@eslint/js";
import globals from "globals";

const CLASSIC_SCRIPTS = [
  "static/js/dry_run.js",
  "static/js/htmx_errors.js",
  "static/js/preview.js",
  "static/js/unsaved_guard.js",
  "static/js/uploads.js",
];

export default [
  { ignores: ["static/vendor/**", "static/js/rubric_editor/schema_validator.js", "node_modules/**", ".venv/**", "var/**"] },
  {
    files: ["static/js/**/*.js"],
    ...js.configs.recommended,
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: { ...globals.browser, htmx: "readonly" } },
    rules: {
      ...js.configs.recommended.rules,
      "no-var": "error",
      "prefer-const": "error",
      eqeqeq: ["error", "always", { null: "ignore" }],
    },
  },
  { files: CLASSIC_SCRIPTS, languageOptions: { sourceType: "script" } },
];
