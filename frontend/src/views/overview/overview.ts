/**
 * The Overview page (GET ./overview): the diagnosis first (detected context, the verdict, findings
 * ranked by estimated saving, each with links that open the evidence in its view), then configuration
 * and GPU summary cards, the step-time breakdown (stacked bars per step), the execution summary
 * (average per step, table + pie) and notes. Numbers carry tooltips saying how they are computed.
 */
import type { PlotlyHTMLElement, PlotMouseEvent } from "plotly.js-dist-min";
import { card, infoIcon } from "../../components";
import { type Child, h, replaceChildren } from "../../dom";
import { formatBytes, formatCuptiVersion, formatDuration, formatExactUs, formatInt, formatPercent1 } from "../../format";
import type { Theme } from "../../theme";
import { writeViewUrlState } from "../../urlState";
import { CATEGORY_COLORS, busiestStep, segmentAt } from "../common/stepCategories";
import type { EnvDevice, Evidence, GpuSummary, OverviewResponse, Recommendation } from "../common/apiTypes";
import { Charts, chartDiv, type Figure, plotlyText } from "../common/charts";
import { DONUT } from "../common/pie";
import { rowLinkButton, traceWindowState } from "../common/traceLink";
import { loadSources } from "../common/callStack";
import { whereLine } from "./findingWhere";
import { loadView } from "../../loadView";
import { fetchFor, left } from "../common/ui";
import type { ViewContext } from "../types";
import { whatIfCard } from "./whatIf";
import { mfuCard } from "./mfuCard";

export const HELP = {
  utilization:
    "The headline number. Kernels only: share of the step span (first step start to last step end) in which at least one kernel ran on this GPU, communication (NCCL) kernels included, so a rank waiting in an all-reduce counts as busy. Memory copies and sets are not counted (see GPU busy).",
  computeUtilization:
    "Share of the step span in which at least one kernel other than a communication (NCCL) kernel ran on this GPU: the GPU doing the model's work. A rank spinning in collectives is busy by the headline number and idle by this one.",
  gpuBusy:
    "All GPU work: share of the step span in which any kernel, memcpy or memset ran on this GPU. HTA and other tools call this number \"GPU utilization\".",
  smEfficiency:
    "Estimated: for each moment, the sum of blocks-per-SM of the running kernels capped at 1, averaged over the step span.",
  occupancy: "Estimated achieved occupancy of the kernels (from Kineto), weighted by kernel time inside the steps.",
  tensorCores: "Share of this GPU's kernel time spent in kernels that use tensor cores (detected from kernel names).",
  kernelTime: "Sum of the durations of all kernels on this GPU in the whole trace.",
  breakdown:
    "Each microsecond of a step is counted once, in the first matching category of: Kernel > Memcpy > Memset > Communication > Runtime > DataLoader > CPU Exec > Other.",
  stepTime: "Average wall time of a step: from its ProfilerStep start on the host to the end of the last GPU work it launched.",
};

const CATEGORY_HELP: Record<string, string> = {
  Kernel: "a GPU kernel ran (communication kernels excepted)",
  Memcpy: "a GPU memory copy ran",
  Memset: "a GPU memory set ran",
  Communication: "collective communication ran (NCCL kernels, host collectives)",
  Runtime: "the host was in a CUDA runtime or driver call (kernel launches, synchronizations)",
  DataLoader: "the host was fetching a batch from the DataLoader",
  "CPU Exec": "the host ran operators or annotated code",
  Other: "none of the above (Python between operators, idle time)",
};

function categoryHelp(category: string): string {
  const what = CATEGORY_HELP[category];
  return `${category}${what ? `: time in which ${what}` : ""}.\n${HELP.breakdown}`;
}

const num = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);

/** 13000 → "13.0", 12040 → "12.4"; strings pass through. */
function cudaVersion(v: unknown): string | null {
  if (typeof v === "number" && Number.isInteger(v) && v >= 1000 && v < 100000) return `${Math.floor(v / 1000)}.${Math.floor((v % 1000) / 10)}`;
  if (typeof v === "number" && Number.isFinite(v)) return String(v);
  return typeof v === "string" && v !== "" ? v : null;
}

function deviceLine(d: EnvDevice): string {
  const parts = [d.name ?? "Unknown GPU"];
  if (num(d.memory_bytes) !== null) parts.push(formatBytes(d.memory_bytes));
  if (d.compute_capability) parts.push(`compute capability ${d.compute_capability}`);
  if (num(d.num_sms) !== null) parts.push(`${formatInt(d.num_sms)} SMs`);
  return parts.join(" · ");
}

