/**
 * The Distributed page (GET ./distributed?run=&span=): every rank of the selected run for the selected
 * span, side by side. A straggler call-out, notes, a rank table (means per step), stacked bars of
 * computation / overlap / communication / other and of transfer / sync per rank, a heat-map of
 * communication time by rank and step (readable at 64+ ranks), and the collectives of one rank.
 *
 * The page is per run and span, not per worker: the worker picker does not apply. While some ranks
 * are still loading the server answers 409: the page shows their progress and asks again.
 */
import type { PlotlyHTMLElement, PlotMouseEvent } from "plotly.js-dist-min";
import { ApiError } from "../../api";
import { card, infoIcon, progressBar } from "../../components";
import { type Child, h, replaceChildren } from "../../dom";
import { formatBytes, formatDuration, formatExactUs, formatFixed, formatInt } from "../../format";
import type { Theme } from "../../theme";
import type { RunsResponse } from "../../types";
import { Charts, chartDiv, type Data, type Figure, plotlyText } from "../common/charts";
import { type Column, DataTable } from "../common/table";
import { rowLinkButton, traceWindowState } from "../common/traceLink";
import { left, loadErrorCard } from "../common/ui";
import { csvFileName } from "../common/csv";
import { readViewUrlState, writeViewUrlState } from "../../urlState";
import type { ViewContext } from "../types";

// ------------------------------------------------------------------------------------------- contract

export interface CollectiveStats {
  name: string;
  calls: number;
  /** kernels that ran in the window but were launched before it (not in calls or bytes) */
  prelaunched?: number;
  bytes: number;
  total_us: number;
  avg_us?: number;
  transfer_us?: number;
  bandwidth_gbps?: number | null;
}

export interface RankDevice {
  id?: number | string | null;
  name?: string | null;
}

export interface RankStats {
  worker: string;
  rank: number;
  steps?: number;
  computation_us: number;
  communication_us: number;
  /** null where overlap cannot be measured on one timeline (CPU-only rank, host-only collectives): see overlap_note */
  overlap_us: number | null;
  overlap_note?: string | null;
  other_us?: number;
  transfer_us: number;
  sync_us: number;
  host_wait_us?: number;
  host_idle_us?: number;
  step_us?: number;
  collectives: CollectiveStats[];
  devices?: RankDevice[];
  host?: string;
  process?: number | null;
  per_step?: Partial<Record<StepMetric, number[] | null>>;
  /** each step's [start, end] µs in this rank's own trace */
  step_windows_us?: number[][];
}

/** The window of step `step` (null: all steps) in rank `r`'s trace, or null when it recorded no step. */
export function rankStepWindow(r: RankStats, step: number | null): [number, number] | null {
  const w = Array.isArray(r.step_windows_us) ? r.step_windows_us : [];
  const pick = step === null ? [w[0], w[w.length - 1]] : [w[step], w[step]];
  const a = pick[0]?.[0];
  const b = pick[1]?.[1];
  return typeof a === "number" && typeof b === "number" && b >= a ? [a, b] : null;
}

/** Open rank `r`'s own Trace view on a step (null: all steps). */
function openRankTrace(ctx: ViewContext, r: RankStats, step: number | null): void {
  const w = rankStepWindow(r, step);
  if (!w) return;
  writeViewUrlState(traceWindowState(w[0], w[1]));
  ctx.navigate("Trace", r.worker === ctx.worker ? undefined : { worker: r.worker });
}

type StepMetric = "computation_us" | "communication_us" | "overlap_us" | "other_us" | "transfer_us" | "sync_us";

/** A rank's value of a metric: the mean per step, or one step's value when a step is chosen. */
function at(r: RankStats, key: StepMetric, step: number | null): number {
  if (step !== null) {
    const v = r.per_step?.[key]?.[step];
    if (typeof v === "number") return v;
  }
  return us(r[key]);
}

export interface Straggler {
  rank: number;
  worker: string;
  text: string;
  others_wait_us?: number;
  own_wait_us?: number;
}

