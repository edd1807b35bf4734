/**
 * The Diff page: a baseline trace (the shell's run / worker / span, or chosen here) against an
 * experiment trace (chosen here; remembered while the page is left and in the URL as exp_run /
 * exp_worker / exp_span). Step time and its breakdown side by side (GET ./diff), operators and kernels
 * joined by name, and a drill-down of the aligned host activity (GET ./diff/node).
 *
 * Shown for every run (registry's ALWAYS_AVAILABLE): it compares traces rather than showing a run's own data.
 */
import { ApiError } from "../../api";
import { card, errorCard, infoIcon } from "../../components";
import { type Child, h, replaceChildren } from "../../dom";
import { formatDuration, formatExactUs, formatSignedDuration, formatSignedPercent } from "../../format";
import type { Plotly } from "../../lib/plotly";
import type { RunInfo, RunsResponse } from "../../types";
import { onViewUrlChange, pushViewUrlState, readViewUrlState, writeViewUrlState } from "../../urlState";
import { Charts, chartDiv, type Figure, plotlyText } from "../common/charts";
import { csvFileName } from "../common/csv";
import { left } from "../common/ui";
import { DrillDown } from "./diffDrill";
import { linkedExperiment } from "./diffLink";
import { DiffTable, KERNEL_METRICS, OPERATOR_METRICS, deltaSpan } from "./diffTables";
import {
  BASELINE_COLOR,
  type DiffBreakdown,
  type DiffResponse,
  type DiffRow,
  EXPERIMENT_COLOR,
  type StepPair,
  type Target,
  describeTarget,
  sameTarget,
  targetParams,
} from "./diffTypes";
import type { ViewContext } from "../types";

// ------------------------------------------------------------------------------------------- selection

/** The last pair compared in this page session, so leaving the page (or switching the baseline) keeps the experiment. */
let remembered: { base: Target; exp: Target } | null = null;

function cleanRuns(raw: unknown): RunInfo[] {
  const body = (typeof raw === "object" && raw !== null ? raw : {}) as Partial<RunsResponse>;
  const runs = Array.isArray(body.runs) ? body.runs : [];
  return runs
    .filter((r) => typeof r.name === "string" && Array.isArray(r.workers))
    .map((r) => ({
      name: r.name,
      snapshots: [], // the Diff view compares traces; a run's allocator snapshots are not among its sides
      workers: r.workers
        .filter((w) => typeof w.name === "string" && Array.isArray(w.spans))
        .map((w) => ({ name: w.name, spans: w.spans.filter((s) => typeof s.span === "string") }))
        .filter((w) => w.spans.length > 0),
    }))
    .filter((r) => r.workers.length > 0);
}

function exists(runs: RunInfo[], t: Target): boolean {
  return runs.some((r) => r.name === t.run && r.workers.some((w) => w.name === t.worker && w.spans.some((s) => s.span === t.span)));
}

function spanOf(runs: RunInfo[], t: Target): RunInfo["workers"][number]["spans"][number] | undefined {
  return runs.find((r) => r.name === t.run)?.workers.find((w) => w.name === t.worker)?.spans.find((s) => s.span === t.span);
}

/**
 * The default experiment: another run with a worker of the same name (same span when it has one), else
 * another span of the same worker (span 2 first), else any other trace; null when there is no other trace.
 */
export function defaultExperiment(runs: RunInfo[], base: Target): Target | null {
  const ready = (s: { state: string }): boolean => s.state === "ready";
  for (const r of runs) {
    if (r.name === base.run) continue;
    const w = r.workers.find((x) => x.name === base.worker);
    if (!w) continue;
    const s = w.spans.find((x) => x.span === base.span) ?? w.spans.find(ready) ?? w.spans[0];
    if (s) return { run: r.name, worker: w.name, span: s.span };
  }
  const own = runs.find((r) => r.name === base.run)?.workers.find((w) => w.name === base.worker);
  const others = (own?.spans ?? []).filter((s) => s.span !== base.span);
  const span = others.find((s) => s.span === "2") ?? others.find(ready) ?? others[0];
  if (own && span) return { run: base.run, worker: own.name, span: span.span };
  for (const r of runs) {
    for (const w of r.workers) {
      const s = w.spans.find((x) => !(r.name === base.run && w.name === base.worker && x.span === base.span));
      if (s) return { run: r.name, worker: w.name, span: s.span };
    }
  }
  return null;
}

