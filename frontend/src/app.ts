/**
 * The shell: header pickers (run / worker / span), the tab bar, loading and error cards for
 * trace files, and the content pane that hosts the built-in "Trace info" tab or a registered
 * view page. State comes from polling `./runs`; the selection lives in TensorBoard's URL hash.
 *
 * A run's allocator snapshots (`snapshots` in `./runs`) are picked like workers, in their own group of the
 * Worker picker, each with one span, `snapshot`: a snapshot selection offers the Memory view alone (its snapshot
 * mode), and a snapshot that cannot be read shows its reason as a file that failed does.
 *
 * App polls and wires its parts (app/): the routing and URL state (routing.ts), the pickers (runPicker.ts), the
 * notices of the logdir's files (notices.ts) and the view host (viewHost.ts: the tabs and the page); what it
 * knows of the runs is runs.ts's pure functions.
 */
import { ApiError, type Api } from "./api";
import { openCaptureDialog } from "./capture/captureDialog";
import type { OpenTarget } from "./capture/captureData";
import { computingStatus } from "./computing";
import { h, replaceChildren } from "./dom";
import { busyOf, pageInfo, runsQuery, type PageInfo } from "./runsPage";
import type { ThemeSource } from "./theme";
import type { RunsResponse } from "./types";
import { onUrlStateChange, type UrlState } from "./urlState";
import { Notices } from "./app/notices";
import { Routing } from "./app/routing";
import { RunPicker } from "./app/runPicker";
import { type Connection, DEFAULT_VIEW, isSnapshot, normalizeRuns, normalizeSpan, rec, SNAPSHOT_VIEW } from "./app/runs";
import { ViewHost } from "./app/viewHost";

export { DEFAULT_VIEW, INFO_TAB, isSnapshot, normalizeRuns, normalizeSpan, runMtime, SNAPSHOT_SPAN } from "./app/runs";

export const POLL_ACTIVE_MS = 2_000;
export const POLL_IDLE_MS = 10_000;
export const POLL_UNREACHABLE_MS = 5_000;

export class App {
  private runs: RunsResponse | null = null;
  /** The page fields of the last answer (counts over every run, what loads or failed anywhere). */
  private page: PageInfo | null = null;
  private connection: Connection = { state: "connecting" };
  private pollTimer: number | undefined;
  private polling = false;
  private lastPollAt = 0;
  private readonly routing: Routing;
  private readonly pickers: RunPicker;
  private readonly notices = new Notices(POLL_UNREACHABLE_MS / 1000);
  private readonly host: ViewHost;
  /** what the server computes for the page in the background (409 "computing"), see computing.ts */
  private readonly computing = computingStatus();

  constructor(
    private readonly root: HTMLElement,
    private readonly api: Api,
    theme: ThemeSource,
  ) {
    this.routing = new Routing(api, () => { this.update(); });
    this.pickers = new RunPicker((change) => { this.choose(change); }, () => { this.pollNow(); });
    this.host = new ViewHost({ api, theme, choose: (change) => { this.choose(change); }, retrySeconds: POLL_UNREACHABLE_MS / 1000 });
  }

  start(): void {
    replaceChildren(
      this.root,
      h(
        "div",
        { class: "ptp-app" },
        h(
          "header",
          { class: "ptp-header" },
          h("div", { class: "ptp-brand" }, "PyTorch Profiler"),
          ...this.pickers.controls(),
          this.notices.status,
          h("button", {
            class: "ptp-button",
            testid: "capture-open",
            title: "Capture a profile from a running job (tb_plugin.capture)",
            attrs: { type: "button" },
            onClick: () => { this.openCapture(); },
          }, "Capture"),
        ),
        this.notices.banner,
        this.notices.files,
        this.host.tabs,
        this.computing,
        h("main", { class: "ptp-main" }, this.host.content),
      ),
    );
    replaceChildren(this.host.content, h("p", { class: "ptp-muted", testid: "connecting" }, "Connecting to the profiler plugin…"));
    this.update();

    onUrlStateChange((state) => {
      // Back/forward or a hand-edited URL: follow it.
      this.routing.want = state;
      this.update();
    });
    // TensorBoard hides an inactive plugin tab by shrinking its iframe to 0 px; poll slowly
    // meanwhile and catch up as soon as it is shown again.
    window.addEventListener("resize", () => {
      if (!this.hidden() && Date.now() - this.lastPollAt > POLL_ACTIVE_MS) this.pollNow();
    });
    document.addEventListener("visibilitychange", () => {
      if (!this.hidden() && Date.now() - this.lastPollAt > POLL_ACTIVE_MS) this.pollNow();
    });
    this.pollNow();
  }

  private openCapture(): void {
    openCaptureDialog({
      api: this.api,
      currentRun: () => this.routing.shown?.run,
      open: (target: OpenTarget) => {
        // the dialog saw the span listed: the next poll lists it here too, and the wish selects it
        this.routing.want = { run: target.run, worker: target.worker, span: target.span, view: DEFAULT_VIEW };
        this.pollNow();
      },
    });
  }

  private hidden(): boolean {
    return document.hidden || window.innerHeight === 0;
  }

  // ---------------------------------------------------------------- polling

  private pollNow(): void {
    window.clearTimeout(this.pollTimer);
    void this.poll();
  }

  private async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    let delay: number;
    try {
      const want = this.routing.want.run ?? this.routing.shown?.run;
      const raw = await this.api.get("runs", runsQuery(this.pickers.search, want), { timeoutMs: 20_000 });
      this.runs = normalizeRuns(raw);
      this.page = pageInfo(rec(raw) ?? {}, this.runs.runs, normalizeSpan);
      if (this.connection.state !== "ok") this.host.retryFailed();
      this.connection = { state: "ok" };
      delay = this.busy() ? POLL_ACTIVE_MS : POLL_IDLE_MS;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      const unreachable = err instanceof ApiError && err.unreachable;
      this.connection = unreachable ? { state: "unreachable", message } : { state: "error", message };
      delay = unreachable ? POLL_UNREACHABLE_MS : POLL_IDLE_MS;
    } finally {
      this.polling = false;
      this.lastPollAt = Date.now();
    }
    if (this.hidden()) delay = Math.max(delay, POLL_IDLE_MS);
    this.update();
    window.clearTimeout(this.pollTimer);
    this.pollTimer = window.setTimeout(() => { void this.poll(); }, delay);
  }

  private busy(): boolean {
    return this.runs ? busyOf(this.runs, this.page) : true;
  }

  // ---------------------------------------------------------------- selection and rendering

  private choose(change: UrlState): void {
    this.routing.want = { ...this.routing.want, ...change };
    this.update(true);
  }

  /** Re-render from the current state; `userAction` commits the selection to the URL at once. */
  private update(userAction = false): void {
    const runs = this.runs;
    const sel = this.routing.resolve(runs?.runs ?? [], this.page?.newest ?? undefined);
    if (sel) this.routing.ensureViews(sel.run);
    this.routing.syncUrl(runs, sel, userAction);
    this.pickers.render(runs?.runs ?? [], this.page, sel);
    this.notices.renderStatus(runs, this.connection, this.page, this.pickers.search);
    this.notices.renderBanner(runs, this.connection);
    this.notices.renderFiles(runs, this.page, sel);
    const tabs = sel ? (isSnapshot(sel.run, sel.worker) ? [SNAPSHOT_VIEW] : this.routing.tabsFor(sel.run.name)) : [];
    this.host.renderTabs(sel, tabs);
    this.host.renderContent(runs, this.connection, sel);
  }
}