/** Per process group of two or more ranks: its slowest rank and the rank its members wait for most. */
export interface GroupStragglers {
  group: string;
  ranks: number;
  matched: number;
  slowest: { rank: number; worker: string; step_us: number };
  most_waited_for: { rank: number; worker: string; own_wait_us: number; others_wait_us: number };
}

export interface DistributedResponse {
  world_size: number;
  backend: string | null;
  ranks: RankStats[];
  steps: string[];
  communication_by_step: number[][];
  straggler: Straggler | null;
  groups: GroupStragglers[];
  notes: string[];
}

// ------------------------------------------------------------------------------------------- help

export const HELP = {
  step: "Mean wall time of a step on this rank (ProfilerStep start to the end of the GPU work it launched).",
  computation: "GPU kernel time (CPU work on CPU-only ranks) that does not overlap communication, mean per step.",
  communication: "Time in which a collective ran, mean per step: its NCCL (or other device) kernel, or its host span when it launched none (Gloo, CPU-only runs). The Overview's Communication category uses the same definition.",
  overlap: "Time in which computation kernels ran while a device collective was running (communication hidden behind computation), mean per step. n/a on CPU-only ranks and where collectives ran on the host only: host time cannot be overlapped with GPU kernels.",
  other: "Step time with neither computation nor communication (host-side work, data loading, idle), mean per step.",
  transfer: "The fastest rank's duration of each collective: time really spent moving data (mean per step).",
  sync: "Time waiting in collectives for other ranks: the collective's time on this rank beyond the fastest rank's (mean per step).",
  hostWait: "Host blocked in cudaDeviceSynchronize/cudaStreamSynchronize/cudaEventSynchronize or a scalar read (.item()), mean per step.",
  hostIdle: "Host time with no recorded activity (no operator, runtime call or Python function), mean per step: sleep, I/O or unprofiled work.",
  bandwidth: "Effective bandwidth: bytes / transfer time (bytes = max(input, output) elements × dtype size).",
  heatmap: "Communication time of each rank in each step. A rank much lighter than the others usually arrives last (the others wait for it).",
} as const;

const COLORS = {
  computation: "#4e79a7",
  overlap: "#b07aa1",
  communication: "#59a14f",
  other: "#9e9e9e",
  transfer: "#59a14f",
  sync: "#e15759",
};

const num = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);
const us = (v: unknown): number => num(v) ?? 0;

/** Labels that stay unique when two traces claim the same rank (then the worker tells them apart). */
export function rankLabels(ranks: readonly RankStats[]): string[] {
  const seen = new Map<number, number>();
  for (const r of ranks) seen.set(r.rank, (seen.get(r.rank) ?? 0) + 1);
  return ranks.map((r) => ((seen.get(r.rank) ?? 0) > 1 ? `${r.rank} · ${r.worker}` : String(r.rank)));
}

function gpuNames(r: RankStats): string {
  const devices = Array.isArray(r.devices) ? r.devices : [];
  const names = devices.map((d) => (d.name ? (devices.length > 1 && d.id !== null && d.id !== undefined ? `${String(d.id)}: ${d.name}` : d.name) : null));
  const shown = names.filter((n): n is string => n !== null);
  return shown.length ? shown.join(", ") : "—";
}

function gpuTitle(r: RankStats): string {
  const devices = Array.isArray(r.devices) ? r.devices : [];
  if (!devices.length) return "No GPU activity recorded on this rank.";
  return devices.map((d) => `GPU ${String(d.id ?? "?")}: ${d.name ?? "unknown"}`).join("\n") + "\n(GPUs this rank's trace used)";
}