/** The experiment to open with, and what the page says about a link's (see diffLink.linkedExperiment). */
function initialExperiment(runs: RunInfo[], base: Target): { exp: Target | null; note: string | null } {
  const linked = linkedExperiment(runs, base, readViewUrlState());
  if (linked?.target) return { exp: linked.target, note: linked.note };
  const exp = fallbackExperiment(runs, base);
  const note = linked ? `${linked.note ?? ""}: comparing with ${exp ? describeTarget(exp) : "nothing"} instead.` : null;
  return { exp, note };
}

function fallbackExperiment(runs: RunInfo[], base: Target): Target | null {
  if (remembered) {
    if (sameTarget(remembered.base, base) && exists(runs, remembered.exp)) return remembered.exp;
    if (sameTarget(remembered.exp, base) && exists(runs, remembered.base)) return remembered.base;
    if (!sameTarget(remembered.exp, base) && exists(runs, remembered.exp)) return remembered.exp;
  }
  return defaultExperiment(runs, base);
}

/** A target after one picker changed: keep the worker and span names where the new run has them. */
function retarget(runs: RunInfo[], want: Partial<Target>, prev: Target): Target | null {
  const run = runs.find((r) => r.name === (want.run ?? prev.run)) ?? runs[0];
  if (!run) return null;
  const worker = run.workers.find((w) => w.name === (want.worker ?? prev.worker)) ?? run.workers[0];
  if (!worker) return null;
  const span =
    worker.spans.find((s) => s.span === (want.span ?? prev.span)) ?? worker.spans.find((s) => s.state === "ready") ?? worker.spans[0];
  if (!span) return null;
  return { run: run.name, worker: worker.name, span: span.span };
}

function targetPicker(prefix: string, runs: RunInfo[], value: Target, onChange: (t: Target) => void): HTMLElement {
  const select = (key: keyof Target, label: string, options: { value: string; label: string; title?: string }[]): HTMLElement => {
    const s = h(
      "select",
      {
        testid: `${prefix}-${key}`,
        attrs: { "aria-label": `${prefix === "base" ? "Baseline" : "Experiment"} ${label.toLowerCase()}` },
        onChange: () => {
          const next = retarget(runs, { [key]: s.value }, value);
          if (next) onChange(next);
        },
      },
      options.map((o) => h("option", { attrs: { value: o.value }, title: o.title }, o.label)),
    );
    s.value = value[key];
    return h("label", { class: "ptp-picker" }, label, s);
  };
  const run = runs.find((r) => r.name === value.run);
  const worker = run?.workers.find((w) => w.name === value.worker);
  return h(
    "div",
    { class: "ptp-diff-target", testid: `${prefix}-picker` },
    select("run", "Run", runs.map((r) => ({ value: r.name, label: r.name }))),
    select("worker", "Worker", (run?.workers ?? []).map((w) => ({ value: w.name, label: w.name }))),
    select(
      "span",
      "Span",
      (worker?.spans ?? []).map((s) => ({
        value: s.span,
        label: s.state === "ready" ? s.span : `${s.span} (${s.state})`,
        title: `${s.file} (${s.state})`,
      })),
    ),
  );
}

// ------------------------------------------------------------------------------------------- breakdown

const num = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);

