/**
 * The epilogue every chart page repeated: load plotly (a lazily loaded chunk), make the page's Charts and draw
 * its first figures; when plotly cannot load or a figure fails, the page keeps its tables and says so in place
 * of the charts ("The charts could not be drawn: …"), since a chart is never worth losing the page over.
 */
import { h, replaceChildren } from "../../dom";
import type { ViewContext } from "../types";
import { Charts } from "./charts";
import { left } from "./ui";

/**
 * Load plotly and run `draw` with the page's Charts. Returns the Charts (also when `draw` failed, so the caller
 * still disposes of them), or null when plotly did not load or the user left meanwhile.
 */
export async function startCharts(
  ctx: ViewContext,
  fallback: HTMLElement,
  draw: (charts: Charts) => Promise<void> | void,
  what = "The charts",
): Promise<Charts | null> {
  let charts: Charts | null = null;
  try {
    const Plotly = await ctx.loadPlotly();
    if (left(ctx)) return null;
    charts = new Charts(Plotly, ctx);
    await draw(charts);
  } catch (err) {
    if (left(ctx)) return null;
    const message = err instanceof Error ? err.message : String(err);
    replaceChildren(fallback, h("p", { class: "ptp-muted", testid: "chart-error" }, `${what} could not be drawn: ${message}`));
  }
  return charts;
}
