/**
 * The Distributed page's charts: stacked bars per rank of the rows shown (computation / overlap /
 * communication / other; transfer / sync), and the heat-map of communication time by rank and step over
 * every rank, drawn by plotly as one image (not a node per cell) from the server's `heatmap` (binned
 * beyond 1,024 ranks).
 */
import type { PlotlyHTMLElement, PlotMouseEvent } from "plotly.js-dist-min";
import { formatDuration } from "../../format";
import type { Theme } from "../../theme";
import { type Data, type Figure, plotlyText } from "../common/charts";
import { at, COLORS, type DistributedHeatmap, type DistributedResponse, num, type RankStats } from "./distributedData";

function barLayout(labels: string[], yTitle: string, n: number): Figure["layout"] {
  return {
    barmode: "stack",
    bargap: n > 32 ? 0.1 : n <= 4 ? 0.55 : 0.3,
    hovermode: "closest",
    showlegend: true,
    legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom", font: { size: 11 }, traceorder: "normal" },
    xaxis: {
      type: "category",
      title: { text: "rank" },
      tickmode: "array",
      tickvals: labels,
      ticktext: labels.map((l) => plotlyText(l)),
      tickangle: n > 16 ? -90 : 0,
      tickfont: { size: n > 32 ? 9 : 11 },
      automargin: true,
    },
    yaxis: { title: { text: yTitle }, rangemode: "tozero", automargin: true },
    margin: { l: 56, r: 16, t: 36, b: 40 },
  };
}

function stackTrace(name: string, labels: string[], values: number[], color: string, ranks: RankStats[]): Data {
  return {
    type: "bar",
    name,
    x: labels,
    y: values.map((v) => v / 1000),
    marker: { color, line: { width: 0 } },
    customdata: values.map((v, i) => `${plotlyText(name)} · rank ${plotlyText(labels[i] ?? "")} (${plotlyText(ranks[i]?.worker ?? "")})<br>${formatDuration(v)} per step`),
    hovertemplate: "%{customdata}<extra></extra>",
  };
}

export function overlapFigure(data: DistributedResponse, labels: string[], step: number | null = null): Figure {
  const r = data.ranks;
  const comp = r.map((x) => at(x, "computation_us", step));
  const overlap = r.map((x) => at(x, "overlap_us", step));
  const commOnly = r.map((x) => Math.max(0, at(x, "communication_us", step) - at(x, "overlap_us", step)));
  const other = r.map((x) => at(x, "other_us", step));
  return {
    data: [
      stackTrace("Computation", labels, comp, COLORS.computation, r),
      stackTrace("Overlap", labels, overlap, COLORS.overlap, r),
      stackTrace("Communication only", labels, commOnly, COLORS.communication, r),
      stackTrace("Other", labels, other, COLORS.other, r),
    ],
    layout: barLayout(labels, "ms per step", r.length),
  };
}

export function waitFigure(data: DistributedResponse, labels: string[], step: number | null = null): Figure {
  const r = data.ranks;
  return {
    data: [
      stackTrace("Transfer", labels, r.map((x) => at(x, "transfer_us", step)), COLORS.transfer, r),
      stackTrace("Sync (wait)", labels, r.map((x) => at(x, "sync_us", step)), COLORS.sync, r),
    ],
    layout: barLayout(labels, "ms per step", r.length),
  };
}

/** Pixel height of one heat-map row: roomy for a few ranks, compact (but labelled) for many, thin beyond 128. */
export function heatmapRowPx(rows: number): number {
  return rows <= 8 ? 36 : rows <= 32 ? 22 : rows <= 128 ? 15 : Math.max(1, Math.floor(1200 / rows));
}

export const HEATMAP_MARGIN = { l: 110, r: 24, t: 44, b: 16 };

/** The heat-map's rows: every rank (or bin of ranks) of the job, from the server's `heatmap`. */
export interface HeatRows {
  labels: string[];
  /** per row: who it is, for the hover */
  who: string[];
  /** µs per row and step: the mean over the row's ranks */
  values: (number | null)[][];
  /** µs per row and step: the max over the row's ranks (null: one rank per row) */
  peak: (number | null)[][] | null;
  /** per row: its first rank's position in rank order (what a click opens) */
  first: number[];
}