function breakdownCategories(b: DiffBreakdown): string[] {
  const cats = Array.isArray(b.categories) ? b.categories : Object.keys(b.baseline);
  return cats.filter((c) => (num(b.baseline[c]) ?? 0) > 0 || (num(b.experiment[c]) ?? 0) > 0);
}

function categoryPct(b: DiffBreakdown, c: string): number | null {
  const base = num(b.baseline[c]) ?? 0;
  const d = num(b.delta[c]) ?? (num(b.experiment[c]) ?? 0) - base;
  return base > 0 ? d / base : null;
}

function breakdownFigure(b: DiffBreakdown): Figure {
  const cats = breakdownCategories(b);
  const base = cats.map((c) => (num(b.baseline[c]) ?? 0) / 1000);
  const exp = cats.map((c) => (num(b.experiment[c]) ?? 0) / 1000);
  const hover = cats.map((c) => {
    const d = num(b.delta[c]);
    const p = categoryPct(b, c);
    return `${plotlyText(c)}<br>baseline ${formatDuration(num(b.baseline[c]))} · experiment ${formatDuration(num(b.experiment[c]))}<br>change ${formatSignedDuration(d)}${p === null ? "" : ` (${formatSignedPercent(p)})`} per step`;
  });
  const top = Math.max(0, ...base, ...exp);
  const annotations = cats.map((c, i) => {
    const d = num(b.delta[c]) ?? 0;
    const p = categoryPct(b, c);
    return {
      x: c,
      y: Math.max(base[i] ?? 0, exp[i] ?? 0),
      text: `${formatSignedDuration(d)}${p === null ? "" : `<br>${formatSignedPercent(p)}`}`,
      showarrow: false,
      yanchor: "bottom" as const,
      yshift: 3,
      font: { size: 11, color: d > 0 ? "#d32f2f" : d < 0 ? "#2e7d32" : "#757575" },
    };
  });
  return {
    data: [
      { type: "bar", name: "Baseline", x: cats.map(plotlyText), y: base, marker: { color: BASELINE_COLOR }, customdata: hover, hovertemplate: "%{customdata}<extra>baseline</extra>" },
      { type: "bar", name: "Experiment", x: cats.map(plotlyText), y: exp, marker: { color: EXPERIMENT_COLOR }, customdata: hover, hovertemplate: "%{customdata}<extra>experiment</extra>" },
    ],
    layout: {
      barmode: "group",
      bargap: 0.25,
      bargroupgap: 0.06,
      hovermode: "closest",
      legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom" },
      xaxis: { type: "category", automargin: true },
      yaxis: { title: { text: "ms per step" }, rangemode: "tozero", range: [0, top * 1.22 || 1], automargin: true },
      annotations,
      margin: { l: 56, r: 16, t: 36, b: 40 },
    },
  };
}

/** " · step 3" when one step of a side is compared, "" for all steps. */
function stepSuffix(step: string | null | undefined): string {
  return step ? ` · step ${step}` : "";
}

function breakdownTable(b: DiffBreakdown, steps: StepPair | null): HTMLElement {
  const cats = breakdownCategories(b);
  const cell = (v: number | null, col: string, content?: Child): HTMLElement =>
    h("td", { class: "ptp-num", dataset: { col, ...(v === null ? {} : { value: String(v) }) }, title: formatExactUs(v) }, content ?? formatDuration(v));
  const row = (label: string, base: number | null, exp: number | null, d: number | null, p: number | null, key: string): HTMLElement =>
    h(
      "tr",
      { testid: "breakdown-row", dataset: { category: key } },
      h("td", {}, label),
      cell(base, "baseline"),
      cell(exp, "experiment"),
      cell(d, "delta", deltaSpan(d, formatSignedDuration(d))),
      h("td", { class: "ptp-num", dataset: { col: "delta_pct", ...(p === null ? {} : { value: String(p) }) } }, deltaSpan(p, formatSignedPercent(p))),
    );
  return h(
    "table",
    { class: "ptp-table", testid: "diff-breakdown-table" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", {}, "Category"),
        h("th", { class: "ptp-num" }, "Baseline"),
        h("th", { class: "ptp-num" }, "Experiment"),
        h("th", { class: "ptp-num" }, "Δ"),
        h("th", { class: "ptp-num", title: "Change relative to the baseline; \u201c—\u201d where the baseline is 0." }, "Δ %"),
      ),
    ),
    h(
      "tbody",
      {},
      cats.map((c) => row(c, num(b.baseline[c]), num(b.experiment[c]), num(b.delta[c]), categoryPct(b, c), c)),
    ),
    h(
      "tfoot",
      {},
      row(steps ? `Step (${steps.step} ⇄ ${steps.exp_step})` : "Step (average)", num(b.step_baseline_us), num(b.step_experiment_us), num(b.step_delta_us), num(b.step_delta_ratio), "step"),
    ),
  );
}

