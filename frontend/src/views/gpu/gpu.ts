/**
 * The GPU page: how close the kernels came to the hardware (./roofline) and what kept the GPU waiting, from the
 * GPU insights routes (./idle, ./launch_stats, ./queue_length, ./memory_bandwidth, ./kernel_sequences). Every
 * number is over the step window and links to where it comes from in the Trace view (a gap, a kernel and its
 * launch, a sequence's occurrence); a roofline point opens its Kernel row.
 */
import { outlierHeading } from "./gpuData";
import { card, infoIcon } from "../../components";
import { type Child, h, replaceChildren } from "../../dom";
import { DASH, formatBytes, formatDuration, formatFixed, formatInt, formatPercent1 } from "../../format";
import type {
  BandwidthResponse,
  CuptiCountersResponse,
  BandwidthRow,
  IdleResponse,
  IdleStream,
  KernelSequence,
  KernelSequencesResponse,
  LaunchByName,
  LaunchRow,
  LaunchStatsResponse,
  QueueLengthResponse,
  QueueStream,
  Window,
} from "../common/apiTypes";
import { Charts, chartDiv, type Figure } from "../common/charts";
import { csvFileName } from "../common/csv";
import { durationColumn as usColumn } from "../common/columns";
import { clampedName, type Column, DataTable } from "../common/table";
import { traceRangeLink } from "../common/traceLink";
import { fetchFor, left, loadErrorCard } from "../common/ui";
import { loadView } from "../../loadView";
import { countersCard } from "./gpuCounters";
import { rooflineCard } from "./roofline";
import type { RooflineResponse } from "./rooflineData";
import type { ViewContext } from "../types";
import { readViewUrlState, writeViewUrlState } from "../../urlState";

export const GPU_HELP = {
  busy: "Time in the step window during which at least one kernel, memcpy or memset ran on the stream.",
  idle: "The rest of the step window: busy + idle = the window, and idle = host wait + kernel wait + other.",
  hostWait: "Gaps whose next event's launch call started after the gap began: the GPU starved because the CPU had not issued the work yet.",
  kernelWait: "Gaps shorter than the threshold whose next event was already issued: the fixed cost between back-to-back kernels (CUDA graphs remove it).",
  other: "Gaps whose next event was issued long before and still waited (cross-stream events, synchronisation), or with no next event.",
  delay: "Launch delay: kernel start − start of its launch call (cudaLaunchKernel, cuLaunchKernel…).",
  short: "Kernels that ran for less time than their launch call took: the CPU cannot keep the GPU busy with them.",
  outlier: "Kernels whose launch delay is at or above the 95th percentile.",
  unlaunched: "Kernels whose launch call is not in the trace (issued before the profiled window): counted, not dropped.",
  queue: "Launched but not finished device events on the stream: an event joins at its launch call's start and leaves when it ends on the GPU.",
  blocked: "Time with a full launch queue (1024 pending launches), when CUDA blocks the launching thread.",
  bandwidth: "Each copy moves its bytes evenly over its duration; GB/s = 10⁹ bytes per second. Mean: bytes / busy time; peak: concurrent copies summed.",
  sequence: "Repeated runs of consecutive kernels on a stream, by the GPU time of the kernels in them: fusion candidates.",
};

const streamLabel = (device: number | null, stream: number): string => `GPU ${device ?? "?"} · stream ${stream}`;

function share(us: number, window: Window): string {
  const span = window.end_us - window.start_us;
  return span > 0 ? `${formatDuration(us)} (${formatPercent1(us / span)})` : formatDuration(us);
}

function durationColumn<R>(key: string, label: string, help: string, get: (r: R) => number | null, window?: Window): Column<R> {
  return {
    ...usColumn(key, label, help, get),
    text: (r) => {
      const v = get(r);
      return v === null ? DASH : window ? share(v, window) : formatDuration(v);
    },
  };
}

