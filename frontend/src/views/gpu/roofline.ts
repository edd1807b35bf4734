/**
 * The GPU page's roofline card (GET ./roofline): each kernel (or operator) as a point, arithmetic intensity
 * against achieved FLOP/s on log axes, under the roofs of the device (docs/guide/roofline.md); a point's area
 * follows its time, and a click opens its row in the Kernel (or Operator) view. Beside it, the points ranked by
 * wasted time = time × (1 − achieved / attainable), XProf's ranking.
 */
import type { PlotlyHTMLElement, PlotMouseEvent } from "plotly.js-dist-min";
import { card, infoIcon } from "../../components";
import { h } from "../../dom";
import { DASH, formatBytes, formatFixed, formatFlops, formatInt, formatPercent1, isNum } from "../../format";
import { writeViewUrlState } from "../../urlState";
import { type Charts, chartDiv, type Figure, plotlyText, shorten } from "../common/charts";
import { durationColumn } from "../common/columns";
import { csvFileName } from "../common/csv";
import { clampedName, type Column, DataTable } from "../common/table";
import { viewLink } from "../common/traceLink";
import { groupingSwitch } from "../common/ui";
import type { ViewContext } from "../types";
import {
  boundText,
  drawable,
  intensityRange,
  markerSizes,
  memoryLine,
  pointsByRoof,
  ROOF_COLORS,
  roofLine,
  roofsToDraw,
  type RooflineGrouping,
  type RooflinePoint,
  type RooflineResponse,
} from "./rooflineData";

export const ROOFLINE_HELP = {
  card: "Each point is a kernel (or the operator whose work its kernels did): FLOPs per byte moved (x) against FLOP/s achieved (y), both log scales. The roofs: the memory bandwidth (slanted) and the peak of each compute class (flat), from the device's datasheet. A point far below its roof wasted time.",
  wasted: "time × (1 − achieved / attainable at the point's intensity): how much shorter its kernels would be at the roof. The table is ranked by it.",
  how: "Where the FLOPs and bytes come from: the trace's own figures, or formulas over the recorded input shapes (docs/guide/roofline.md).",
  roof: "The compute roof the point is held to: the tensor-core class of its dtype where its kernels run on tensor cores, else the CUDA-core FP32 peak.",
};

const VIEW_OF: Record<RooflineGrouping, string> = { kernel: "Kernel", operator: "Operator" };

/** Open a point's row: the Kernel (or Operator) view searched for exactly its name. */
export function openPoint(ctx: ViewContext, grouping: RooflineGrouping, name: string): void {
  writeViewUrlState({ q: `"${name}"` });
  ctx.navigate(VIEW_OF[grouping]);
}

function hoverText(p: RooflinePoint): string {
  const lines = [
    plotlyText(shorten(p.name, 80)),
    `${formatFlops(p.achieved_flops_per_s)} at ${formatFixed(p.intensity, 2)} FLOP/byte · ${formatInt(p.calls)} kernels, ${formatFixed(p.time_us / 1000, 3)} ms`,
  ];
  if (isNum(p.attainable_flops_per_s)) lines.push(`${plotlyText(boundText(p))} (attainable ${formatFlops(p.attainable_flops_per_s)})`);
  if (isNum(p.wasted_us)) lines.push(`wasted ${formatFixed(p.wasted_us / 1000, 3)} ms`);
  return lines.join("<br>");
}

