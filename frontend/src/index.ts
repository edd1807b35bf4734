/**
 * Entry point loaded by TensorBoard: data/plugin_entry.html?name=pytorch_profiler imports
 * ./index.js (relative to <base href="plugin/pytorch_profiler/">) and calls render() once with
 * no arguments, in a same-origin iframe whose CSP allows scripts from 'self' only and inline
 * styles. The page body starts empty.
 */
import { createApi } from "./api";
import { App } from "./app";
import { h, replaceChildren } from "./dom";
import css from "./styles.css";
import { watchTheme } from "./theme";

export type { ViewContext, ViewModule } from "./views/types";
/** Also exported for tests and embedders: loads the plotly.js chunk (TensorBoard only calls render). */
export { loadPlotly } from "./lib/plotly";

let mounted = false;

export function render(): void {
  if (mounted) return;
  mounted = true;
  const style = document.createElement("style");
  style.dataset["ptp"] = "";
  style.textContent = css;
  document.head.appendChild(style);
  document.title = "PyTorch Profiler";

  const root = h("div", { id: "ptp-root" });
  document.body.appendChild(root);
  try {
    const theme = watchTheme();
    new App(root, createApi(), theme).start();
  } catch (err) {
    // render()'s result is discarded by TensorBoard, so report failures in the page itself.
    replaceChildren(
      root,
      h(
        "section",
        { class: "ptp-card ptp-error-card", testid: "fatal" },
        h("h3", {}, "The profiler page could not start"),
        h("p", {}, err instanceof Error ? err.message : String(err)),
      ),
    );
  }
}