function idleCard(ctx: ViewContext, resp: IdleResponse): HTMLElement {
  const w = resp.window;
  const table = new DataTable<IdleStream>({ testid: "idle-table", csvName: () => csvFileName("idle", ctx.run, ctx.worker, `span${ctx.span}`), emptyText: "No GPU work in this trace." });
  table.setData({
    columns: [
      { key: "stream", label: "Stream", value: (r) => streamLabel(r.device, r.stream) },
      durationColumn<IdleStream>("busy", "Busy", GPU_HELP.busy, (r) => r.busy_us, w),
      durationColumn<IdleStream>("idle", "Idle", GPU_HELP.idle, (r) => r.idle_us, w),
      durationColumn<IdleStream>("host_wait", "Host wait", GPU_HELP.hostWait, (r) => r.host_wait_us, w),
      durationColumn<IdleStream>("kernel_wait", "Kernel wait", GPU_HELP.kernelWait, (r) => r.kernel_wait_us, w),
      durationColumn<IdleStream>("other", "Other", GPU_HELP.other, (r) => r.other_us, w),
      {
        key: "gap",
        label: "Longest gap",
        help: "The stream's longest idle gap; opens it in the Trace view.",
        value: (r) => (r.longest_gaps[0] ? r.longest_gaps[0].end_us - r.longest_gaps[0].start_us : null),
        render: (r) => {
          const g = r.longest_gaps[0];
          return g ? traceRangeLink(ctx, `${formatDuration(g.end_us - g.start_us)} ${g.category.replace("_", " ")}`, g.start_us, g.end_us) : "—";
        },
        sortable: false,
      },
    ],
    rows: resp.streams,
    sort: { key: "idle", dir: "desc" },
    rowKey: (r) => `${r.device ?? ""}:${r.stream}`,
  });
  return card(
    { testid: "card-idle" },
    h("div", { class: "ptp-card-head" }, h("h3", {}, "Idle time per stream", infoIcon(GPU_HELP.idle)),
      h("span", { class: "ptp-muted" }, `kernel wait: gaps under ${formatDuration(resp.kernel_wait_threshold_us)}`)),
    table.el,
  );
}

function stat(testid: string, label: string, value: string, help: string, link?: Child): HTMLElement {
  return h("div", { class: "ptp-metric", testid, attrs: { title: help } }, h("div", { class: "ptp-metric-label" }, label, infoIcon(help)), h("div", { class: "ptp-metric-value" }, value, link ? " · " : null, link ?? null));
}

function launchCard(ctx: ViewContext, resp: LaunchStatsResponse): HTMLElement {
  const s = resp.summary;
  const outliers = resp.rows.filter((r) => r.outlier);
  const worst = resp.rows[0];
  const summary = h(
    "div",
    { class: "ptp-metrics", testid: "launch-summary" },
    stat("launch-kernels", "Kernels", `${formatInt(s.kernels)} (${formatInt(s.unlaunched)} unlaunched)`, GPU_HELP.unlaunched),
    stat("launch-p50", "Launch delay p50", formatDuration(s.launch_delay_p50_us), GPU_HELP.delay),
    stat("launch-p95", "Launch delay p95", formatDuration(s.launch_delay_p95_us), GPU_HELP.outlier,
      worst ? traceRangeLink(ctx, "worst", worst.launch_start_us, worst.start_us + worst.gpu_duration_us, worst.name) : null),
    stat("launch-short", "Short kernels", `${formatInt(s.short_kernels)} · ${formatDuration(s.short_kernels_us)}`, GPU_HELP.short),
    stat("launch-means", "Mean CPU launch / GPU kernel", `${formatDuration(s.cpu_duration_mean_us)} / ${formatDuration(s.gpu_duration_mean_us)}`, GPU_HELP.delay),
  );
  const outlierTable = new DataTable<LaunchRow>({ testid: "launch-outliers", csvName: () => csvFileName("launch-outliers", ctx.run, ctx.worker, `span${ctx.span}`), pageSize: 10, emptyText: "No kernels." });
  outlierTable.setData({
    columns: [
      { key: "name", label: "Kernel", value: (r) => r.name, render: (r) => clampedName(r.name, "kernel-name"), title: (r) => r.name, cls: "ptp-name-col" },
      durationColumn<LaunchRow>("delay", "Launch delay", GPU_HELP.delay, (r) => r.launch_delay_us),
      durationColumn<LaunchRow>("cpu", "CPU launch", "Duration of the launch call.", (r) => r.cpu_duration_us),
      durationColumn<LaunchRow>("gpu", "GPU kernel", "Duration of the kernel.", (r) => r.gpu_duration_us),
      {
        key: "where",
        label: "In trace",
        help: "Opens the launch call and the kernel in the Trace view.",
        value: (r) => r.start_us,
        render: (r) => traceRangeLink(ctx, "show", r.launch_start_us, r.start_us + r.gpu_duration_us, r.name),
        sortable: false,
      },
    ],
    rows: outliers,
    sort: { key: "delay", dir: "desc" },
    rowKey: (r) => String(r.id),
  });
  const byName = new DataTable<LaunchByName>({ testid: "launch-by-name", csvName: () => csvFileName("launches", ctx.run, ctx.worker, `span${ctx.span}`), pageSize: 10, emptyText: "No kernels." });
  byName.setData({
    columns: [
      { key: "name", label: "Kernel", value: (r) => r.name, render: (r) => clampedName(r.name, "kernel-name"), title: (r) => r.name, cls: "ptp-name-col" },
      { key: "count", label: "Launches", numeric: true, value: (r) => r.count, text: (r) => formatInt(r.count) },
      { key: "short", label: "Short", help: GPU_HELP.short, numeric: true, value: (r) => r.short_kernels, text: (r) => formatInt(r.short_kernels) },
      durationColumn<LaunchByName>("cpu", "Mean CPU launch", "Mean duration of the launch calls.", (r) => r.cpu_duration_mean_us),
      durationColumn<LaunchByName>("gpu", "Mean GPU kernel", "Mean kernel duration.", (r) => r.gpu_duration_mean_us),
      durationColumn<LaunchByName>("delay", "Mean launch delay", GPU_HELP.delay, (r) => r.launch_delay_mean_us),
    ],
    rows: resp.by_name,
    sort: { key: "short", dir: "desc" },
    rowKey: (r) => r.name,
  });
  return card(
    { testid: "card-launch" },
    h("div", { class: "ptp-card-head" }, h("h3", {}, "Kernel launches", infoIcon(GPU_HELP.delay))),
    summary,
    h("h4", { testid: "launch-outliers-heading" }, outlierHeading(s.outliers, outliers.length)),
    outlierTable.el,
    h("h4", {}, "By kernel"),
    byName.el,
  );
}