export function rooflineFigure(resp: RooflineResponse): Figure {
  const roofs = roofsToDraw(resp);
  const [lo, hi] = intensityRange(resp.points, roofs);
  const used = new Set(resp.points.map((p) => p.roof));
  const data: Figure["data"] = roofs.map((r) => ({
    type: "scatter" as const,
    mode: "lines" as const,
    name: `${r.label} · ${formatFlops(r.peak_flops_per_s)}`,
    ...roofLine(r, lo, hi),
    line: { color: ROOF_COLORS[r.roof] ?? "#9e9e9e", width: 2, dash: used.has(r.roof) ? ("solid" as const) : ("dot" as const) },
    hoverinfo: "skip" as const,
  }));
  const memory = memoryLine(resp.roofs.bandwidth_bytes_per_s, roofs, lo, hi);
  if (memory) {
    const bw = resp.roofs.bandwidth_bytes_per_s ?? 0;
    data.unshift({ type: "scatter" as const, mode: "lines" as const, name: `Memory · ${formatFixed(bw / 1e12, 2)} TB/s`, ...memory, line: { color: "#7f7f7f", width: 2 }, hoverinfo: "skip" as const });
  }
  const sizes = markerSizes(resp.points);
  for (const [roof, items] of pointsByRoof(resp.points)) {
    data.push({
      type: "scatter" as const,
      mode: "markers" as const,
      name: `${roof === "none" ? "no roof" : roof.toUpperCase()} points`,
      x: items.map((i) => i.point.intensity as number),
      y: items.map((i) => i.point.achieved_flops_per_s as number),
      customdata: items.map((i) => i.index),
      text: items.map((i) => hoverText(i.point)),
      hovertemplate: "%{text}<extra></extra>",
      marker: { size: items.map((i) => sizes[i.index] ?? 8), color: ROOF_COLORS[roof] ?? "#9e9e9e", opacity: 0.75, line: { width: 1, color: "rgba(0,0,0,0.35)" } },
    });
  }
  return {
    data,
    layout: {
      hovermode: "closest",
      xaxis: { type: "log", title: { text: "arithmetic intensity (FLOPs per byte)" }, range: [Math.log10(lo), Math.log10(hi)], automargin: true },
      yaxis: { type: "log", title: { text: "achieved FLOP/s" }, exponentformat: "SI", automargin: true },
      legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom", font: { size: 11 } },
      margin: { l: 64, r: 16, t: 40, b: 48 },
    },
  };
}

function numberColumn(key: string, label: string, help: string, get: (p: RooflinePoint) => number | null, text: (v: number) => string): Column<RooflinePoint> {
  return { key, label, help, numeric: true, value: get, text: (p) => { const v = get(p); return isNum(v) ? text(v) : DASH; } };
}

function columns(ctx: ViewContext, grouping: RooflineGrouping): Column<RooflinePoint>[] {
  const view = VIEW_OF[grouping];
  return [
    {
      key: "name",
      label: grouping === "kernel" ? "Kernel" : "Operator",
      value: (p) => p.name,
      render: (p) => h("span", {}, clampedName(p.name, "kernel-name"), viewLink(ctx, { label: `${view} ↗`, title: `${p.name} in the ${view} view`, testid: "roofline-row-link", view, state: { q: `"${p.name}"` } })),
      title: (p) => `${p.name}\n${p.how}`,
      cls: "ptp-name-col",
    },
    durationColumn<RooflinePoint>("wasted", "Wasted", ROOFLINE_HELP.wasted, (p) => p.wasted_us),
    durationColumn<RooflinePoint>("time", "Time", "Summed kernel time.", (p) => p.time_us),
    numberColumn("fraction", "% of roof", "Achieved / attainable FLOP/s at the point's intensity.", (p) => p.fraction_of_roof, (v) => formatPercent1(v)),
    { key: "bound", label: "Bound", help: "Compute-bound where intensity × bandwidth reaches the peak, else memory-bound.", value: (p) => p.bound ?? null },
    { key: "roof", label: "Roof", help: ROOFLINE_HELP.roof, value: (p) => p.roof ?? null },
    numberColumn("achieved", "Achieved", "FLOPs / time.", (p) => p.achieved_flops_per_s, (v) => formatFlops(v)),
    numberColumn("attainable", "Attainable", "min(peak, intensity × bandwidth).", (p) => p.attainable_flops_per_s, (v) => formatFlops(v)),
    numberColumn("bandwidth", "Bandwidth", "Bytes moved / time (the memory roof: the device's bandwidth).", (p) => p.achieved_bytes_per_s, (v) => `${formatFixed(v / 1e9, 1)} GB/s`),
    numberColumn("intensity", "FLOPs/byte", "Arithmetic intensity: FLOPs / bytes moved.", (p) => p.intensity, (v) => formatFixed(v, 2)),
    numberColumn("flops", "FLOPs", ROOFLINE_HELP.how, (p) => p.flops, (v) => formatFlops(v, "FLOP")),
    { key: "bytes", label: "Bytes", help: "Inputs read + outputs written (a lower bound on the traffic).", numeric: true, value: (p) => p.bytes, text: (p) => formatBytes(p.bytes) },
    { key: "calls", label: "Kernels", numeric: true, value: (p) => p.calls, text: (p) => formatInt(p.calls) },
    { key: "how", label: "How", help: ROOFLINE_HELP.how, value: (p) => p.source ?? null, title: (p) => p.how },
  ];
}