function facts(rows: [string, Child, string][], testid: string): HTMLElement {
  return h(
    "dl",
    { class: "ptp-dl", testid },
    rows.map(([k, v, title]) => [h("dt", {}, k), h("dd", { title, dataset: { fact: k } }, v)]),
  );
}

function configurationCard(data: OverviewResponse): HTMLElement {
  const env = data.environment;
  const rows: [string, Child, string][] = [];
  rows.push(["Device type", env.device_type === "CPU" ? "CPU only" : "GPU", "GPU when the trace has GPU or CUDA runtime events, else CPU only."]);
  if (num(env.workers) !== null) rows.push(["Workers", formatInt(env.workers), "Trace files (workers) of this run."]);
  const devices = Array.isArray(env.devices) ? env.devices : [];
  devices.forEach((d, i) => {
    rows.push([
      devices.length > 1 ? `GPU ${d.id ?? i}` : "GPU",
      h("span", { class: "ptp-break" }, deviceLine(d)),
      "From the trace's deviceProperties (all GPUs the process saw, used or not).",
    ]);
  });
  const unprofiled = num(env.unprofiled_gpus) ?? 0;
  if (env.device_type === "CPU" && unprofiled > 0) {
    rows.push(["GPUs", `${formatInt(unprofiled)} on the machine, not profiled`, "The trace lists the machine's GPUs (deviceProperties), but the profiler recorded no CUDA activity: add ProfilerActivity.CUDA to activities to profile them."]);
  }
  const versions: [string, string | null, string][] = [
    ["PyTorch", typeof env.pytorch_version === "string" && env.pytorch_version ? env.pytorch_version : null, "PyTorch version written in the trace."],
    ["CUDA runtime", cudaVersion(env.cuda_runtime_version), `CUDA runtime version written in the trace (${String(env.cuda_runtime_version)}).`],
    ["CUDA driver", cudaVersion(env.cuda_driver_version), `CUDA driver API version written in the trace (${String(env.cuda_driver_version)}).`],
    ["CUPTI", formatCuptiVersion(env.cupti_version), `CUPTI version written in the trace (${String(env.cupti_version)}).`],
    ["Framework", typeof env.framework === "string" && env.framework ? env.framework : null, "Framework that wrote the trace (e.g. pytorch-lightning)."],
  ];
  for (const [k, v, t] of versions) if (v !== null) rows.push([k, v, t]);
  return card({ title: "Configuration", testid: "card-configuration" }, facts(rows, "configuration"));
}

function metric(label: string, value: string, help: string, testid: string, raw: number | null): HTMLElement {
  const el = h(
    "div",
    { class: "ptp-metric", testid, title: help },
    h("div", { class: "ptp-metric-label" }, label, " ", infoIcon(help)),
    h("div", { class: "ptp-metric-value" }, value),
  );
  if (raw !== null) el.dataset["value"] = String(raw);
  return el;
}

function gpuCard(g: GpuSummary): HTMLElement {
  const sub: string[] = [];
  if (num(g.memory_bytes) !== null) sub.push(formatBytes(g.memory_bytes));
  if (g.compute_capability) sub.push(`compute capability ${g.compute_capability}`);
  // Shown beside the headline only where communication kernels make the two differ (a distributed rank).
  const withoutComm = num(g.compute_utilization);
  const utilization = num(g.utilization);
  const compute = withoutComm !== null && utilization !== null && Math.abs(utilization - withoutComm) >= 5e-4 ? withoutComm : null;
  const el = card(
    { title: `GPU ${g.id ?? "(unknown device)"}${g.name ? ` · ${g.name}` : ""}`, testid: "gpu-card", class: "ptp-gpu-card" },
    sub.length ? h("p", { class: "ptp-muted ptp-card-sub" }, sub.join(" · ")) : null,
    h(
      "div",
      { class: "ptp-metrics" },
      metric(compute === null ? "GPU utilization (kernels)" : "GPU utilization (all kernels, headline)", formatPercent1(g.utilization), HELP.utilization, "gpu-utilization", num(g.utilization)),
      compute === null ? null : metric("GPU utilization without communication", formatPercent1(compute), HELP.computeUtilization, "gpu-compute-utilization", compute),
      metric("GPU busy (all GPU work)", formatPercent1(num(g.gpu_busy)), HELP.gpuBusy, "gpu-busy", num(g.gpu_busy)),
      metric("Est. SM efficiency", g.sm_efficiency === null ? "n/a" : formatPercent1(g.sm_efficiency), HELP.smEfficiency, "gpu-sm-efficiency", num(g.sm_efficiency)),
      metric("Est. achieved occupancy", g.achieved_occupancy === null ? "n/a" : formatPercent1(g.achieved_occupancy), HELP.occupancy, "gpu-occupancy", num(g.achieved_occupancy)),
      metric("Kernel time using tensor cores", formatPercent1(g.tensor_core_ratio), HELP.tensorCores, "gpu-tensor-cores", num(g.tensor_core_ratio)),
    ),
    num(g.kernel_time_us) !== null
      ? h("p", { class: "ptp-muted ptp-card-foot", title: `${formatExactUs(g.kernel_time_us)}\n${HELP.kernelTime}` }, `Kernel time: ${formatDuration(g.kernel_time_us)} in the whole trace`)
      : null,
  );
  el.dataset["gpu"] = g.id === null ? "unknown" : String(g.id);
  return el;
}