function seriesFigure(window: Window, series: { name: string; t: number[]; y: number[] }[], yTitle: string): Figure {
  return {
    data: series.map((s) => ({
      type: "scatter",
      mode: "lines",
      line: { shape: "hv", width: 1.5 },
      name: s.name,
      x: s.t.map((t) => (t - window.start_us) / 1000),
      y: s.y,
    })),
    layout: {
      margin: { l: 56, r: 16, t: 8, b: 40 },
      xaxis: { title: { text: "ms from the first step's start" } },
      yaxis: { title: { text: yTitle }, rangemode: "tozero" },
      legend: { orientation: "h", y: -0.25 },
    },
  };
}

function queueCard(ctx: ViewContext, resp: QueueLengthResponse, chart: HTMLElement): HTMLElement {
  const w = resp.window;
  const table = new DataTable<QueueStream>({ testid: "queue-table", csvName: () => csvFileName("queue-length", ctx.run, ctx.worker, `span${ctx.span}`), emptyText: "No launched GPU work in this trace." });
  table.setData({
    columns: [
      { key: "stream", label: "Stream", value: (r) => streamLabel(r.device, r.stream) },
      { key: "max", label: "Max", help: GPU_HELP.queue, numeric: true, value: (r) => r.summary.max, text: (r) => formatInt(r.summary.max) },
      { key: "mean", label: "Mean", help: "Time-weighted mean over the step window.", numeric: true, value: (r) => r.summary.mean, text: (r) => formatFixed(r.summary.mean, 1) },
      durationColumn<QueueStream>("at_max", "Time at max", "Time the queue spent at its maximum.", (r) => r.summary.time_at_max_us, w),
      durationColumn<QueueStream>("blocked", "Blocked on a full queue", GPU_HELP.blocked, (r) => r.summary.time_blocked_us, w),
    ],
    rows: resp.streams,
    sort: { key: "max", dir: "desc" },
    rowKey: (r) => `${r.device ?? ""}:${r.stream}`,
  });
  return card({ testid: "card-queue" }, h("div", { class: "ptp-card-head" }, h("h3", {}, "Queue length", infoIcon(GPU_HELP.queue)),
    h("span", { class: "ptp-muted" }, "also a counter track in the Trace view")), table.el, resp.streams.length ? chart : null);
}