function stepSummary(b: DiffBreakdown, base: Target, exp: Target, steps: StepPair | null): HTMLElement {
  const d = num(b.step_delta_us);
  const p = num(b.step_delta_ratio);
  const verdict = d === null || d === 0 ? "no change" : d < 0 ? "faster" : "slower";
  const metric = (label: string, sub: string, value: Child, testid: string, raw: number | null, title: string): HTMLElement =>
    h(
      "div",
      { class: "ptp-metric", testid, title, dataset: raw === null ? {} : { value: String(raw) } },
      h("div", { class: "ptp-metric-label" }, label),
      h("div", { class: "ptp-metric-value" }, value),
      h("div", { class: "ptp-tile-sub" }, sub),
    );
  return h(
    "div",
    { class: "ptp-metrics" },
    metric("Baseline step time", describeTarget(base) + stepSuffix(steps?.step), formatDuration(num(b.step_baseline_us)), "step-baseline", num(b.step_baseline_us), formatExactUs(num(b.step_baseline_us))),
    metric("Experiment step time", describeTarget(exp) + stepSuffix(steps?.exp_step), formatDuration(num(b.step_experiment_us)), "step-experiment", num(b.step_experiment_us), formatExactUs(num(b.step_experiment_us))),
    metric(
      "Step time change",
      p === null ? verdict : `${formatSignedPercent(p)} · ${verdict}`,
      deltaSpan(d, formatSignedDuration(d)),
      "step-delta",
      d,
      steps ? "The experiment's step time minus the baseline's." : "Mean experiment step time minus mean baseline step time.",
    ),
  );
}

// ------------------------------------------------------------------------------------------- page

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = window.setTimeout(resolve, ms);
    signal.addEventListener("abort", () => { window.clearTimeout(t); resolve(); }, { once: true });
  });
}

/** The two steps the URL asks for (both or neither), e.g. from the Overview's outlier-steps evidence. */
function initialSteps(): StepPair | null {
  const url = readViewUrlState();
  return url.step && url.exp_step ? { step: url.step, exp_step: url.exp_step } : null;
}

class DiffPage {
  private exp: Target | null;
  /** what a link's experiment left out or named wrongly, and what is compared instead (until the user picks) */
  private linkNote: string | null = null;
  /** the first comparison shown opens the drill-down entry a link names */
  private firstShow = true;
  private readonly stopHistory = onViewUrlChange(() => { this.followHistory(); });
  private steps: StepPair | null = initialSteps();
  private readonly controls: HTMLElement;
  private readonly body: HTMLElement;
  private ctl: AbortController | null = null;
  private charts: Charts | null = null;
  private drill: DrillDown | null = null;

