/**
 * The Memory view's "Memory by category" card (GET ./memory_categories): bytes per category
 * (torch's parameter, optimizer state, input, temporary, activation, gradient, autograd detail,
 * unknown) stacked over time for the selected device, labelled "torch export" when a
 * prof.export_memory_timeline file of this trace was found and "inferred" otherwise, then the
 * peak's categories (beside the inference's numbers when both exist) and the largest allocations
 * live at the peak with their operators and call stacks.
 */
import { card, infoIcon } from "../../components";
import { h, replaceChildren } from "../../dom";
import { formatBytes, formatInt, formatMs, formatPercent1, formatSignedPercent } from "../../format";
import { frameList, parseFrame } from "../common/callStack";
import { Charts, chartDiv, type Data, type Figure, plotlyText } from "../common/charts";
import { csvFileName } from "../common/csv";
import { clampedName, type Column, DataTable } from "../common/table";
import { fetchFor, left, loadErrorCard } from "../common/ui";
import { axisUnit } from "./memoryData";
import {
  type CategoryResponse,
  categoryColor,
  categoryLabel,
  CATEGORY_INFO,
  normalizeCategories,
  peakRows,
  peakSummary,
  seriesPeakNote,
  seriesMax,
  sourceLabel,
  sourceSentence,
  stackedTraces,
  type TopAllocation,
} from "./memoryCategoriesData";
import type { ViewContext } from "../types";

export interface CategoryCard {
  el: HTMLElement;
  /** Show another device (the Memory view's device picker). */
  setDevice(device: string): void;
  dispose(): void;
}

const INFERRED_HELP =
  "Inferred from the trace: created and freed inside one operator → temporary; created in backward → gradient if it outlives the backward, else autograd detail; created in the optimizer → optimizer state if it outlives the call; created in forward → input if copied from the host, else activation; memory from before profiling → parameters (as large as one step's gradients), optimizer state (by the optimizer's class), the rest unknown. See the Memory guide.";

/** The card; it loads its data itself and follows the device picker through setDevice. */
export function memoryCategoriesCard(ctx: ViewContext, device: string, originUs: number): CategoryCard {
  const badge = h("span", { class: "ptp-tag", testid: "memcat-source" });
  const peakEl = h("span", { class: "ptp-mem-peak", testid: "memcat-peak" });
  const sub = h("p", { class: "ptp-muted ptp-card-sub", testid: "memcat-origin" });
  const body = h("div", { testid: "memcat-body" }, h("p", { class: "ptp-muted" }, "Loading memory by category…"));
  const el = card(
    { testid: "card-memory-categories" },
    h("div", { class: "ptp-card-head" }, h("h3", {}, "Memory by category"), badge, infoIcon(INFERRED_HELP), peakEl),
    sub,
    body,
  );
  let charts: Charts | null = null;
  let seq = 0;

  async function load(dev: string): Promise<void> {
    const my = ++seq;
    el.dataset["loading"] = "true";
    let resp: CategoryResponse;
    try {
      resp = normalizeCategories(await fetchFor<unknown>(ctx, "memory_categories", { device: dev }));
    } catch (err) {
      if (my === seq && !left(ctx)) replaceChildren(body, loadErrorCard(err, "memory by category"));
      el.dataset["loading"] = "false";
      return;
    }
    if (my !== seq || left(ctx)) return;
    await show(resp);
    el.dataset["loading"] = "false";
  }

  async function show(resp: CategoryResponse): Promise<void> {
    el.dataset["source"] = resp.source;
    el.dataset["device"] = resp.device ?? "";
    badge.textContent = sourceLabel(resp.source);
    badge.className = resp.source === "export" ? "ptp-tag" : "ptp-tag ptp-tag-muted";
    badge.title = resp.source === "export" ? "Categories computed by torch (export_memory_timeline)" : INFERRED_HELP;
    sub.textContent = sourceSentence(resp);
    peakEl.textContent = peakSummary(resp, originUs);
    const chart = chartDiv("memcat-chart", 320);
    replaceChildren(
      body,
      resp.peak ? chart : h("p", { class: "ptp-note", testid: "memcat-reason" }, resp.reason ?? "No memory by category for this device."),
      errorsNote(resp),
      resp.peak ? peakTable(resp, originUs) : null,
      resp.peak ? allocationsTable(ctx, resp, originUs) : null,
    );
    if (!resp.peak) return;
    try {
      charts ??= new Charts(await ctx.loadPlotly(), ctx);
      if (!left(ctx)) await charts.draw(chart, () => figure(resp, originUs));
    } catch (err) {
      replaceChildren(chart, h("p", { class: "ptp-muted", testid: "chart-error" }, `The chart could not be drawn: ${err instanceof Error ? err.message : String(err)}`));
    }
  }

  void load(device);
  return {
    el,
    setDevice: (dev: string) => {
      void load(dev);
    },
    dispose: () => {
      seq++;
      charts?.dispose();
    },
  };
}