function bandwidthCard(ctx: ViewContext, resp: BandwidthResponse, chart: HTMLElement): HTMLElement {
  const table = new DataTable<BandwidthRow>({ testid: "bandwidth-table", csvName: () => csvFileName("bandwidth", ctx.run, ctx.worker, `span${ctx.span}`), emptyText: "No memory copies or memsets in the step window." });
  table.setData({
    columns: [
      { key: "dir", label: "Direction", value: (r) => `GPU ${r.device ?? "?"} · ${r.direction}` },
      { key: "count", label: "Copies", numeric: true, value: (r) => r.count, text: (r) => formatInt(r.count) },
      { key: "bytes", label: "Bytes", numeric: true, value: (r) => r.bytes, text: (r) => formatBytes(r.bytes) },
      durationColumn<BandwidthRow>("busy", "Busy", "Sum of the copies' durations in the window.", (r) => r.busy_us),
      { key: "mean", label: "Mean GB/s", help: GPU_HELP.bandwidth, numeric: true, value: (r) => r.mean_gbps, text: (r) => formatFixed(r.mean_gbps, 2) },
      { key: "peak", label: "Peak GB/s", help: GPU_HELP.bandwidth, numeric: true, value: (r) => r.peak_gbps, text: (r) => formatFixed(r.peak_gbps, 2) },
    ],
    rows: resp.rows,
    sort: { key: "bytes", dir: "desc" },
    rowKey: (r) => `${r.device ?? ""}:${r.direction}`,
  });
  return card({ testid: "card-bandwidth" }, h("div", { class: "ptp-card-head" }, h("h3", {}, "Memory bandwidth", infoIcon(GPU_HELP.bandwidth))), table.el, resp.rows.length ? chart : null);
}

function sequencesCard(ctx: ViewContext, resp: KernelSequencesResponse, onLength: (n: number) => void): HTMLElement {
  const table = new DataTable<KernelSequence>({ testid: "sequence-table", csvName: () => csvFileName("kernel-sequences", ctx.run, ctx.worker, `span${ctx.span}`, String(resp.length)), emptyText: "No repeated kernel sequence of this length." });
  table.setData({
    columns: [
      { key: "kernels", label: "Kernels", value: (r) => r.kernels.join(" → "), render: (r) => h("div", { class: "ptp-sequence" }, r.kernels.map((k) => clampedName(k, "kernel-name"))), title: (r) => r.kernels.join("\n→ "), cls: "ptp-name-col" },
      { key: "stream", label: "Stream", value: (r) => streamLabel(r.device, r.stream) },
      { key: "count", label: "Count", numeric: true, value: (r) => r.count, text: (r) => formatInt(r.count) },
      durationColumn<KernelSequence>("total", "Total GPU time", GPU_HELP.sequence, (r) => r.total_us),
      durationColumn<KernelSequence>("span", "Mean span", "First kernel's start to the last one's end, per occurrence.", (r) => r.span_us),
      durationColumn<KernelSequence>("gap", "Mean gaps", "Span minus the kernels' own time, per occurrence: what fusing them would save on the GPU.", (r) => r.gap_us),
      {
        key: "where",
        label: "Occurrences",
        help: "The first occurrences in the Trace view.",
        value: (r) => r.occurrences.length,
        // spaced by a gap: a button's trailing space does not show, and "#1#2#3" read as one link
        render: (r) => h("span", { style: { display: "inline-flex", gap: "8px" } }, r.occurrences.slice(0, 3).map((o, i) => traceRangeLink(ctx, `#${i + 1}`, o.start_us, o.end_us, r.kernels[0]))),
        sortable: false,
      },
    ],
    rows: resp.sequences,
    sort: { key: "total", dir: "desc" },
    rowKey: (r) => `${r.stream}:${r.kernels.join("\u0000")}`,
  });
  const length = h(
    "select",
    { testid: "sequence-length", attrs: { "aria-label": "Sequence length" }, onChange: () => { onLength(Number(length.value)); } },
    [2, 3, 4, 5, 6, 8].map((n) => h("option", { attrs: n === resp.length ? { value: String(n), selected: "" } : { value: String(n) } }, String(n))),
  );
  return card({ testid: "card-sequences" }, h("div", { class: "ptp-card-head" }, h("h3", {}, "Frequent kernel sequences", infoIcon(GPU_HELP.sequence)),
    h("label", { class: "ptp-picker" }, "Length", length)), table.el);
}