function normalize(raw: DistributedResponse): DistributedResponse {
  const ranks = (Array.isArray(raw.ranks) ? raw.ranks : []).map((r) => ({
    ...r,
    collectives: Array.isArray(r.collectives) ? r.collectives : [],
  }));
  return {
    world_size: num(raw.world_size) ?? ranks.length,
    backend: typeof raw.backend === "string" ? raw.backend : null,
    ranks,
    steps: Array.isArray(raw.steps) ? raw.steps.map(String) : [],
    communication_by_step: Array.isArray(raw.communication_by_step) ? raw.communication_by_step : [],
    straggler: raw.straggler && typeof raw.straggler.text === "string" ? raw.straggler : null,
    groups: Array.isArray(raw.groups) ? raw.groups.filter((g) => typeof g.group === "string" && typeof g.slowest === "object" && typeof g.most_waited_for === "object") : [],
    notes: Array.isArray(raw.notes) ? raw.notes.filter((n) => typeof n === "string") : [],
  };
}

// ------------------------------------------------------------------------------------------- loading

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = window.setTimeout(resolve, ms);
    signal.addEventListener("abort", () => { window.clearTimeout(t); resolve(); }, { once: true });
  });
}

/** The load state of this span over the run's workers, from ./runs (null when it cannot be had). */
async function spanProgress(ctx: ViewContext): Promise<{ done: number; total: number; fraction: number } | null> {
  try {
    const runs = await ctx.api.getJSON<RunsResponse>("runs", undefined, { signal: ctx.signal, timeoutMs: 10_000 });
    const run = (Array.isArray(runs.runs) ? runs.runs : []).find((r) => r.name === ctx.run);
    const spans = (run?.workers ?? []).flatMap((w) => w.spans.filter((s) => s.span === ctx.span));
    if (!spans.length) return null;
    const done = spans.filter((s) => s.state === "ready" || s.state === "failed").length;
    const fraction = spans.reduce((sum, s) => sum + (s.state === "ready" || s.state === "failed" ? 1 : Math.min(1, Math.max(0, s.progress || 0))), 0) / spans.length;
    return { done, total: spans.length, fraction };
  } catch {
    return null;
  }
}

function waitingCard(message: string, progress: { done: number; total: number; fraction: number } | null): HTMLElement {
  return card(
    { class: "ptp-warn-card", testid: "dist-loading", title: "Waiting for every rank to load" },
    h("p", { testid: "dist-loading-message" }, message),
    progress
      ? h(
          "div",
          { class: "ptp-dist-progress" },
          progressBar(progress.fraction, "Ranks loaded"),
          h("span", { class: "ptp-muted" }, `${formatInt(progress.done)} of ${formatInt(progress.total)} ranks ready`),
        )
      : null,
    h("p", { class: "ptp-muted" }, "The comparison needs all ranks of this span; the page fills in by itself."),
  );
}

async function load(container: HTMLElement, ctx: ViewContext): Promise<DistributedResponse | null> {
  for (;;) {
    try {
      const raw = await ctx.api.getJSON<DistributedResponse>(
        "distributed", { run: ctx.run, span: ctx.span }, { signal: ctx.signal, timeoutMs: 300_000 });
      return normalize(raw);
    } catch (err) {
      if (left(ctx)) return null;
      if (err instanceof ApiError && err.status === 409) {
        const progress = await spanProgress(ctx);
        if (left(ctx)) return null;
        replaceChildren(container, waitingCard(err.message, progress));
        await sleep(2000, ctx.signal);
        if (left(ctx)) return null;
        continue;
      }
      replaceChildren(container, loadErrorCard(err, "the distributed view"));
      return null;
    }
  }
}

// ------------------------------------------------------------------------------------------- tables

function durationColumn(key: keyof RankStats, label: string, help: string): Column<RankStats> {
  return {
    key,
    label,
    help,
    numeric: true,
    value: (r) => num(r[key]),
    text: (r) => formatDuration(num(r[key])),
    exact: (r) => formatExactUs(num(r[key])),
    csvHeader: `${label} (µs per step)`,
  };
}