/** Categories that only GPU work fills: left out of a CPU-only trace's table when empty. */
const GPU_ONLY = new Set(["Kernel", "Memcpy", "Memset", "Runtime"]);

/** `open(step index, category)` opens the Trace view on that step with the category's events highlighted. */
type OpenStep = (index: number, category: string | null) => void;

/** A category row's link to its busiest step in the Trace view, the category highlighted. */
function categoryLink(data: OverviewResponse, category: string, open: OpenStep): HTMLElement | null {
  const step = busiestStep(data.steps, category);
  if (step === null) return null;
  return rowLinkButton({
    label: "trace ↗",
    title: `Open step ${data.steps[step]?.name ?? ""} (the one with the most ${category} time) in the Trace view, ${category} highlighted`,
    testid: "category-trace",
    onClick: () => { open(step, category); },
  });
}

function executionTable(data: OverviewResponse, gpuTrace: boolean, open: OpenStep): HTMLElement {
  const avg = data.average;
  const cats = data.categories.filter((c) => gpuTrace || !GPU_ONLY.has(c) || (num(avg.breakdown_us[c]) ?? 0) > 0);
  return h(
    "table",
    { class: "ptp-table", testid: "execution-summary" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", { title: HELP.breakdown }, "Category ", infoIcon(HELP.breakdown)),
        h("th", { class: "ptp-num", title: "Average time per step in this category." }, "Time per step"),
        h("th", { class: "ptp-num", title: "Share of the average step time." }, "Share"),
      ),
    ),
    h(
      "tbody",
      {},
      cats.map((c) => {
        const us = num(avg.breakdown_us[c]) ?? 0;
        const share = num(avg.share[c]) ?? 0;
        const tr = h(
          "tr",
          { testid: "execution-row", class: us === 0 ? "ptp-dim" : undefined, dataset: { category: c, us: String(us), share: String(share) } },
          h("td", { title: categoryHelp(c) }, h("span", { class: "ptp-swatch", style: { background: CATEGORY_COLORS[c] ?? "#9e9e9e" } }), c, us > 0 ? categoryLink(data, c, open) : null),
          h("td", { class: "ptp-num", testid: "execution-time", title: `${formatExactUs(us)} per step on average\n${categoryHelp(c)}` }, formatDuration(us)),
          h("td", { class: "ptp-num", testid: "execution-share", title: `Average time per step in ${c} / average step time.\n${HELP.breakdown}` }, formatPercent1(share)),
        );
        return tr;
      }),
    ),
    h(
      "tfoot",
      {},
      h(
        "tr",
        {},
        h("td", {}, "Step (average)"),
        h("td", { class: "ptp-num", testid: "execution-total", title: `${formatExactUs(avg.duration_us)}\n${HELP.stepTime}` }, formatDuration(avg.duration_us)),
        h("td", { class: "ptp-num" }, "100.0%"),
      ),
    ),
  );
}

function safeLink(url: string): string | null {
  try {
    const u = new URL(url, document.baseURI);
    return u.protocol === "https:" || u.protocol === "http:" ? u.href : null;
  } catch {
    return null;
  }
}

