/**
 * Plotly figures of a view: drawn with the shell's theme, redrawn when the theme changes, resized
 * when the page's size changes (TensorBoard shrinks hidden tabs to 0 px), purged on leave.
 * Trace-derived strings passed to plotly must go through plotlyText(): plotly parses a subset of
 * HTML in labels and hover text, and kernel names are full of "<" and ">".
 */
import type * as PlotlyTypes from "plotly.js-dist-min";
import { type Plotly, plotlyThemeLayout } from "../../lib/plotly";
import type { Theme } from "../../theme";
import type { ViewContext } from "../types";

export type Layout = Partial<PlotlyTypes.Layout>;
export type Data = PlotlyTypes.Data;
export interface Figure {
  data: Data[];
  layout: Layout;
}

const CONFIG: Partial<PlotlyTypes.Config> = {
  displayModeBar: false, // its PNG download cannot work in VS Code's webview; zoom is not needed here
  displaylogo: false,
  responsive: false, // sizes follow ctx.onResize (works while TensorBoard hides the tab)
  scrollZoom: false,
};

/** Escape text for plotly's label/hover markup so it is shown literally. */
export function plotlyText(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** Cut a label to `max` characters with an ellipsis. */
export function shorten(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, Math.max(1, max - 1))}…`;
}

/** Colours readable on both themes, neighbours far apart (Tableau 10 without grey, then distinct extras). */
export const PALETTE = [
  "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
  "#17becf", "#bcbd22", "#6b6ecf", "#ce6dbd", "#8c6d31", "#843c39", "#637939", "#9edae5", "#fdae6b", "#a55194",
];
export const OTHER_COLOR = "#9e9e9e";

/**
 * Stable colours by key (the same operator keeps its colour in every pie). New keys take the
 * least used palette colour that no other key of the same chart has, so a chart never shows one
 * colour twice while the palette lasts.
 */
export class ColorMap {
  private readonly map = new Map<string, string>();
  private readonly uses = new Map<string, number>();

  get(key: string): string {
    return this.map.get(key) ?? this.assign([key])[0] ?? OTHER_COLOR;
  }

  /** Colours for the keys of one chart, assigning new keys as described above. */
  assign(keys: readonly string[]): string[] {
    const taken = new Set(keys.map((k) => this.map.get(k)).filter((c): c is string => c !== undefined));
    for (const key of keys) {
      if (this.map.has(key)) continue;
      const free = PALETTE.filter((c) => !taken.has(c));
      const pool = free.length ? free : PALETTE;
      let best = pool[0] ?? OTHER_COLOR;
      for (const c of pool) if ((this.uses.get(c) ?? 0) < (this.uses.get(best) ?? 0)) best = c;
      this.map.set(key, best);
      this.uses.set(best, (this.uses.get(best) ?? 0) + 1);
      taken.add(best);
    }
    return keys.map((k) => this.map.get(k) ?? OTHER_COLOR);
  }
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/** The theme's layout under the figure's own (nested objects merged one level deep). */
export function themedLayout(theme: Theme, layout: Layout): Layout {
  const base = plotlyThemeLayout(theme) as Obj;
  const out: Obj = { ...base };
  for (const [k, v] of Object.entries(layout as Obj)) {
    const b = base[k];
    out[k] = isObj(b) && isObj(v) ? { ...b, ...v } : v;
  }
  const dark = theme === "dark";
  out["hoverlabel"] = {
    bgcolor: dark ? "#303134" : "#ffffff",
    bordercolor: dark ? "#5f6368" : "#bdbdbd",
    font: { color: dark ? "#e8eaed" : "#212121", size: 12 },
    ...(isObj(out["hoverlabel"]) ? out["hoverlabel"] : {}),
  };
  return out as Layout;
}

export class Charts {
  private readonly figures = new Map<HTMLElement, (theme: Theme) => Figure>();
  private resizeQueued = false;
  private disposed = false;

  constructor(
    private readonly plotly: Plotly,
    private readonly ctx: ViewContext,
  ) {
    ctx.onThemeChange(() => {
      for (const div of [...this.figures.keys()]) void this.render(div);
    });
    ctx.onResize(() => {
      this.resizeSoon();
    });
  }

  /** Draw (or redraw) `div` from `build(theme)`; the builder is kept for theme changes. */
  async draw(div: HTMLElement, build: (theme: Theme) => Figure): Promise<void> {
    this.figures.set(div, build);
    await this.render(div);
  }

  private async render(div: HTMLElement): Promise<void> {
    const build = this.figures.get(div);
    if (!build || this.disposed) return;
    if (!div.isConnected) {
      this.remove(div);
      return;
    }
    const fig = build(this.ctx.theme);
    await this.plotly.react(div, fig.data, themedLayout(this.ctx.theme, fig.layout), CONFIG);
  }

  private resizeSoon(): void {
    if (this.resizeQueued) return;
    this.resizeQueued = true;
    window.requestAnimationFrame(() => {
      this.resizeQueued = false;
      if (this.disposed) return;
      for (const div of [...this.figures.keys()]) {
        if (!div.isConnected) this.remove(div);
        else if (div.offsetWidth > 0 && div.offsetHeight > 0) this.plotly.Plots.resize(div);
      }
    });
  }

  remove(div: HTMLElement): void {
    this.figures.delete(div);
    try {
      this.plotly.purge(div);
    } catch {
      // already gone
    }
  }

  dispose(): void {
    this.disposed = true;
    for (const div of [...this.figures.keys()]) this.remove(div);
  }
}

/** A chart container of a fixed height (plotly sizes itself from it). */
export function chartDiv(testid: string, height: number): HTMLElement {
  const div = document.createElement("div");
  div.className = "ptp-chart";
  div.dataset["testid"] = testid;
  div.style.height = `${height}px`;
  return div;
}