/** The rows of `heat`; without one (an older server) the rows shown, labelled by `labels`. */
export function heatRows(data: DistributedResponse, labels: string[]): HeatRows {
  const heat: DistributedHeatmap | null = data.heatmap;
  if (!heat) {
    return {
      labels: labels.map((l) => `rank ${l}`),
      who: data.ranks.map((r, i) => `rank ${labels[i] ?? String(r.rank)} (${r.worker})`),
      values: data.ranks.map((_, i) => data.communication_by_step[i] ?? []),
      peak: null,
      first: data.page.positions,
    };
  }
  const seen = new Map<number, number>();
  for (const r of heat.rank_first) seen.set(r, (seen.get(r) ?? 0) + 1);
  const single = (i: number): boolean => heat.first[i] === heat.last[i];
  return {
    labels: heat.first.map((_, i) => {
      const r = heat.rank_first[i] ?? 0;
      if (!single(i)) return `ranks ${String(r)}–${String(heat.rank_last[i] ?? r)}`;
      return (seen.get(r) ?? 0) > 1 ? `rank ${String(r)} · ${heat.worker[i] ?? ""}` : `rank ${String(r)}`;
    }),
    who: heat.first.map((_, i) => (single(i) ? `rank ${String(heat.rank_first[i])} (${heat.worker[i] ?? ""})` : `ranks ${String(heat.rank_first[i])}–${String(heat.rank_last[i])} (${String((heat.last[i] ?? 0) - (heat.first[i] ?? 0) + 1)} ranks)`)),
    values: heat.mean,
    peak: heat.binned ? heat.max : null,
    first: heat.first,
  };
}

export function heatmapFigure(data: DistributedResponse, rows: HeatRows, theme: Theme): Figure {
  const steps = data.steps;
  const x = steps.map((s) => `step ${s}`);
  const z = rows.values.map((row) => steps.map((_s, j) => {
    const v = num(row[j]);
    return v === null ? null : v / 1000;
  }));
  const text = rows.values.map((row, i) =>
    steps.map((s, j) => {
      const v = num(row[j]);
      const peak = rows.peak ? num(rows.peak[i]?.[j]) : null;
      const most = peak === null ? "" : ` (mean; max ${formatDuration(peak)})`;
      return `${plotlyText(rows.who[i] ?? "")} · step ${plotlyText(s)}<br>communication: ${v === null ? "—" : formatDuration(v)}${most}`;
    }),
  );
  const dark = theme === "dark";
  const n = rows.values.length;
  return {
    data: [
      {
        type: "heatmap",
        x,
        y: rows.labels.map((l) => plotlyText(l)),
        z,
        text,
        hovertemplate: "%{text}<extra></extra>",
        colorscale: dark
          ? [[0, "#25303b"], [0.5, "#3f7f9f"], [1, "#ffb870"]]
          : [[0, "#f3f7fb"], [0.5, "#6baed6"], [1, "#08306b"]],
        colorbar: { title: { text: "ms", side: "right" }, thickness: 12, len: n > 24 ? 0.5 : 1, y: 1, yanchor: "top", outlinewidth: 0 },
        xgap: 1,
        ygap: n > 32 ? 0 : 1,
        hoverongaps: false,
      },
    ],
    layout: {
      xaxis: { side: "top", type: "category", tickfont: { size: 11 }, showgrid: false },
      yaxis: { type: "category", autorange: "reversed", tickfont: { size: n > 32 ? 10 : 11 }, showgrid: false, automargin: true, ...(n > 128 ? { nticks: 32 } : {}) },
      margin: HEATMAP_MARGIN,
    },
  };
}

/** Call `open(row index, step index)` when a heatmap cell is clicked. */
export function onHeatmapClick(div: HTMLElement, open: (rank: number, step: number) => void): void {
  const gd = div as PlotlyHTMLElement;
  if (typeof gd.on !== "function") return;
  div.classList.add("ptp-clickable-chart");
  gd.on("plotly_click", (ev: PlotMouseEvent) => {
    const cell = ev.points[0]?.pointIndex as unknown;
    if (Array.isArray(cell) && typeof cell[0] === "number" && typeof cell[1] === "number") open(cell[0], cell[1]);
  });
}

