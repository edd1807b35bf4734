/**
 * The Diff page's drill-down (GET ./diff/node): the entries of the aligned host activity at one level,
 * baseline and experiment side by side (device or host time), with the cumulative change across the
 * entries as a line on a second axis. A breadcrumb shows the path (click to go up); clicking a bar,
 * a point or an expandable entry's name goes one level down.
 */
import type { PlotlyHTMLElement, PlotMouseEvent } from "plotly.js-dist-min";
import { ApiError } from "../../api";
import type { Plotly } from "../../lib/plotly";
import { h, replaceChildren } from "../../dom";
import { formatDuration, formatExactUs, formatInt, formatSignedDuration, formatSignedPercent } from "../../format";
import { type Charts, chartDiv, type Figure, plotlyText, shorten } from "../common/charts";
import { hoverName } from "../common/pie";
import { type Column, DataTable } from "../common/table";
import { csvFileName } from "../common/csv";
import { deltaSpan } from "./diffTables";
import {
  BASELINE_COLOR,
  DELTA_COLOR,
  type DiffNode,
  type DiffNodeChild,
  type DiffStats,
  EXPERIMENT_COLOR,
  type StepPair,
  type Target,
  targetParams,
} from "./diffTypes";
import type { ViewContext } from "../types";

export type DrillMetric = "device" | "host";

const MIN_BAR_GROUP_PX = 84; // room for a horizontal tick label of 14 characters

