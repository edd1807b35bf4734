/**
 * The Trace view's critical-path picker: each step, each annotation the trace offers (its first range) and the
 * visible range; choosing one fetches `./critical_path`, overlays its segments (GPU, host or waiting), says the
 * largest shares beside the picker and glides the view to what was walked.
 */
import type { Api } from "../../api";
import { h, replaceChildren } from "../../dom";
import type { SpanExtra } from "../../types";
import { formatTime } from "../../format";
import type { CriticalMark } from "./traceRenderer";
import type { ViewRange } from "./traceViewport";

export interface PathHooks {
  api: Api;
  ids: { run: string; worker: string; span: string };
  signal: AbortSignal;
  view(): ViewRange | null;
  /** glide to a range and redraw */
  show(range: ViewRange): void;
  redraw(): void;
}

/** The side a segment's category is drawn on. */
export function criticalSide(category: string): CriticalMark["side"] {
  if (category === "kernel" || category === "memcpy" || category === "memset") return "gpu";
  if (category === "cpu_op" || category === "annotation" || category === "runtime" || category === "launch") return "host";
  return "wait";
}

/** The /critical_path query of a picker value (`step:N`, `annotation:NAME` or `range`). */
export function pathQuery(value: string, view: ViewRange | null): SpanExtra<"critical_path"> {
  if (value === "range") return { start_us: view?.start ?? 0, end_us: view?.end ?? 0 };
  const colon = value.indexOf(":");
  const kind = value.slice(0, colon);
  return kind === "annotation" ? { annotation: value.slice(colon + 1) } : { step: value.slice(colon + 1) };
}

export class CriticalPath {
  /** the segments drawn over the timeline */
  marks: CriticalMark[] = [];

  constructor(private readonly select: HTMLSelectElement, private readonly summary: HTMLElement,
    private readonly hooks: PathHooks) {}

  /** Offer the steps (`names`); a trace without ProfilerStep#N (one step "0") offers its annotations instead. */
  offer(names: string[]): void {
    this.fill(names, []);
    if (names.length <= 1 && (names[0] ?? "0") === "0") {
      this.hooks.api
        .get("critical_path", this.hooks.ids, { signal: this.hooks.signal })
        .then((resp) => { this.fill(resp.steps, resp.annotations.map((a) => a.name)); })
        .catch(() => undefined);
    }
  }

  private fill(steps: string[], annotations: string[]): void {
    replaceChildren(
      this.select,
      h("option", { attrs: { value: "" } }, "Critical path…"),
      steps.map((n) => h("option", { attrs: { value: `step:${n}` } }, `Critical path of step ${n}`)),
      annotations.map((n) => h("option", { attrs: { value: `annotation:${n}` } }, `Critical path of ${n} (first)`)),
      h("option", { attrs: { value: "range" } }, "Critical path of the visible range"),
    );
    this.select.disabled = false;
  }

  /** Fetch and overlay the critical path of a picker value (none: clear it), then fit what was walked. */
  async show(value: string): Promise<void> {
    this.marks = [];
    this.summary.textContent = "";
    this.hooks.redraw();
    if (!value) return;
    const { signal } = this.hooks;
    let resp;
    try {
      resp = await this.hooks.api.get("critical_path", { ...this.hooks.ids, ...pathQuery(value, this.hooks.view()) }, { signal });
    } catch (err) {
      if (!signal.aborted) this.summary.textContent = `Critical path unavailable: ${err instanceof Error ? err.message : String(err)}`;
      return;
    }
    if (signal.aborted || this.select.value !== value) return;
    this.marks = resp.segments.map((s) => ({ start: s.start_us, end: s.end_us, id: s.id, side: criticalSide(s.category) }));
    const shares = [...resp.shares].sort((a, b) => b.us - a.us).slice(0, 4);
    const label = resp.scope.label.charAt(0).toUpperCase() + resp.scope.label.slice(1);
    this.summary.textContent = `${label}: ${shares.map((s) => `${s.category.replace("_", " ")} ${(100 * s.share).toFixed(1)}%`).join(" · ")}`;
    this.summary.title = resp.shares.map((s) => `${s.category}: ${formatTime(s.us)} (${(100 * s.share).toFixed(1)}%)`).join("\n");
    const dur = resp.end_us - resp.start_us;
    this.hooks.show({ start: resp.start_us - dur * 0.02, end: resp.end_us + dur * 0.02 });
  }
}