/** Open the view and place a finding's evidence points at (a step range, an operator, a rank, a memory range). */
export function openEvidence(ctx: ViewContext, e: Evidence): void {
  const p = e.params;
  const us = (v: number | undefined): string | undefined => (typeof v === "number" && Number.isFinite(v) ? v.toFixed(3) : undefined);
  switch (e.view) {
    case "Trace":
      writeViewUrlState({ start: us(p.start_us), end: us(p.end_us), q: p.q });
      break;
    case "Operator":
    case "Kernel":
      writeViewUrlState({ q: p.q });
      break;
    case "Distributed":
      writeViewUrlState({ rank: p.rank === undefined ? undefined : String(p.rank) });
      break;
    case "Memory":
      writeViewUrlState({ device: p.device, start: us(p.start_us), end: us(p.end_us) });
      break;
    case "Overview":
      ctx.navigate("Overview", p.worker ? { worker: p.worker } : undefined);
      return;
    case "Diff":
      // two steps of this very trace: the experiment is the trace itself
      writeViewUrlState({ exp_run: ctx.run, exp_worker: ctx.worker, exp_span: ctx.span, step: p.step, exp_step: p.exp_step });
      break;
    case "GPU":
      writeViewUrlState({ card: p.card });
      break;
  }
  ctx.navigate(e.view);
}

const SAVING_HELP =
  "Estimated saving per step if this cause were removed: the step time replayed with the finding's fix (a what-if replay of the trace), where the finding names one; else the rule's estimate (docs/guide/overview.md). Findings are ranked by it.";

function savingTitle(r: Recommendation): string {
  const w = r.what_if;
  if (!w) return `${SAVING_HELP}\nThis one: ${r.estimated ?? "rule of thumb"}.`;
  return `${SAVING_HELP}\nReplayed (${w.model}): ${w.label}: ${formatDuration(w.baseline_step_us)} → ${formatDuration(w.predicted_step_us)} per step.`;
}

const CONFIDENCE_HELP: Record<string, string> = {
  medium: "Inferred from the cause's effects: the trace does not show the cause itself.",
  low: "A possibility the trace cannot confirm.",
};

/** "est. −3.0 ms/step (36 %)", with "rule of thumb" where no replay gives the saving. */
function savingLabel(r: Recommendation, saving: number): string {
  const share = num(r.share) !== null ? ` (${formatPercent1(r.share)})` : "";
  const how = r.estimated === "rule of thumb" ? ", rule of thumb" : "";
  return `est. −${formatDuration(saving)}/step${share}${how}`;
}

function findingItem(ctx: ViewContext, r: Recommendation, rank: number): HTMLElement {
  const href = safeLink(r.link);
  const saving = num(r.saving_us);
  const evidence = Array.isArray(r.evidence) ? r.evidence : [];
  return h(
    "li",
    { testid: "recommendation", class: "ptp-finding", dataset: { id: r.id, kind: r.kind ?? r.id, saving: String(saving ?? 0), rank: String(rank) } },
    r.title === undefined
      ? null
      : h(
      "div",
      { class: "ptp-finding-head" },
      h("strong", { class: "ptp-finding-title" }, r.title),
      saving !== null && saving > 0
        ? h("span", { class: "ptp-finding-saving", testid: "finding-saving", title: savingTitle(r), dataset: { estimated: r.estimated ?? "" } }, savingLabel(r, saving))
        : null,
      r.confidence && r.confidence !== "high"
        ? h("span", { class: "ptp-muted ptp-finding-confidence", testid: "finding-confidence", title: CONFIDENCE_HELP[r.confidence] ?? "" }, `${r.confidence} confidence`)
        : null,
    ),
    h("span", { class: "ptp-rec-text" }, r.text),
    whereLine(r.where),
    h(
      "div",
      { class: "ptp-finding-links" },
      evidence.map((e) =>
        h(
          "button",
          {
            class: "ptp-link-button ptp-evidence",
            testid: "evidence-link",
            dataset: { view: e.view },
            attrs: { type: "button", title: `Open the ${e.view} view at this evidence` },
            onClick: () => { openEvidence(ctx, e); },
          },
          `${e.label} →`,
        ),
      ),
      href ? h("a", { class: "ptp-rec-link", testid: "recommendation-link", attrs: { href, target: "_blank", rel: "noopener noreferrer" }, title: href }, "Docs ↗") : null,
    ),
  );
}