function figure(resp: CategoryResponse, originUs: number): Figure {
  const unit = axisUnit(seriesMax(resp));
  const data: Data[] = stackedTraces(resp, originUs, unit.bytes).map((t) => ({
    type: "scatter",
    mode: "lines",
    name: t.label,
    x: t.x,
    y: t.y,
    stackgroup: "memory",
    line: { shape: "hv", width: 0.5, color: t.color },
    fillcolor: t.color,
    customdata: t.bytes.map((b) => formatBytes(b)),
    hovertemplate: `${plotlyText(t.label)} %{customdata}<extra></extra>`,
  }));
  const peak = resp.peak;
  const shapes = peak
    ? [{ type: "line" as const, xref: "x" as const, yref: "paper" as const, x0: (peak.time_us - originUs) / 1000, x1: (peak.time_us - originUs) / 1000, y0: 0, y1: 1, line: { color: "#e15759", width: 1.5, dash: "dot" as const } }]
    : [];
  return {
    data,
    layout: {
      xaxis: { title: { text: "Time (ms)" }, zeroline: false },
      yaxis: { title: { text: `Memory (${unit.label})` }, fixedrange: true, rangemode: "tozero", zeroline: false },
      hovermode: "x unified",
      showlegend: true,
      legend: { orientation: "h", x: 1, xanchor: "right", y: 1.02, yanchor: "bottom" },
      margin: { l: 64, r: 20, t: 32, b: 48 },
      shapes,
    },
  };
}

function errorsNote(resp: CategoryResponse): HTMLElement | null {
  if (resp.export_errors.length === 0) return null;
  return h(
    "div",
    { class: "ptp-note", testid: "memcat-export-errors" },
    "Memory timeline exports beside this trace that could not be read:",
    h("ul", {}, resp.export_errors.map((e) => h("li", {}, h("code", {}, e.file), ": ", e.error))),
  );
}

function peakTable(resp: CategoryResponse, originUs: number): HTMLElement {
  const compare = resp.inferred_at_peak !== null;
  const note = seriesPeakNote(resp, originUs);
  const head = ["Category", "Bytes at the peak", "Share", ...(compare ? ["Inferred", "Difference"] : [])];
  const rows = peakRows(resp).map((r) =>
    h(
      "tr",
      { testid: "memcat-peak-row", dataset: { category: r.key, bytes: String(r.bytes) }, title: CATEGORY_INFO[r.key]?.help ?? "" },
      h("td", {}, h("span", { class: "ptp-swatch", style: { background: categoryColor(r.key) } }), " ", r.label),
      h("td", { class: "ptp-num", title: `${formatInt(r.bytes)} bytes` }, formatBytes(r.bytes)),
      h("td", { class: "ptp-num" }, formatPercent1(r.share)),
      compare ? h("td", { class: "ptp-num", title: `${formatInt(r.inferred ?? 0)} bytes` }, formatBytes(r.inferred ?? 0)) : null,
      compare ? h("td", { class: "ptp-num" }, formatSignedPercent(r.difference)) : null,
    ),
  );
  return h(
    "div",
    { class: "ptp-memcat-peak" },
    h("h4", {}, "What makes up the peak", compare ? " (torch export beside the inference)" : ""),
    note ? h("p", { class: "ptp-muted", testid: "memcat-peak-note" }, note) : null,
    h("table", { class: "ptp-table", testid: "memcat-peak-table" }, h("thead", {}, h("tr", {}, head.map((t, i) => h("th", { class: i > 0 ? "ptp-num" : undefined }, t)))), h("tbody", {}, rows)),
  );
}

function allocationsTable(ctx: ViewContext, resp: CategoryResponse, originUs: number): HTMLElement {
  const columns: Column<TopAllocation>[] = [
    { key: "bytes", label: "Size", numeric: true, value: (a) => a.bytes, text: (a) => formatBytes(a.bytes), exact: (a) => `${formatInt(a.bytes)} bytes`, csvHeader: "Size (bytes)" },
    {
      key: "category",
      label: "Category",
      value: (a) => categoryLabel(a.category),
      render: (a) => h("span", {}, h("span", { class: "ptp-swatch", style: { background: categoryColor(a.category) } }), " ", categoryLabel(a.category), a.category_source === "inferred" && resp.source === "export" ? h("span", { class: "ptp-tag ptp-tag-muted", title: "No raw export event matched this allocation: its category is inferred." }, "inferred") : null),
    },
    { key: "operator", label: "Operator", value: (a) => a.operator, render: (a) => clampedName(a.operator, "memcat-op"), title: (a) => a.operator, cls: "ptp-name-col" },
    { key: "alloc", label: "Allocated", numeric: true, value: (a) => (a.alloc_us === null ? null : a.alloc_us - originUs), text: (a) => (a.alloc_us === null ? "before profiling" : formatMs(a.alloc_us - originUs)), csvHeader: "Allocated (us from trace start)" },
    { key: "free", label: "Released", numeric: true, value: (a) => (a.free_us === null ? null : a.free_us - originUs), text: (a) => (a.free_us === null ? "not in the trace" : formatMs(a.free_us - originUs)), csvHeader: "Released (us from trace start)" },
  ];
  const table = new DataTable<TopAllocation>({
    testid: "memcat-allocations",
    csvName: () => csvFileName("memory_peak_allocations", ctx.run, ctx.worker, `span${ctx.span}`, resp.device ?? ""),
    emptyText: "No allocation of the trace is live at the peak (the memory predates profiling).",
  });
  table.setData({
    columns,
    rows: resp.peak?.top_allocations ?? [],
    sort: { key: "bytes", dir: "desc" },
    expand: { can: (a) => a.stack.length > 0, render: (a) => frameList(a.stack.map(parseFrame), 8), label: "call stack" },
    rowKey: (a) => `${a.alloc_us ?? ""}\u0000${a.bytes}\u0000${a.operator}`,
  });
  return h("div", { class: "ptp-memcat-top" }, h("h4", {}, "Largest allocations live at the peak"), table.el);
}