function deviceLine(resp: RooflineResponse): HTMLElement {
  const d = resp.device;
  const hidden = resp.points.filter((p) => !drawable(p)).length;
  const t = resp.totals;
  const what = d.table_entry ? `${d.table_entry} peaks (${d.source ?? ""})` : (d.note ?? "no peaks");
  return h(
    "p",
    { class: "ptp-muted ptp-card-sub", testid: "roofline-device" },
    `${d.name ?? "Unknown device"}: ${what}. ${formatFlops(t.achieved_flops_per_s)} achieved over the kernels whose work is known (${formatFixed(t.estimated_time_us / 1000, 2)} of ${formatFixed(t.kernel_time_us / 1000, 2)} ms of kernel time)`,
    resp.unestimated.kernels ? `; ${formatInt(resp.unestimated.kernels)} kernels (${formatFixed(resp.unestimated.time_us / 1000, 2)} ms) have no estimate.` : ".",
    hidden ? ` ${formatInt(hidden)} points without FLOPs or bytes (copies, …) are in the table only.` : "",
  );
}

/** The card and its chart drawing; the group-by switch refetches (each grouping once) and redraws both. */
export function rooflineCard(ctx: ViewContext, first: RooflineResponse): { el: HTMLElement; draw: (charts: Charts) => Promise<void> } {
  let current = first;
  let charts: Charts | null = null;
  const chart = chartDiv("roofline-chart", 440);
  const status = h("span", { class: "ptp-muted", attrs: { "aria-live": "polite" } });
  const select = h("select", { testid: "roofline-group-by", attrs: { "aria-label": "Points" }, onChange: () => { void setGrouping(select.value as RooflineGrouping); } },
    h("option", { attrs: { value: "kernel" } }, "Kernels"), h("option", { attrs: { value: "operator" } }, "Operators"));
  const table = new DataTable<RooflinePoint>({ testid: "roofline-table", csvName: () => csvFileName("roofline", ctx.run, ctx.worker, `span${ctx.span}`, current.group_by), emptyText: "No kernel's work could be estimated (record with record_shapes=True).", controls: [h("label", { class: "ptp-picker" }, "Points", select), status] });
  const device = h("div", {});
  const show = (resp: RooflineResponse): void => {
    current = resp;
    device.replaceChildren(deviceLine(resp));
    table.setData({ columns: columns(ctx, resp.group_by), rows: resp.points, sort: { key: "wasted", dir: "desc" }, rowKey: (p) => p.name });
    if (charts) void charts.draw(chart, () => rooflineFigure(resp));
  };
  const cache = new Map<RooflineGrouping, RooflineResponse>([[first.group_by, first]]);
  const setGrouping = groupingSwitch(ctx, "roofline", cache, select, status, (_g: RooflineGrouping, resp: RooflineResponse) => { show(resp); });
  show(first);
  const el = card({ testid: "card-roofline" }, h("div", { class: "ptp-card-head" }, h("h3", {}, "Roofline", infoIcon(ROOFLINE_HELP.card)), h("span", { class: "ptp-muted" }, "click a point to open its row")), device, chart, table.el);
  const draw = async (c: Charts): Promise<void> => {
    charts = c;
    await c.draw(chart, () => rooflineFigure(current));
    const gd = chart as PlotlyHTMLElement;
    if (typeof gd.on !== "function") return;
    chart.classList.add("ptp-clickable-chart");
    gd.on("plotly_click", (ev: PlotMouseEvent) => {
      const index = ev.points[0]?.customdata;
      const point = typeof index === "number" ? current.points[index] : undefined;
      if (point) openPoint(ctx, current.group_by, point.name);
    });
  };
  return { el, draw };
}