function diagnosisCard(ctx: ViewContext, data: OverviewResponse, gpu: boolean): HTMLElement {
  const items = data.recommendations.filter((r) => typeof r.text === "string" && r.text !== "");
  if (items.some((r) => r.where?.frame)) void loadSources(ctx); // where the findings' frames' files live
  const label = data.context?.label ?? "";
  const verdict = data.verdict;
  return card(
    { title: "Diagnosis", testid: "card-recommendations" },
    h(
      "p",
      { class: "ptp-muted ptp-card-sub", testid: "run-context", title: "What the run already does, detected in the trace; no advice suggests it again." },
      "Detected: ",
      h("span", { testid: "run-context-label" }, label !== "" ? label : "nothing special (eager, no DataLoader workers, full precision)"),
    ),
    verdict ? h("div", { class: "ptp-verdict", testid: "verdict", role: "status", dataset: { kind: verdict.kind } }, verdict.text) : null,
    items.length === 0
      ? h("p", { class: "ptp-muted", testid: "no-recommendations" }, `Nothing stood out in this trace${gpu ? "" : " (CPU only)"}.`)
      : h("ol", { class: "ptp-recs" }, items.map((r, i) => findingItem(ctx, r, i + 1))),
  );
}

function stepFigure(data: OverviewResponse, theme: Theme): Figure {
  const steps = data.steps;
  const names = steps.map((s) => plotlyText(s.name));
  const dark = theme === "dark";
  const traces = data.categories.map((c) => {
    const ms = steps.map((s) => (num(s.breakdown_us[c]) ?? 0) / 1000);
    const pct = steps.map((s) => (s.duration_us > 0 ? (100 * (num(s.breakdown_us[c]) ?? 0)) / s.duration_us : 0));
    return {
      type: "bar" as const,
      name: c,
      x: names,
      y: ms,
      customdata: pct,
      marker: { color: CATEGORY_COLORS[c] ?? "#9e9e9e", line: { width: 0 } },
      hovertemplate: `${c}: %{y:,.2f} ms (%{customdata:.1f}%)<extra></extra>`,
      showlegend: ms.some((v) => v > 0),
    };
  });
  const total = steps.map((s) => s.duration_us / 1000);
  traces.push({
    type: "bar" as const,
    name: "Step",
    x: names,
    y: steps.map(() => 0),
    customdata: total,
    marker: { color: "rgba(0,0,0,0)", line: { width: 0 } },
    hovertemplate: "Step total: %{customdata:,.2f} ms<extra></extra>",
    showlegend: false,
  });
  return {
    data: traces,
    layout: {
      barmode: "stack",
      hovermode: "x unified",
      bargap: steps.length > 20 ? 0.15 : 0.35,
      xaxis: { type: "category", title: { text: "Step" }, automargin: true, showgrid: false },
      yaxis: { title: { text: "Time (ms)" }, rangemode: "tozero", automargin: true },
      legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom", font: { size: 12 }, traceorder: "normal" },
      margin: { l: 64, r: 16, t: 36, b: 48 },
      hoverlabel: { bgcolor: dark ? "#303134" : "#ffffff" },
    },
  };
}

/** The y value (ms) under a click on the step chart, from plotly's y axis (null where it cannot be had). */
function clickedMs(gd: HTMLElement, ev: PlotMouseEvent): number | null {
  const layout = (gd as unknown as { _fullLayout?: { yaxis?: { _offset?: number; p2l?: (px: number) => number } } })._fullLayout;
  const y = layout?.yaxis;
  const mouse = ev.event as MouseEvent | undefined;
  if (!y || typeof y.p2l !== "function" || typeof y._offset !== "number" || !mouse) return null;
  const v = y.p2l(mouse.clientY - gd.getBoundingClientRect().top - y._offset);
  return Number.isFinite(v) ? v : null;
}

/**
 * Call `open(step index, category)` when a bar of the step chart is clicked: the step of the bar, and the category
 * of the segment under the pointer (hover is unified per step, so the click names every segment: the height says
 * which), null above the bar.
 */
function onStepClick(div: HTMLElement, data: OverviewResponse, open: OpenStep): void {
  const gd = div as PlotlyHTMLElement;
  if (typeof gd.on !== "function") return;
  div.classList.add("ptp-clickable-chart");
  gd.on("plotly_click", (ev: PlotMouseEvent) => {
    const p = ev.points[0];
    if (!p) return;
    const step = data.steps[p.pointIndex];
    const ms = clickedMs(div, ev);
    open(p.pointIndex, step && ms !== null ? segmentAt(step.breakdown_us, data.categories, ms) : null);
  });
}

