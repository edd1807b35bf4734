import type { Api } from "../api";
import type { Plotly } from "../lib/plotly";
import type { Theme } from "../theme";
import type { RunInfo, SpanInfo, WorkerInfo } from "../types";

/** Everything a view page gets from the shell. */
export interface ViewContext {
  readonly run: string;
  readonly worker: string;
  readonly span: string;
  /**
   * The file name of the allocator snapshot selected instead of a trace (then `worker` is that name and `span`
   * is "snapshot", and the Memory view shows the snapshot); null for a trace.
   */
  readonly snapshot: string | null;
  /** The catalog entries behind the selection (state, file name, size...). */
  readonly runInfo: RunInfo;
  readonly workerInfo: WorkerInfo;
  readonly spanInfo: SpanInfo;
  /** Typed JSON access to the plugin's routes; pass { signal: ctx.signal } to getJSON. */
  readonly api: Api;
  /** Aborted when the user leaves this page (other tab, run, worker or span). */
  readonly signal: AbortSignal;
  /** Current theme; subscribe with onThemeChange (auto-unsubscribed on leave). */
  readonly theme: Theme;
  onThemeChange(listener: (theme: Theme) => void): void;
  /**
   * Called with the container's size whenever it changes to a non-zero size. TensorBoard hides
   * inactive plugin tabs with max-height:0, so anything measured while hidden is 0 tall: redraw
   * or Plotly.Plots.resize() here. Auto-disconnected on leave.
   */
  onResize(listener: (size: { width: number; height: number }) => void): void;
  /** Lazily load plotly.js (separate chunk). */
  loadPlotly(): Promise<Plotly>;
  /**
   * Switch the shell to another tab (e.g. a link from Overview to Kernel), optionally selecting
   * another run / worker / span at the same time (e.g. Diff's "open in the experiment's Operator view").
   */
  navigate(view: string, selection?: { run?: string; worker?: string; span?: string }): void;
}

/** What a view page module exports. */
export interface ViewModule {
  /**
   * Fill `container` (empty, owned by the view until leave). May be async; a rejected promise is
   * shown as an error card. May return a cleanup function, called on leave.
   */
  // eslint-disable-next-line @typescript-eslint/no-invalid-void-type -- lets plain `function render(): void` modules type-check
  render(container: HTMLElement, ctx: ViewContext): void | (() => void) | Promise<void | (() => void)>;
}