  constructor(
    container: HTMLElement,
    private readonly ctx: ViewContext,
    private runs: RunInfo[],
    private readonly base: Target,
  ) {
    const initial = initialExperiment(runs, base);
    this.exp = initial.exp;
    this.linkNote = initial.note;
    this.controls = h("div", { class: "ptp-diff-controls" });
    this.body = h("div", { class: "ptp-view", testid: "diff-body" });
    replaceChildren(
      container,
      h(
        "div",
        { class: "ptp-view ptp-diff", testid: "diff" },
        card({ title: "Compare two traces", testid: "card-diff-targets" }, this.controls),
        this.body,
      ),
    );
    this.renderControls();
  }

  start(): void {
    this.remember();
    void this.compare();
  }

  private remember(): void {
    if (!this.exp) return;
    remembered = { base: this.base, exp: this.exp };
    writeViewUrlState({ exp_run: this.exp.run, exp_worker: this.exp.worker, exp_span: this.exp.span, step: this.steps?.step, exp_step: this.steps?.exp_step });
  }

  /** Back from two steps to all steps of both traces. */
  private allSteps(): void {
    this.steps = null;
    this.remember();
    this.renderControls();
    void this.compare();
  }

  /** The steps each side offers, from the last comparison (empty until one has answered). */
  private stepNames: { baseline: string[]; experiment: string[] } = { baseline: [], experiment: [] };

  /** Two steps instead of all steps: the baseline's and the experiment's. */
  private setSteps(steps: StepPair): void {
    this.steps = steps;
    this.remember();
    this.renderControls();
    void this.compare();
  }

  private stepsRow(): HTMLElement | null {
    const steps = this.steps;
    if (!steps) return null;
    const picker = (side: "baseline" | "experiment", value: string): HTMLElement => {
      const names = this.stepNames[side].includes(value) ? this.stepNames[side] : [value, ...this.stepNames[side]];
      const s = h(
        "select",
        {
          testid: `diff-step-${side}`,
          attrs: { "aria-label": `${side === "baseline" ? "Baseline" : "Experiment"} step` },
          onChange: () => {
            this.setSteps(side === "baseline" ? { step: s.value, exp_step: steps.exp_step } : { step: steps.step, exp_step: s.value });
          },
        },
        names.map((n) => h("option", { attrs: { value: n } }, `step ${n}`)),
      );
      s.value = value;
      return h("label", { class: "ptp-picker" }, side === "baseline" ? "Baseline" : "Experiment", s);
    };
    const sameTrace = this.exp !== null && sameTarget(this.exp, this.base);
    return h(
      "div",
      { class: "ptp-diff-row", testid: "diff-steps" },
      h("span", { class: "ptp-diff-side" }, "Steps"),
      picker("baseline", steps.step),
      picker("experiment", steps.exp_step),
      h("span", { class: "ptp-muted", testid: "diff-steps-label" }, `step ${steps.step} (baseline) ⇄ step ${steps.exp_step} (experiment): one step of each side, not means over all steps`),
      sameTrace
        ? null
        : h("button", { class: "ptp-button", testid: "diff-all-steps", attrs: { type: "button" }, onClick: () => { this.allSteps(); } }, "Compare all steps"),
    );
  }