const FOCUSABLE = new Set(["idle", "launch", "roofline"]);

/**
 * Bring the card a link asked for (the Overview's evidence: `card` = idle, launch or roofline) into view and mark it;
 * the request is consumed so that a reload or a later visit starts at the top.
 */
function focusRequestedCard(container: HTMLElement): void {
  const want = readViewUrlState().card;
  if (want === undefined) return;
  writeViewUrlState({ card: undefined });
  const el = container.querySelector<HTMLElement>(`[data-testid="card-${FOCUSABLE.has(want) ? want : "idle"}"]`);
  if (!el) return;
  el.classList.add("ptp-card-focus");
  el.dataset["focused"] = "true";
  el.scrollIntoView({ block: "start" });
}

export async function render(container: HTMLElement, ctx: ViewContext): Promise<(() => void) | undefined> {
  const data = await loadView(ctx, container, {
    idle: () => fetchFor<IdleResponse>(ctx, "idle"),
    launches: () => fetchFor<LaunchStatsResponse>(ctx, "launch_stats"),
    queues: () => fetchFor<QueueLengthResponse>(ctx, "queue_length"),
    bandwidth: () => fetchFor<BandwidthResponse>(ctx, "memory_bandwidth"),
    sequences: () => fetchFor<KernelSequencesResponse>(ctx, "kernel_sequences"),
    counters: () => fetchFor<CuptiCountersResponse>(ctx, "cupti_counters"),
    roofline: () => fetchFor<RooflineResponse>(ctx, "roofline"),
  }, { what: "the GPU insights" });
  if (!data) return undefined;
  const { idle, launches, queues, bandwidth, sequences, counters } = data;
  const roofline = rooflineCard(ctx, data.roofline);
  const w = idle.window;
  const queueChart = chartDiv("queue-chart", 240);
  const bandwidthChart = chartDiv("bandwidth-chart", 240);
  const sequenceSlot = h("div", {});
  const showSequences = (resp: KernelSequencesResponse): void => {
    replaceChildren(sequenceSlot, sequencesCard(ctx, resp, (n) => {
      fetchFor<KernelSequencesResponse>(ctx, "kernel_sequences", { length: n }).then((r) => { if (!left(ctx)) showSequences(r); },
        (err: unknown) => { if (!left(ctx)) replaceChildren(sequenceSlot, loadErrorCard(err, "the kernel sequences")); });
    }));
  };
  showSequences(sequences);
  replaceChildren(
    container,
    h(
      "div",
      { class: "ptp-view ptp-gpu", testid: "gpu-view" },
      h("p", { class: "ptp-muted", testid: "gpu-window" }, `Over the step window: ${formatDuration(w.end_us - w.start_us)} (first step start to last step end). `,
        traceRangeLink(ctx, "Show it in the Trace view", w.start_us, w.end_us)),
      idle.streams.length ? null : h("p", { testid: "gpu-empty" }, "This trace has no GPU work."),
      roofline.el,
      idleCard(ctx, idle),
      launchCard(ctx, launches),
      queueCard(ctx, queues, queueChart),
      bandwidthCard(ctx, bandwidth, bandwidthChart),
      sequenceSlot,
      countersCard(ctx, counters),
    ),
  );
  focusRequestedCard(container);
  let charts: Charts | null = null;
  try {
    const Plotly = await ctx.loadPlotly();
    if (left(ctx)) return undefined;
    charts = new Charts(Plotly, ctx);
    await roofline.draw(charts);
    if (queues.streams.length) {
      const series = queues.streams.map((s) => ({ name: streamLabel(s.device, s.stream), t: s.series.t_us, y: s.series.max }));
      await charts.draw(queueChart, () => seriesFigure(w, series, "queue length (max per bucket)"));
    }
    if (bandwidth.rows.length) {
      const series = bandwidth.rows.map((r) => ({ name: `GPU ${r.device ?? "?"} ${r.direction}`, t: r.series.t_us, y: r.series.gbps }));
      await charts.draw(bandwidthChart, () => seriesFigure(w, series, "GB/s"));
    }
  } catch (err) {
    if (left(ctx)) return undefined;
    const message = err instanceof Error ? err.message : String(err);
    replaceChildren(queueChart, h("p", { class: "ptp-muted", testid: "chart-error" }, `The charts could not be drawn: ${message}`));
  }
  const c = charts;
  return () => c?.dispose();
}