function value(s: DiffStats | null, metric: DrillMetric): number | null {
  if (!s) return null;
  const v = metric === "device" ? s.device_us : s.host_us;
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

function delta(c: { baseline: DiffStats | null; experiment: DiffStats | null }, metric: DrillMetric): number {
  return (value(c.experiment, metric) ?? 0) - (value(c.baseline, metric) ?? 0);
}

function pct(c: { baseline: DiffStats | null; experiment: DiffStats | null }, metric: DrillMetric): number | null {
  const b = value(c.baseline, metric);
  const e = value(c.experiment, metric);
  return b !== null && e !== null && b !== 0 ? (e - b) / b : null;
}

function sideNote(c: DiffNodeChild): string {
  if (!c.baseline) return "only in the experiment";
  if (!c.experiment) return "only in the baseline";
  return c.matched ? "" : "unmatched group";
}

/** The measure with the largest change among `node`'s entries (device on a tie; host without any device time). */
export function defaultMetric(node: DiffNode): DrillMetric {
  const largest = (m: DrillMetric): number => node.children.reduce((best, c) => Math.max(best, Math.abs(delta(c, m))), 0);
  const device = largest("device");
  const host = largest("host");
  if (device === 0 && host === 0) return (value(node.baseline, "device") ?? 0) + (value(node.experiment, "device") ?? 0) > 0 ? "device" : "host";
  return host > device ? "host" : "device";
}

/** A tick label over at most `lines` lines of about `width` characters (horizontal: rotated labels get cut). */
export function wrapTick(text: string, width = 14, lines = 3): string {
  const out: string[] = [];
  let rest = text;
  while (rest.length > 0 && out.length < lines) {
    if (rest.length <= width) {
      out.push(rest);
      rest = "";
      break;
    }
    const cut = Math.max(rest.lastIndexOf(" ", width), rest.lastIndexOf(":", width), rest.lastIndexOf("_", width), rest.lastIndexOf(".", width));
    const at = cut >= width / 2 ? cut + 1 : width;
    out.push(rest.slice(0, at).trimEnd());
    rest = rest.slice(at).trimStart();
  }
  if (rest.length > 0) out[out.length - 1] = `${(out[out.length - 1] ?? "").slice(0, width - 1)}…`;
  return out.map(plotlyText).join("<br>");
}

const METRIC_HELP: Record<DrillMetric, string> = {
  device: "GPU time of the kernels launched inside each entry (sum over its operators).",
  host: "Host wall time of each entry (sum over its operators).",
};

/**
 * The crumbs above `path` ("0-1-2": "0", "0-1"): the known ones by name, an entry reached from the history without
 * its parents (Forward to a deep entry) by its position.
 */
export function ancestors(stack: readonly { path: string; name: string }[], path: string): { path: string; name: string }[] {
  const parts = path.split("-");
  const out: { path: string; name: string }[] = [];
  for (let n = 1; n < parts.length; n++) {
    const p = parts.slice(0, n).join("-");
    out.push(stack.find((c) => c.path === p) ?? { path: p, name: n === 1 ? "All steps" : `entry ${Number(parts[n - 1]) + 1}` });
  }
  return out;
}

export class DrillDown {
  readonly el: HTMLElement;
  private readonly crumbs: HTMLElement;
  private readonly status: HTMLElement;
  private readonly chart: HTMLElement;
  private readonly scroller: HTMLElement;
  private readonly table: DataTable<DiffNodeChild>;
  private readonly toggle: HTMLElement;
  private stack: { path: string; name: string }[] = [{ path: "0", name: "All steps" }];
  private metric: DrillMetric = "device";
  private metricChosen = false;
  private node: DiffNode | null = null;
  private ctl: AbortController | null = null;
  private clickBound = false;

  constructor(
    private readonly ctx: ViewContext,
    private readonly base: Target,
    private readonly exp: Target,
    private readonly charts: () => Promise<{ charts: Charts; plotly: Plotly } | null>,
    private readonly signal: AbortSignal,
    private readonly steps: StepPair | null = null,
    /** a user's step down or up (not one the history asked for): the page records it as a history entry */
    private readonly onNavigate: (path: string) => void = () => undefined,
  ) {
    if (steps) this.stack = [{ path: "0", name: `Step ${steps.step} ⇄ step ${steps.exp_step}` }];
    this.crumbs = h("nav", { class: "ptp-breadcrumb", testid: "drill-breadcrumb", attrs: { "aria-label": "Drill-down path" } });
    this.status = h("p", { class: "ptp-muted", testid: "drill-status", attrs: { "aria-live": "polite" } });
    this.chart = chartDiv("drill-chart", 380);
    this.scroller = h("div", { class: "ptp-drill-scroll" }, this.chart);
    const button = (m: DrillMetric, label: string): HTMLElement =>
      h(
        "button",
        {
          class: "ptp-button ptp-button-small",
          testid: `drill-metric-${m}`,
          title: METRIC_HELP[m],
          attrs: { type: "button", "aria-pressed": "false" },
          onClick: () => {
            this.metricChosen = true;
            this.setMetric(m);
          },
        },
        label,
      );
    this.toggle = h("div", { class: "ptp-segmented", role: "group", attrs: { "aria-label": "Compared time" } }, button("device", "Device time"), button("host", "Host time"));
    this.table = new DataTable<DiffNodeChild>({
      testid: "drill-children",
      csvName: () => csvFileName(base.run, base.worker, `span${base.span}`, "vs", exp.run, exp.worker, `span${exp.span}`, "drilldown", this.node?.path ?? "0"),
      pageSizes: [10, 25, 50, 100],
      pageSize: 10,
      emptyText: "Nothing below this entry.",
    });
    this.el = h(
      "div",
      { class: "ptp-drill", testid: "drill" },
      h("div", { class: "ptp-controls ptp-drill-head" }, this.crumbs, h("span", { class: "ptp-toolbar-gap" }), this.toggle),
      this.status,
      this.scroller,
      this.table.el,
    );
    this.updateToggle();
  }

  /** Open the entry at `path` (the root "0" when omitted). */
  async open(path = "0"): Promise<void> {
    this.ctl?.abort();
    const ctl = new AbortController();
    this.ctl = ctl;
    const onAbort = (): void => { ctl.abort(); };
    this.signal.addEventListener("abort", onAbort, { once: true });
    this.el.dataset["loading"] = "true";
    this.status.textContent = "Loading…";
    let node: DiffNode;
    try {
      node = await this.ctx.api.getJSON<DiffNode>(
        "diff/node", { ...targetParams(this.base, this.exp, this.steps), path }, { signal: ctl.signal, timeoutMs: 120_000 });
    } catch (err) {
      if (ctl.signal.aborted) return;
      this.el.dataset["loading"] = "false";
      this.status.textContent = err instanceof ApiError ? `Could not load this entry: ${err.message}` : String(err);
      this.status.classList.add("ptp-error-text");
      return;
    } finally {
      this.signal.removeEventListener("abort", onAbort);
    }
    if (ctl.signal.aborted) return;
    this.status.classList.remove("ptp-error-text");
    node.children = Array.isArray(node.children) ? node.children : [];
    this.node = node;
    const at = this.stack.findIndex((c) => c.path === node.path);
    if (at >= 0) this.stack = this.stack.slice(0, at + 1);
    else this.stack = [...ancestors(this.stack, node.path), { path: node.path, name: node.name }];
    const last = this.stack[this.stack.length - 1];
    if (last) last.name = node.name;
    // Until the user picks one, each level opens on the measure whose largest change is largest: a host-only
    // change (a DataLoader +927 µs) would show as 0 in device time.
    if (!this.metricChosen) {
      this.metric = defaultMetric(node);
      this.updateToggle();
    }
    this.el.dataset["path"] = node.path;
    this.el.dataset["loading"] = "false";
    await this.draw();
  }

  private drill(child: DiffNodeChild | undefined): void {
    if (!child?.expandable) return;
    this.go(child.path);
  }

  /** A user's move to `path` (a bar, a name, a crumb): one history entry, then the entry. */
  private go(path: string): void {
    if (path === this.node?.path) return;
    this.onNavigate(path);
    void this.open(path);
  }

  /** The entry shown now ("0" before the first answer). */
  get path(): string {
    return this.node?.path ?? "0";
  }

  private setMetric(m: DrillMetric): void {
    if (this.metric === m) return;
    this.metric = m;
    this.updateToggle();
    void this.draw();
  }

  private updateToggle(): void {
    for (const b of Array.from(this.toggle.querySelectorAll("button"))) {
      const on = b.dataset["testid"] === `drill-metric-${this.metric}`;
      b.classList.toggle("ptp-button-on", on);
      b.setAttribute("aria-pressed", on ? "true" : "false");
    }
    this.el.dataset["metric"] = this.metric;
  }

  private renderCrumbs(): void {
    const items = this.stack.map((c, i) => {
      const lastOne = i === this.stack.length - 1;
      const label = shorten(c.name, 60);
      return [
        i > 0 ? h("span", { class: "ptp-crumb-sep", attrs: { "aria-hidden": "true" } }, "›") : null,
        lastOne
          ? h("span", { class: "ptp-crumb ptp-crumb-current", testid: "crumb", title: c.name, attrs: { "aria-current": "page" }, dataset: { path: c.path } }, label)
          : h("button", { class: "ptp-crumb", testid: "crumb", title: `Back to ${c.name}`, attrs: { type: "button" }, dataset: { path: c.path }, onClick: () => { this.go(c.path); } }, label),
      ];
    });
    replaceChildren(this.crumbs, items);
  }

  private summary(node: DiffNode): string {
    const m = this.metric;
    const b = value(node.baseline, m);
    const e = value(node.experiment, m);
    const d = delta(node, m);
    const p = pct(node, m);
    const what = m === "device" ? "device time" : "host time";
    return `${node.name}: ${what} ${formatDuration(b)} → ${formatDuration(e)} (${formatSignedDuration(d)}${p === null ? "" : `, ${formatSignedPercent(p)}`}) · ${formatInt(node.children.length)} entr${node.children.length === 1 ? "y" : "ies"} below${node.children.some((c) => c.expandable) ? "; click a bar or a name marked ▸ to go down" : ""}.`;
  }

  private async draw(): Promise<void> {
    const node = this.node;
    if (!node) return;
    this.renderCrumbs();
    this.status.textContent = this.summary(node);
    this.table.setData({ columns: this.columns(), rows: node.children, rowKey: (c) => c.path, sort: null,
      searches: [{ key: "name", label: "Search entries", placeholder: "Search entry names", text: (c) => c.name }] }, false);
    const n = node.children.length;
    this.chart.style.minWidth = `${Math.max(0, n * MIN_BAR_GROUP_PX + 140)}px`;
    this.chart.dataset["children"] = String(n);
    this.chart.dataset["path"] = node.path;
    if (n === 0) {
      this.scroller.hidden = true;
      return;
    }
    this.scroller.hidden = false;
    const got = await this.charts();
    if (!got || this.signal.aborted || this.node !== node) return;
    const { charts, plotly } = got;
    const metric = this.metric;
    await charts.draw(this.chart, () => this.figure(node, metric));
    const gd = this.chart as PlotlyHTMLElement;
    if (!this.clickBound && typeof gd.on === "function") {
      this.clickBound = true;
      gd.on("plotly_click", (ev: PlotMouseEvent) => {
        const p = ev.points[0];
        const i = typeof p?.x === "number" ? p.x : Number(p?.pointIndex);
        this.drill(this.node?.children[i]);
      });
    }
    // The minimum width may have changed with the number of entries: fit the plot to it.
    if (this.chart.offsetWidth > 0 && this.chart.offsetHeight > 0) {
      plotly.Plots.resize(this.chart);
    }
  }

  private figure(node: DiffNode, metric: DrillMetric): Figure {
    const kids = node.children;
    const x = kids.map((_, i) => i);
    const b = kids.map((c) => (value(c.baseline, metric) ?? 0) / 1000);
    const e = kids.map((c) => (value(c.experiment, metric) ?? 0) / 1000);
    let run = 0;
    const cum = kids.map((c) => (run += delta(c, metric)) / 1000);
    const what = metric === "device" ? "device" : "host";
    const hover = kids.map((c, i) => {
      const d = delta(c, metric);
      const p = pct(c, metric);
      const note = sideNote(c);
      return [
        `${i + 1}. ${hoverName(c.name, 80, 3)}`,
        `baseline ${what}: ${formatDuration(value(c.baseline, metric))}${c.baseline ? ` (${formatInt(c.baseline.count)} op${c.baseline.count === 1 ? "" : "s"})` : ""}`,
        `experiment ${what}: ${formatDuration(value(c.experiment, metric))}${c.experiment ? ` (${formatInt(c.experiment.count)} op${c.experiment.count === 1 ? "" : "s"})` : ""}`,
        `change: ${formatSignedDuration(d)}${p === null ? "" : ` (${formatSignedPercent(p)})`}${note ? ` · ${note}` : ""}`,
        c.expandable ? "<i>click to go down</i>" : "",
      ].filter(Boolean).join("<br>");
    });
    const cumHover = kids.map((c, i) => `cumulative change after ${i + 1}. ${plotlyText(shorten(c.name, 60))}:<br>${formatSignedDuration((cum[i] ?? 0) * 1000)}`);
    const ticks = kids.map((c, i) => wrapTick(`${c.expandable ? "▸ " : ""}${i + 1}. ${c.name}`));
    return {
      data: [
        { type: "bar", name: "Baseline", x, y: b, marker: { color: BASELINE_COLOR }, customdata: hover, hovertemplate: "%{customdata}<extra>baseline</extra>" },
        { type: "bar", name: "Experiment", x, y: e, marker: { color: EXPERIMENT_COLOR }, customdata: hover, hovertemplate: "%{customdata}<extra>experiment</extra>" },
        {
          type: "scatter",
          mode: kids.length > 60 ? "lines" : "lines+markers",
          name: "Cumulative change",
          x,
          y: cum,
          yaxis: "y2",
          line: { color: DELTA_COLOR, width: 2 },
          marker: { size: 5 },
          customdata: cumHover,
          hovertemplate: "%{customdata}<extra></extra>",
        },
      ],
      layout: {
        barmode: "group",
        bargap: 0.25,
        bargroupgap: 0.05,
        hovermode: "closest",
        legend: { orientation: "h", x: 0, y: 1.04, yanchor: "bottom", font: { size: 11 } },
        xaxis: { tickmode: "array", tickvals: x, ticktext: ticks, tickangle: 0, tickfont: { size: 10.5 }, automargin: true, range: [-0.6, kids.length - 0.4] },
        yaxis: { title: { text: `${what} time (ms)` }, rangemode: "tozero", automargin: true },
        yaxis2: {
          title: { text: "cumulative change (ms)", font: { color: DELTA_COLOR } },
          tickfont: { color: DELTA_COLOR },
          overlaying: "y",
          side: "right",
          tickmode: "auto",
          nticks: 6,
          showgrid: false,
          zeroline: false,
          automargin: true,
        },
        margin: { l: 60, r: 60, t: 36, b: 40 },
      },
    };
  }

  private columns(): Column<DiffNodeChild>[] {
    const m = this.metric;
    const what = m === "device" ? "device time" : "host time";
    const dur = (key: "baseline" | "experiment", label: string): Column<DiffNodeChild> => ({
      key,
      label,
      numeric: true,
      help: `${label} ${what}: ${METRIC_HELP[m]}`,
      value: (c) => value(c[key], m),
      text: (c) => formatDuration(value(c[key], m)),
      title: (c) => (c[key] ? `${formatExactUs(value(c[key], m))} in ${formatInt(c[key].count)} operator${c[key].count === 1 ? "" : "s"}` : `Not in the ${key}`),
      csvHeader: `${label} ${what} (us)`,
    });
    return [
      { key: "index", label: "#", numeric: true, help: "Position in time order.", value: (c) => this.node?.children.indexOf(c) ?? 0, text: (c) => String((this.node?.children.indexOf(c) ?? 0) + 1) },
      {
        key: "name",
        label: "Entry",
        value: (c) => c.name,
        render: (c) =>
          c.expandable
            ? h("button", { class: "ptp-link-button ptp-drill-link", testid: "drill-into", title: `Go down into ${c.name}`, attrs: { type: "button" }, dataset: { path: c.path }, onClick: () => { this.drill(c); } }, `▸ ${c.name}`)
            : h("span", { class: "ptp-break", title: c.name }, c.name),
        cls: "ptp-name-col",
      },
      dur("baseline", "Baseline"),
      dur("experiment", "Experiment"),
      {
        key: "delta",
        label: "Δ",
        numeric: true,
        help: `Experiment minus baseline (${what}).`,
        value: (c) => delta(c, m),
        render: (c) => deltaSpan(delta(c, m), formatSignedDuration(delta(c, m))),
        exact: (c) => formatExactUs(delta(c, m)),
        csvHeader: `Delta ${what} (us)`,
      },
      {
        key: "delta_pct",
        label: "Δ %",
        numeric: true,
        help: "Change relative to the baseline; \u201c—\u201d when the entry is on one side only or the baseline is 0.",
        value: (c) => pct(c, m),
        render: (c) => deltaSpan(pct(c, m), formatSignedPercent(pct(c, m))),
        csv: (c) => {
          const p = pct(c, m);
          return p === null ? null : Number((p * 100).toFixed(4));
        },
        csvHeader: `Delta ${what} (%)`,
      },
      {
        key: "matched",
        label: "Alignment",
        help: "How the two traces' entries were paired: by name (data loading, annotated regions, optimizer steps, operators), or a group of what lies between matched entries.",
        value: (c) => sideNote(c) || "matched",
        render: (c) => {
          const note = sideNote(c);
          return note ? h("span", { class: "ptp-tag ptp-tag-muted" }, note) : h("span", { class: "ptp-muted" }, "matched");
        },
      },
    ];
  }

  dispose(): void {
    this.ctl?.abort();
  }
}