  private renderControls(): void {
    const exp = this.exp;
    replaceChildren(
      this.controls,
      h(
        "div",
        { class: "ptp-diff-row" },
        h("span", { class: "ptp-diff-side ptp-diff-side-base", title: "Baseline: the shell's selection; changing it here changes the selection." }, h("span", { class: "ptp-swatch", style: { background: BASELINE_COLOR } }), "Baseline"),
        targetPicker("base", this.runs, this.base, (t) => {
          if (this.exp) remembered = { base: t, exp: this.exp };
          writeViewUrlState({ step: undefined, exp_step: undefined }); // steps belong to the traces they came with
          this.ctx.navigate("Diff", t);
        }),
      ),
      h(
        "div",
        { class: "ptp-diff-row" },
        h("span", { class: "ptp-diff-side ptp-diff-side-exp" }, h("span", { class: "ptp-swatch", style: { background: EXPERIMENT_COLOR } }), "Experiment"),
        exp
          ? targetPicker("exp", this.runs, exp, (t) => {
              this.exp = t;
              this.linkNote = null;
              this.steps = null;
              this.remember();
              this.renderControls();
              void this.compare();
            })
          : h("span", { class: "ptp-muted", testid: "exp-none" }, "There is no other trace in the log directory to compare with."),
        exp
          ? h(
              "button",
              {
                class: "ptp-button",
                testid: "diff-swap",
                title: "Make the experiment the baseline and the baseline the experiment",
                attrs: { type: "button" },
                onClick: () => {
                  remembered = { base: exp, exp: this.base };
                  const s = this.steps;
                  writeViewUrlState({ exp_run: this.base.run, exp_worker: this.base.worker, exp_span: this.base.span, step: s?.exp_step, exp_step: s?.step });
                  this.ctx.navigate("Diff", exp);
                },
              },
              "⇄ Swap",
            )
          : null,
      ),
      this.stepsRow(),
      this.linkNote ? h("p", { class: "ptp-note", testid: "diff-link-note", attrs: { role: "status" } }, this.linkNote) : null,
      h(
        "p",
        { class: "ptp-muted ptp-card-foot" },
        "Δ is experiment minus baseline: red means more time in the experiment, green less. Times are means per step unless a table says otherwise.",
      ),
    );
  }

  private async refreshRuns(): Promise<void> {
    try {
      const raw = await this.ctx.api.getJSON<unknown>("runs", undefined, { signal: this.ctx.signal, timeoutMs: 10_000 });
      this.runs = cleanRuns(raw);
      this.renderControls();
    } catch {
      // keep the old list
    }
  }

  private async compare(): Promise<void> {
    this.ctl?.abort();
    this.drill?.dispose();
    this.drill = null;
    this.charts?.dispose();
    this.charts = null;
    const ctl = new AbortController();
    this.ctl = ctl;
    const onAbort = (): void => { ctl.abort(); };
    this.ctx.signal.addEventListener("abort", onAbort, { once: true });
    const exp = this.exp;
    if (!exp) {
      replaceChildren(this.body, card({ testid: "diff-nothing", title: "Nothing to compare" }, h("p", {}, "The Diff view compares two traces: add another run or span to the log directory.")));
      return;
    }
    if (sameTarget(exp, this.base) && (!this.steps || this.steps.step === this.steps.exp_step)) {
      replaceChildren(this.body, card({ class: "ptp-warn-card", testid: "diff-same", title: "Choose an experiment" }, h("p", {}, "The baseline and the experiment are the same trace: pick another run, worker or span above.")));
      return;
    }
    replaceChildren(this.body, h("p", { class: "ptp-muted", testid: "diff-loading" }, `Comparing ${describeTarget(this.base)} with ${describeTarget(exp)}…`));
    const data = await this.fetchDiff(exp, ctl.signal);
    if (!data || ctl.signal.aborted) return;
    this.show(data, exp, ctl.signal);
  }

  /** GET ./diff, waiting while a side is still loading (409); null after an error card or when aborted. */
  private async fetchDiff(exp: Target, signal: AbortSignal): Promise<DiffResponse | null> {
    const aborted = (): boolean => signal.aborted;
    for (;;) {
      const span = spanOf(this.runs, exp);
      if (span?.state === "failed") {
        replaceChildren(this.body, errorCard("The experiment's trace could not be loaded", span.error ?? `${span.file} failed to load.`, "diff-error"));
        return null;
      }
      try {
        return await this.ctx.api.getJSON<DiffResponse>("diff", targetParams(this.base, exp, this.steps), { signal, timeoutMs: 180_000 });
      } catch (err) {
        if (aborted()) return null;
        if (!(err instanceof ApiError && err.status === 409)) {
          replaceChildren(this.body, errorCard("Could not compare the traces", err instanceof Error ? err.message : String(err), "diff-error"));
          return null;
        }
        replaceChildren(
          this.body,
          card({ class: "ptp-warn-card", testid: "diff-waiting", title: "Still loading" }, h("p", {}, err.message), h("p", { class: "ptp-muted" }, "The comparison appears by itself once both traces are loaded.")),
        );
      }
      await sleep(2000, signal);
      if (aborted()) return null;
      await this.refreshRuns();
    }
  }