/** Overlap, or "n/a" with the server's reason where it cannot be measured. */
function overlapColumn(): Column<RankStats> {
  const column = durationColumn("overlap_us", "Overlap", HELP.overlap);
  return {
    ...column,
    text: (r) => (r.overlap_us === null ? "n/a" : formatDuration(num(r.overlap_us))),
    title: (r) => (r.overlap_us === null ? (r.overlap_note ?? "n/a") : `${formatExactUs(num(r.overlap_us))}\n${HELP.overlap}`),
  };
}

/** One line per distinct reason why some ranks have no overlap number (empty when every rank has one). */
export function overlapNotes(ranks: readonly RankStats[], labels: readonly string[]): string[] {
  const byReason = new Map<string, string[]>();
  ranks.forEach((r, i) => {
    if (r.overlap_us !== null) return;
    const reason = r.overlap_note ?? "n/a";
    byReason.set(reason, [...(byReason.get(reason) ?? []), labels[i] ?? String(r.rank)]);
  });
  return [...byReason].map(([reason, who]) => `Overlap on rank${who.length > 1 ? "s" : ""} ${who.join(", ")}: ${reason} The chart shows their communication as not overlapped.`);
}

/** The rank table's columns; `trace` renders a row's link to that rank's Trace view. */
function rankColumns(labels: Map<RankStats, string>, trace: (r: RankStats) => HTMLElement | null): Column<RankStats>[] {
  return [
    {
      key: "rank",
      label: "Rank",
      numeric: true,
      help: "The rank (from the trace's distributedInfo, else the worker name's trailing number).",
      value: (r) => r.rank,
      text: (r) => labels.get(r) ?? String(r.rank),
    },
    {
      key: "worker",
      label: "Worker",
      value: (r) => r.worker,
      render: (r) => h("span", {}, r.worker, trace(r)),
      cls: "ptp-nowrap",
    },
    { key: "host", label: "Host", value: (r) => r.host ?? null, cls: "ptp-nowrap" },
    { key: "process", label: "Process", help: "The host process id (pid) of the rank.", numeric: true, value: (r) => r.process ?? null },
    { key: "gpu", label: "GPU", value: (r) => gpuNames(r), title: gpuTitle, cls: "ptp-nowrap" },
    durationColumn("step_us", "Step time", HELP.step),
    durationColumn("computation_us", "Computation", HELP.computation),
    durationColumn("communication_us", "Communication", HELP.communication),
    overlapColumn(),
    durationColumn("other_us", "Other", HELP.other),
    durationColumn("transfer_us", "Transfer", HELP.transfer),
    durationColumn("sync_us", "Sync (wait)", HELP.sync),
    durationColumn("host_wait_us", "Host wait", HELP.hostWait),
    durationColumn("host_idle_us", "Host idle", HELP.hostIdle),
  ];
}

const who = (r: { rank: number; worker: string }): string => `rank ${String(r.rank)} (${r.worker})`;

function groupColumns(): Column<GroupStragglers>[] {
  return [
    { key: "group", label: "Process group", value: (g) => g.group, cls: "ptp-name-col" },
    { key: "ranks", label: "Ranks", numeric: true, help: "Ranks that ran collectives in this group.", value: (g) => num(g.ranks), text: (g) => formatInt(g.ranks) },
    { key: "matched", label: "Matched collectives", numeric: true, help: "Collectives every rank has, matched by (process group, sequence number).", value: (g) => num(g.matched), text: (g) => formatInt(g.matched) },
    { key: "waited", label: "Most waited for", help: "The member that waits least in the group's matched collectives while the others wait: it arrives last.", value: (g) => g.most_waited_for.rank, text: (g) => who(g.most_waited_for) },
    {
      key: "others_wait",
      label: "Others wait",
      numeric: true,
      help: "Mean wait per step of the other members in this group's matched collectives (their time beyond the fastest rank's).",
      value: (g) => num(g.most_waited_for.others_wait_us),
      text: (g) => formatDuration(num(g.most_waited_for.others_wait_us)),
      exact: (g) => formatExactUs(num(g.most_waited_for.others_wait_us)),
      csvHeader: "Others wait (µs per step)",
    },
    { key: "own_wait", label: "Its own wait", numeric: true, help: "The same for the most waited-for rank.", value: (g) => num(g.most_waited_for.own_wait_us), text: (g) => formatDuration(num(g.most_waited_for.own_wait_us)), csvHeader: "Its own wait (µs per step)" },
    { key: "slowest", label: "Slowest rank", help: "The member with the longest mean step.", value: (g) => g.slowest.rank, text: (g) => who(g.slowest) },
    { key: "slowest_step", label: "Its step", numeric: true, help: HELP.step, value: (g) => num(g.slowest.step_us), text: (g) => formatDuration(num(g.slowest.step_us)), csvHeader: "Its step (µs)" },
  ];
}