function sharePieFigure(data: OverviewResponse): Figure {
  const cats = data.categories.filter((c) => (num(data.average.breakdown_us[c]) ?? 0) > 0);
  return {
    data: [
      {
        type: "pie",
        labels: cats,
        values: cats.map((c) => (num(data.average.breakdown_us[c]) ?? 0) / 1000),
        marker: { colors: cats.map((c) => CATEGORY_COLORS[c] ?? "#9e9e9e"), line: { width: 1, color: "rgba(128,128,128,0.35)" } },
        hovertemplate: "%{label}: %{value:,.2f} ms per step · %{percent:.1%}<extra></extra>",
        ...DONUT,
      },
    ],
    layout: {
      showlegend: true,
      legend: { orientation: "v", x: 1, xanchor: "left", y: 0.5, yanchor: "middle" },
      margin: { l: 8, r: 8, t: 8, b: 8 },
      uniformtext: { minsize: 9, mode: "hide" },
    },
  };
}

export async function render(container: HTMLElement, ctx: ViewContext): Promise<(() => void) | undefined> {
  const loaded = await loadView(ctx, container, { data: () => fetchFor<OverviewResponse>(ctx, "overview") }, { what: "the overview" });
  if (!loaded) return undefined;
  const { data } = loaded;
  data.steps = Array.isArray(data.steps) ? data.steps : [];
  data.categories = Array.isArray(data.categories) && data.categories.length ? data.categories : Object.keys(CATEGORY_COLORS);
  data.gpus = Array.isArray(data.gpus) ? data.gpus : [];
  data.recommendations = Array.isArray(data.recommendations) ? data.recommendations : [];
  data.notes = Array.isArray(data.notes) ? data.notes : [];
  const gpuTrace = data.environment.device_type !== "CPU";

  const stepChart = chartDiv("step-chart", 340);
  const pieChart = chartDiv("breakdown-pie", 280);
  const nSteps = data.steps.length;
  const openStep: OpenStep = (i, category) => {
    const step = data.steps[i];
    if (!step) return;
    writeViewUrlState({ ...traceWindowState(step.start_us, step.start_us + step.duration_us), cat: category ?? undefined });
    ctx.navigate("Trace");
  };
  replaceChildren(
    container,
    h(
      "div",
      { class: "ptp-view ptp-overview", testid: "overview" },
      diagnosisCard(ctx, data, gpuTrace),
      whatIfCard(ctx, data.recommendations, data.verdict?.id),
      data.mfu && (gpuTrace || data.mfu.model_flops_per_step > 0) ? mfuCard(ctx, data.mfu) : null,
      data.notes.map((n) => h("div", { class: "ptp-note", testid: "overview-note", role: "note" }, infoIcon("A note from the analysis."), h("span", {}, n))),
      h("div", { class: "ptp-grid ptp-grid-cards" }, configurationCard(data), gpuTrace ? data.gpus.map(gpuCard) : null),
      card(
        { title: "Step time breakdown", testid: "card-steps" },
        h(
          "p",
          { class: "ptp-muted ptp-card-sub" },
          `${formatInt(nSteps)} step${nSteps === 1 ? "" : "s"} · average `,
          h("strong", { testid: "avg-step-time", title: `${formatExactUs(data.average.duration_us)}\n${HELP.stepTime}`, dataset: { value: String(data.average.duration_us) } }, formatDuration(data.average.duration_us)),
          " per step ",
          infoIcon(HELP.breakdown),
          nSteps ? " · click a bar to open that step in the Trace view, the category you click highlighted" : null,
        ),
        stepChart,
      ),
      card(
        { title: "Execution summary", testid: "card-execution" },
        h("div", { class: "ptp-split" }, h("div", { class: "ptp-table-wrap" }, executionTable(data, gpuTrace, openStep)), pieChart),
      ),
    ),
  );

  let charts: Charts | null = null;
  try {
    const Plotly = await ctx.loadPlotly();
    if (left(ctx)) return undefined;
    charts = new Charts(Plotly, ctx);
    await charts.draw(stepChart, (theme) => stepFigure(data, theme));
    onStepClick(stepChart, data, openStep);
    await charts.draw(pieChart, () => sharePieFigure(data));
  } catch (err) {
    if (left(ctx)) return undefined;
    const message = err instanceof Error ? err.message : String(err);
    stepChart.replaceWith(h("p", { class: "ptp-muted", testid: "chart-error" }, `The chart could not be drawn: ${message}`));
    pieChart.remove();
  }
  const c = charts;
  return () => c?.dispose();
}