  private operatorLinks(row: DiffRow, exp: Target): Child {
    const link = (t: Target, label: string, which: string): HTMLElement =>
      h(
        "button",
        {
          class: "ptp-link-button",
          testid: `open-op-${which}`,
          title: `Open in the ${which}'s Operator view (${describeTarget(t)}), searching for ${row.name}`,
          attrs: { type: "button" },
          onClick: (e) => {
            e.stopPropagation();
            writeViewUrlState({ q: row.name });
            this.ctx.navigate("Operator", t);
          },
        },
        label,
      );
    return h(
      "div",
      { class: "ptp-diff-links" },
      "Open in ",
      row.status !== "new" ? link(this.base, "baseline's", "baseline") : null,
      row.status === "both" ? " / " : null,
      row.status !== "gone" ? link(exp, "experiment's", "experiment") : null,
      " Operator view",
    );
  }

  private show(data: DiffResponse, exp: Target, signal: AbortSignal): void {
    const b = data.breakdown;
    const steps = data.steps?.baseline && data.steps.experiment ? { step: data.steps.baseline, exp_step: data.steps.experiment } : null;
    if (data.step_names) {
      this.stepNames = data.step_names;
      if (steps) this.renderControls(); // the step pickers now list every step
    }
    const ops = Array.isArray(data.operators) ? data.operators : [];
    const kernels = Array.isArray(data.kernels) ? data.kernels : [];
    const breakdownChart = chartDiv("diff-breakdown-chart", 340);
    const name = (what: string) => (m: { label: string }): string =>
      csvFileName("diff", this.base.run, this.base.worker, `span${this.base.span}`, "vs", exp.run, exp.worker, `span${exp.span}`, what, m.label);
    const opTable = new DiffTable({
      testid: "diff-operators",
      what: "Operator",
      rows: ops,
      metrics: OPERATOR_METRICS,
      csvName: name("operators"),
      links: (row) => this.operatorLinks(row, exp),
    });
    const kernelTable = kernels.length
      ? new DiffTable({ testid: "diff-kernels", what: "Kernel", rows: kernels, metrics: KERNEL_METRICS, csvName: name("kernels") })
      : null;
    const newOps = ops.filter((r) => r.status === "new").length;
    const goneOps = ops.filter((r) => r.status === "gone").length;

    let plotlyPromise: Promise<{ charts: Charts; plotly: Plotly } | null> | null = null;
    const charts = (): Promise<{ charts: Charts; plotly: Plotly } | null> => {
      plotlyPromise ??= this.ctx.loadPlotly().then(
        (plotly) => {
          if (signal.aborted) return null;
          this.charts ??= new Charts(plotly, this.ctx);
          return { charts: this.charts, plotly };
        },
        () => null,
      );
      return plotlyPromise;
    };
    // The drill-down's entry is in the URL (`drill`): each step down or up is a history entry Back undoes, and a
    // copied link reopens it; a new comparison starts at the top.
    const linked = this.firstShow ? readViewUrlState().drill : undefined;
    const start = linked !== undefined && /^0(-\d{1,6}){0,64}$/.test(linked) ? linked : "0";
    if (!this.firstShow) writeViewUrlState({ drill: undefined });
    this.firstShow = false;
    const drill = new DrillDown(this.ctx, this.base, exp, charts, signal, this.steps,
      (path) => { pushViewUrlState({ drill: path === "0" ? undefined : path }); });
    this.drill = drill;

    replaceChildren(
      this.body,
      card({ title: "Step time", testid: "card-diff-summary" }, stepSummary(b, this.base, exp, steps)),
      card(
        { title: "Step time breakdown", testid: "card-diff-breakdown" },
        h("p", { class: "ptp-muted ptp-card-sub" }, `${steps ? "Per compared step" : "Average per step"}, each microsecond counted once in the first matching category. `, infoIcon("Kernel > Memcpy > Memset > Communication > Runtime > DataLoader > CPU Exec > Other; categories empty on both sides are left out.")),
        h("div", { class: "ptp-split ptp-diff-split" }, breakdownChart, h("div", { class: "ptp-table-wrap" }, breakdownTable(b, steps))),
      ),
      card(
        { title: "Operators", testid: "card-diff-operators" },
        h(
          "p",
          { class: "ptp-muted ptp-card-sub" },
          `${ops.length} operators joined by name; ${newOps} new, ${goneOps} gone. Sums over ${steps ? "the compared step" : "the span"}; ordered by the size of the change until you sort by a column.`,
        ),
        opTable.el,
      ),
      card(
        { title: "Kernels", testid: "card-diff-kernels" },
        kernelTable
          ? h("div", {}, h("p", { class: "ptp-muted ptp-card-sub" }, `GPU kernels joined by name; sums over ${steps ? "the compared step" : "the span"}.`), kernelTable.el)
          : h("p", { class: "ptp-muted" }, "Neither trace has GPU kernels."),
      ),
      card(
        { title: "Drill-down", testid: "card-diff-drill" },
        h(
          "p",
          { class: "ptp-muted ptp-card-sub" },
          "The host activity of all steps, aligned between the two traces (data loading, annotated regions, optimizer steps and the operators between them), with the cumulative change as a line. ",
          infoIcon("Entries are paired by name in time order; what lies between paired entries is grouped, so no time is dropped. Sums over the span."),
        ),
        drill.el,
      ),
    );
    void (async () => {
      const got = await charts();
      if (!got || signal.aborted) return;
      try {
        await got.charts.draw(breakdownChart, () => breakdownFigure(b));
      } catch (err) {
        breakdownChart.replaceWith(h("p", { class: "ptp-muted", testid: "chart-error" }, `The chart could not be drawn: ${err instanceof Error ? err.message : String(err)}`));
      }
    })();
    void drill.open(start);
  }