function collectiveColumns(): Column<CollectiveStats>[] {
  const dur = (key: "total_us" | "avg_us" | "transfer_us", label: string, help: string): Column<CollectiveStats> => ({
    key,
    label,
    help,
    numeric: true,
    value: (c) => num(c[key]),
    text: (c) => formatDuration(num(c[key])),
    exact: (c) => formatExactUs(num(c[key])),
    csvHeader: `${label} (µs)`,
  });
  return [
    { key: "name", label: "Collective", value: (c) => c.name, cls: "ptp-name-col" },
    {
      key: "calls",
      label: "Calls",
      numeric: true,
      help: "Collectives this rank issued in the profiled window (host call and kernel counted once). Kernels that ran in the window but were launched before it (warm-up) are shown as \"+N earlier\": their time counts, they are not calls of this window.",
      value: (c) => num(c.calls),
      text: (c) => (num(c.prelaunched ?? 0) ? `${formatInt(c.calls)} (+${formatInt(c.prelaunched)} earlier)` : formatInt(c.calls)),
    },
    {
      key: "bytes",
      label: "Bytes",
      numeric: true,
      help: "Data size over all calls: max(input, output) elements × dtype size.",
      value: (c) => num(c.bytes),
      text: (c) => formatBytes(num(c.bytes)),
      exact: (c) => `${formatInt(c.bytes)} B`,
      csvHeader: "Bytes",
    },
    dur("total_us", "Total", "Time in which this collective ran on this rank, within the steps (as the rank table)."),
    dur("avg_us", "Avg latency", "Total / calls."),
    dur("transfer_us", "Transfer", HELP.transfer.replace(" (mean per step)", " (summed over the steps: the collectives' transfer adds up to the rank table's Transfer × steps)")),
    {
      key: "bandwidth_gbps",
      label: "Bandwidth",
      numeric: true,
      help: HELP.bandwidth,
      value: (c) => num(c.bandwidth_gbps),
      text: (c) => (num(c.bandwidth_gbps) === null ? "—" : `${formatFixed(c.bandwidth_gbps, 1)} GB/s`),
      exact: (c) => (num(c.bandwidth_gbps) === null ? "no data moved or no transfer time" : `${String(c.bandwidth_gbps)} GB/s`),
      csvHeader: "Bandwidth (GB/s)",
    },
  ];
}

// ------------------------------------------------------------------------------------------- charts

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

