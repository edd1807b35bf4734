/**
 * plotly.js is big (~4.7 MB minified), so it is never in index.js: the dynamic import below makes
 * esbuild put it in its own chunk (tb_plugin/static/chunk-*.js), fetched from the plugin's own
 * route the first time a view draws a chart. Nothing comes from a CDN (TensorBoard's CSP would
 * block it, and it must work offline).
 */
import type * as PlotlyTypes from "plotly.js-dist-min";
import type { Theme } from "../theme";

export type Plotly = typeof PlotlyTypes;

let loading: Promise<Plotly> | null = null;

export function loadPlotly(): Promise<Plotly> {
  loading ??= import("plotly.js-dist-min").then((mod: unknown) => {
    // The UMD bundle arrives as a CommonJS default export.
    const m = mod as { default?: Plotly } & Plotly;
    return m.default ?? m;
  });
  return loading;
}

/** Layout defaults that match the shell's colours for the given theme. */
export function plotlyThemeLayout(theme: Theme): Partial<PlotlyTypes.Layout> {
  const dark = theme === "dark";
  const fg = dark ? "#e8eaed" : "#212121";
  const grid = dark ? "#444" : "#e0e0e0";
  return {
    paper_bgcolor: "rgba(0,0,0,0)",
    plot_bgcolor: "rgba(0,0,0,0)",
    font: { color: fg, family: "Roboto, system-ui, sans-serif", size: 12 },
    xaxis: { gridcolor: grid, zerolinecolor: grid },
    yaxis: { gridcolor: grid, zerolinecolor: grid },
    margin: { l: 56, r: 16, t: 24, b: 40 },
  };
}