  /** Back or Forward between drill-down entries of this page: open the one the URL names now. */
  private followHistory(): void {
    const want = readViewUrlState().drill ?? "0";
    if (this.drill && /^0(-\d{1,6}){0,64}$/.test(want) && want !== this.drill.path) void this.drill.open(want);
  }

  dispose(): void {
    this.ctl?.abort();
    this.drill?.dispose();
    this.charts?.dispose();
    this.stopHistory();
    // The experiment belongs to this page: a link to another page must not carry it (it stays remembered).
    writeViewUrlState({ exp_run: undefined, exp_worker: undefined, exp_span: undefined, step: undefined, exp_step: undefined, drill: undefined });
  }
}

export async function render(container: HTMLElement, ctx: ViewContext): Promise<(() => void) | undefined> {
  replaceChildren(container, h("p", { class: "ptp-muted" }, "Loading the list of traces…"));
  let runs: RunInfo[];
  try {
    runs = cleanRuns(await ctx.api.getJSON<unknown>("runs", undefined, { signal: ctx.signal, timeoutMs: 20_000 }));
  } catch (err) {
    if (!left(ctx)) replaceChildren(container, errorCard("Could not list the traces", err instanceof Error ? err.message : String(err)));
    return undefined;
  }
  if (left(ctx)) return undefined;
  const page = new DiffPage(container, ctx, runs, { run: ctx.run, worker: ctx.worker, span: ctx.span });
  page.start();
  return () => { page.dispose(); };
}