function overlapFigure(data: DistributedResponse, labels: string[], step: number | null = null): Figure {
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

function waitFigure(data: DistributedResponse, labels: string[], step: number | null = null): Figure {
  const r = data.ranks;
  return {
    data: [
      stackTrace("Transfer", labels, r.map((x) => at(x, "transfer_us", step)), COLORS.transfer, r),
      stackTrace("Sync (wait)", labels, r.map((x) => at(x, "sync_us", step)), COLORS.sync, r),
    ],
    layout: barLayout(labels, "ms per step", r.length),
  };
}

/** Pixel height of one heat-map row: roomy for a few ranks, compact (but labelled) for many. */
export function heatmapRowPx(ranks: number): number {
  return ranks <= 8 ? 36 : ranks <= 32 ? 22 : 15;
}

const HEATMAP_MARGIN = { l: 110, r: 24, t: 44, b: 16 };

function heatmapFigure(data: DistributedResponse, labels: string[], theme: Theme): Figure {
  const ranks = data.ranks;
  const steps = data.steps;
  const y = labels.map((l) => `rank ${l}`);
  const x = steps.map((s) => `step ${s}`);
  const z = ranks.map((_, i) => {
    const row = data.communication_by_step[i] ?? [];
    return steps.map((_s, j) => {
      const v = num(row[j]);
      return v === null ? null : v / 1000;
    });
  });
  const text = ranks.map((r, i) =>
    steps.map((s, j) => {
      const v = num(data.communication_by_step[i]?.[j]);
      return `rank ${plotlyText(labels[i] ?? String(r.rank))} (${plotlyText(r.worker)}) · step ${plotlyText(s)}<br>communication: ${v === null ? "—" : formatDuration(v)}`;
    }),
  );
  const dark = theme === "dark";
  const n = ranks.length;
  return {
    data: [
      {
        type: "heatmap",
        x,
        y,
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
      yaxis: { type: "category", autorange: "reversed", tickfont: { size: n > 32 ? 10 : 11 }, showgrid: false, automargin: true },
      margin: HEATMAP_MARGIN,
    },
  };
}

// ------------------------------------------------------------------------------------------- page

function fact(label: string, value: Child, title?: string, testid?: string): HTMLElement {
  return h("div", { class: "ptp-metric", title, testid }, h("div", { class: "ptp-metric-label" }, label), h("div", { class: "ptp-metric-value" }, value));
}

/** Call `open(rank index, step index)` when a heatmap cell is clicked. */
function onHeatmapClick(div: HTMLElement, open: (rank: number, step: number) => void): void {
  const gd = div as PlotlyHTMLElement;
  if (typeof gd.on !== "function") return;
  div.classList.add("ptp-clickable-chart");
  gd.on("plotly_click", (ev: PlotMouseEvent) => {
    const cell = ev.points[0]?.pointIndex as unknown;
    if (Array.isArray(cell) && typeof cell[0] === "number" && typeof cell[1] === "number") open(cell[0], cell[1]);
  });
}

export async function render(container: HTMLElement, ctx: ViewContext): Promise<(() => void) | undefined> {
  replaceChildren(container, h("p", { class: "ptp-muted", testid: "dist-loading-first" }, "Analysing all ranks of this span…"));
  const data = await load(container, ctx);
  if (!data || left(ctx)) return undefined;
  if (data.ranks.length === 0) {
    replaceChildren(container, card({ testid: "dist-empty", title: "No ranks" }, h("p", {}, "No worker of this span has distributed data.")));
    return undefined;
  }

  const labels = rankLabels(data.ranks);
  const labelOf = new Map(data.ranks.map((r, i) => [r, labels[i] ?? String(r.rank)]));
  const steps = data.ranks.map((r) => r.steps).find((s) => typeof s === "number");
  const meanStep = data.ranks.reduce((s, r) => s + us(r.step_us), 0) / data.ranks.length;

  // Rank table
  const rankTable = new DataTable<RankStats>({
    testid: "rank-table",
    csvName: () => csvFileName(ctx.run, `span${ctx.span}`, "ranks"),
    pageSizes: [16, 32, 64, 128],
    pageSize: 16,
  });
  rankTable.setData({
    columns: rankColumns(labelOf, (r) =>
      rankStepWindow(r, null)
        ? rowLinkButton({
            label: "trace ↗",
            title: `Open ${r.worker}'s Trace view on the step chosen under "Step" (all steps when none is)`,
            testid: "rank-trace",
            onClick: () => { openRankTrace(ctx, r, stepSelect.value === "" ? null : Number(stepSelect.value)); },
          })
        : null),
    rows: data.ranks,
    rowKey: (r) => `${r.worker}#${r.rank}`,
    searches: [{ key: "worker", label: "Search workers", placeholder: "Filter by worker or host", text: (r) => `${r.worker} ${r.host ?? ""} ${String(r.rank)}` }],
    sort: { key: "rank", dir: "asc" },
  });

  const groupTable = new DataTable<GroupStragglers>({
    testid: "group-table",
    csvName: () => csvFileName(ctx.run, `span${ctx.span}`, "process_groups"),
    controls: null,
    emptyText: "No process group spans two or more ranks.",
  });
  groupTable.setData({ columns: groupColumns(), rows: data.groups, rowKey: (g) => g.group, sort: { key: "others_wait", dir: "desc" } });

  // Collectives of one rank
  const collTable = new DataTable<CollectiveStats>({
    testid: "collectives-table",
    csvName: () => csvFileName(ctx.run, `span${ctx.span}`, `rank${rankSelect.value}`, "collectives"),
    controls: null,
    emptyText: "This rank ran no collective.",
  });
  const rankSelect = h(
    "select",
    {
      testid: "collectives-rank",
      attrs: { "aria-label": "Rank" },
      onChange: () => { showCollectives(); },
    },
    data.ranks.map((r, i) => h("option", { attrs: { value: i } }, `rank ${labels[i] ?? String(r.rank)} (${r.worker})`)),
  );
  const showCollectives = (): void => {
    const r = data.ranks[Number(rankSelect.value)] ?? data.ranks[0];
    collTable.setData({
      columns: collectiveColumns(),
      rows: r?.collectives ?? [],
      rowKey: (c) => c.name,
      sort: { key: "total_us", dir: "desc" },
    });
  };
  // A link from the Overview's evidence may name the rank to show.
  const linkedRank = readViewUrlState().rank;
  if (linkedRank !== undefined) {
    const i = data.ranks.findIndex((r) => String(r.rank) === linkedRank);
    if (i >= 0) rankSelect.value = String(i);
    writeViewUrlState({ rank: undefined });
  }
  showCollectives();

  // The two per-rank charts show the mean step, or one step.
  const stepSelect = h(
    "select",
    { testid: "step-select", attrs: { "aria-label": "Step shown in the per-rank charts" } },
    h("option", { attrs: { value: "" } }, "Mean of all steps"),
    data.steps.map((name, i) => h("option", { attrs: { value: String(i) } }, `Step ${name}`)),
  );
  const overlapChart = chartDiv("overlap-chart", 320);
  const waitChart = chartDiv("wait-chart", 320);
  const n = data.ranks.length;
  const heatHeight = Math.max(160, n * heatmapRowPx(n) + HEATMAP_MARGIN.t + HEATMAP_MARGIN.b);
  const heatChart = chartDiv("comm-heatmap", heatHeight);
  heatChart.dataset["rows"] = String(n);

  const stepsText = typeof steps === "number" ? `${formatInt(steps)} step${steps === 1 ? "" : "s"}` : "—";
  replaceChildren(
    container,
    h(
      "div",
      { class: "ptp-view ptp-distributed", testid: "distributed" },
      data.straggler
        ? h(
            "div",
            { class: "ptp-callout ptp-callout-warn", testid: "straggler", role: "note", dataset: { rank: String(data.straggler.rank), worker: data.straggler.worker } },
            h("div", { class: "ptp-callout-title" }, `Straggler: rank ${String(data.straggler.rank)} (${data.straggler.worker})`),
            h("div", { testid: "straggler-text" }, data.straggler.text),
          )
        : null,
      data.notes.map((note) => h("div", { class: "ptp-note", testid: "dist-note", role: "note" }, infoIcon("A note from the analysis."), h("span", {}, note))),
      card(
        { title: "Distributed training", testid: "card-dist-summary" },
        h("p", { class: "ptp-muted ptp-card-sub" }, `All ranks of run ${ctx.run}, span ${ctx.span}; the worker picker does not apply to this page. Times are means per step.`),
        h(
          "div",
          { class: "ptp-metrics" },
          fact("World size", formatInt(data.world_size), "From the traces' distributedInfo, else the number of workers.", "dist-world-size"),
          fact("Ranks loaded", formatInt(n), "Traces of this span that were loaded and analysed.", "dist-ranks"),
          fact("Backend", data.backend ?? "—", "The process group backend written in the traces.", "dist-backend"),
          fact("Steps", stepsText, "Profiler steps per rank in this span.", "dist-steps"),
          fact("Mean step time", formatDuration(meanStep), `${HELP.step}\nMean over ranks.`, "dist-step-time"),
        ),
      ),
      card(
        { title: "Ranks", testid: "card-ranks" },
        h("p", { class: "ptp-muted ptp-card-sub" }, "Means per step. Hover a header for how each number is computed."),
        rankTable.el,
      ),
      card(
        { title: "Stragglers by process group", testid: "card-groups" },
        h("p", { class: "ptp-muted ptp-card-sub" }, "Across all ranks of each process group: the rank its members wait for in the group's collectives, and its slowest rank."),
        groupTable.el,
      ),
      h("div", { class: "ptp-controls" }, h("label", { class: "ptp-picker" }, "Step", stepSelect)),
      h(
        "div",
        { class: "ptp-grid" },
        card(
          { title: "Computation and communication per rank", testid: "card-overlap" },
          h("p", { class: "ptp-muted ptp-card-sub" }, "Each bar is one rank's average step: computation (not overlapping communication, as in the table), computation overlapping communication, communication only, and other. ", infoIcon(HELP.overlap)),
          ...overlapNotes(data.ranks, labels).map((note) => h("p", { class: "ptp-muted", testid: "overlap-na" }, note)),
          overlapChart,
        ),
        card(
          { title: "Communication: transfer versus waiting", testid: "card-wait" },
          h("p", { class: "ptp-muted ptp-card-sub" }, "Transfer is the fastest rank's time for each collective; the rest is waiting for other ranks. ", infoIcon(`${HELP.transfer}\n${HELP.sync}`)),
          waitChart,
        ),
      ),
      card(
        { title: "Communication time by rank and step", testid: "card-heatmap" },
        h("p", { class: "ptp-muted ptp-card-sub" }, HELP.heatmap),
        h("div", { class: "ptp-heatmap-scroll", testid: "heatmap-scroll" }, heatChart),
      ),
      card(
        { title: "Collectives", testid: "card-collectives" },
        h("div", { class: "ptp-controls ptp-card-sub" }, h("label", { class: "ptp-picker" }, "Rank", rankSelect), h("span", { class: "ptp-muted" }, "Totals over the steps.")),
        collTable.el,
      ),
    ),
  );

  let charts: Charts | null = null;
  try {
    const Plotly = await ctx.loadPlotly();
    if (left(ctx)) return undefined;
    charts = new Charts(Plotly, ctx);
    const drawn = charts;
    const drawRankCharts = async (): Promise<void> => {
      const step = stepSelect.value === "" ? null : Number(stepSelect.value);
      await drawn.draw(overlapChart, () => overlapFigure(data, labels, step));
      await drawn.draw(waitChart, () => waitFigure(data, labels, step));
    };
    stepSelect.addEventListener("change", () => { void drawRankCharts(); });
    await drawRankCharts();
    if (data.steps.length && data.communication_by_step.length) {
      await charts.draw(heatChart, (theme) => heatmapFigure(data, labels, theme));
      onHeatmapClick(heatChart, (rank, step) => {
        const r = data.ranks[rank];
        if (r) openRankTrace(ctx, r, step);
      });
    } else {
      heatChart.replaceWith(h("p", { class: "ptp-muted", testid: "heatmap-empty" }, "No profiler steps: nothing to show per step."));
    }
  } catch (err) {
    if (left(ctx)) return undefined;
    const message = err instanceof Error ? err.message : String(err);
    overlapChart.replaceWith(h("p", { class: "ptp-muted", testid: "chart-error" }, `The charts could not be drawn: ${message}`));
  }
  const c = charts;
  return () => c?.dispose();
}
