/**
 * The shell: header pickers (run / worker / span), the tab bar, loading and error cards for
 * trace files, and the content pane that hosts the built-in "Trace info" tab or a registered
 * view page. State comes from polling `./runs`; the selection lives in TensorBoard's URL hash.
 *
 * A run's allocator snapshots (`snapshots` in `./runs`) are picked like workers, in their own group of the
 * Worker picker, each with one span, `snapshot`: a snapshot selection offers the Memory view alone (its snapshot
 * mode), and a snapshot that cannot be read shows its reason as a file that failed does.
 */
import { ApiError, type Api } from "./api";
import { openCaptureDialog } from "./capture/captureDialog";
import type { OpenTarget } from "./capture/captureData";
import { computingStatus } from "./computing";
import { emptyState, errorCard, fileErrorCard, progressRow, unreachableCard } from "./components";
import { h, replaceChildren } from "./dom";
import { loadPlotly } from "./lib/plotly";
import { attentionOf, busyOf, moreRunsText, needsSearch, pageInfo, runCountText, runsQuery, type PageInfo, type SpanAt } from "./runsPage";
import type { ThemeSource } from "./theme";
import type { RunInfo, RunsResponse, SpanInfo, ViewsResponse, WorkerInfo } from "./types";
import { VIEW_NAMES } from "./types";
import { onUrlStateChange, pushUrlState, readUrlState, writeUrlState, type UrlState } from "./urlState";
import { ALWAYS_AVAILABLE, VIEW_LABELS, viewLoader } from "./views/registry";
import * as traceInfo from "./views/trace/traceInfo";
import type { ViewContext, ViewModule } from "./views/types";

/** Tab id of the built-in summary tab (also its value in the URL). */
export const INFO_TAB = "info";
const INFO_LABEL = "Trace info";

export const POLL_ACTIVE_MS = 2_000;
export const POLL_IDLE_MS = 10_000;
export const POLL_UNREACHABLE_MS = 5_000;

interface Selection {
  run: RunInfo;
  worker: WorkerInfo;
  span: SpanInfo;
  view: string;
}

type Connection =
  | { state: "connecting" }
  | { state: "ok" }
  | { state: "unreachable"; message: string }
  | { state: "error"; message: string };

interface ViewsEntry {
  /** signature of the run's span states when fetched; refetch when it changes */
  signature: string;
  views: string[] | null;
  inFlight: boolean;
}

const SPAN_STATES: readonly string[] = ["queued", "loading", "ready", "failed"];
/** The one span of an allocator snapshot in the pickers and the URL. */
export const SNAPSHOT_SPAN = "snapshot";
const SNAPSHOT_VIEW = "Memory";

/** Whether a worker of the run is one of its allocator snapshots (see normalizeRuns). */
export function isSnapshot(run: RunInfo, worker: WorkerInfo): boolean {
  return worker.spans.length === 1 && worker.spans[0]?.span === SNAPSHOT_SPAN && run.snapshots.some((s) => s.name === worker.name);
}

type SnapshotInfo = RunInfo["snapshots"][number];

/** A run's snapshots, well-formed ones only. */
function normalizeSnapshots(raw: unknown): SnapshotInfo[] {
  const out: SnapshotInfo[] = [];
  for (const s of Array.isArray(raw) ? (raw as unknown[]) : []) {
    if (typeof s !== "object" || s === null) continue;
    const r = s as Record<string, unknown>;
    if (typeof r["name"] !== "string" || r["name"] === "") continue;
    const state = typeof r["state"] === "string" && SPAN_STATES.includes(r["state"]) ? r["state"] : "queued";
    out.push({
      name: r["name"],
      file: typeof r["file"] === "string" ? r["file"] : r["name"],
      size_bytes: typeof r["size_bytes"] === "number" ? r["size_bytes"] : 0,
      mtime: typeof r["mtime"] === "number" && Number.isFinite(r["mtime"]) ? r["mtime"] : 0,
      state: state as SnapshotInfo["state"],
      error: typeof r["error"] === "string" ? r["error"] : null,
    });
  }
  return out;
}

/** A snapshot as the pickers see it: a worker of one span, `snapshot`. */
function snapshotWorker(s: SnapshotInfo): WorkerInfo {
  const span: SpanInfo = {
    span: SNAPSHOT_SPAN, key: SNAPSHOT_SPAN, mtime: s.mtime, state: s.state, progress: s.state === "ready" ? 1 : 0,
    error: s.error, file: s.file, size_bytes: s.size_bytes, updating: false,
  };
  return { name: s.name, spans: [span] };
}

const arr = (v: unknown): unknown[] => (Array.isArray(v) ? (v as unknown[]) : []);
const rec = (v: unknown): Record<string, unknown> | null =>
  typeof v === "object" && v !== null ? (v as Record<string, unknown>) : null;

/** One span of an answer, well-formed, or null. */
export function normalizeSpan(raw: unknown): SpanInfo | null {
  const sp = rec(raw);
  if (!sp || typeof sp["span"] !== "string") return null;
  const state = typeof sp["state"] === "string" && SPAN_STATES.includes(sp["state"]) ? sp["state"] : "queued";
  const progress = typeof sp["progress"] === "number" && Number.isFinite(sp["progress"]) ? sp["progress"] : 0;
  return {
    span: sp["span"],
    key: typeof sp["key"] === "string" && sp["key"] !== "" ? sp["key"] : sp["span"],
    mtime: typeof sp["mtime"] === "number" && Number.isFinite(sp["mtime"]) ? sp["mtime"] : 0,
    state: state as SpanInfo["state"],
    progress: Math.min(1, Math.max(0, progress)),
    error: typeof sp["error"] === "string" ? sp["error"] : null,
    file: typeof sp["file"] === "string" ? sp["file"] : "",
    size_bytes: typeof sp["size_bytes"] === "number" ? sp["size_bytes"] : 0,
    updating: sp["updating"] === true,
  };
}

/** Keep only well-formed entries, so a half-written server answer cannot break the page. */
export function normalizeRuns(raw: unknown): RunsResponse {
  const obj = (typeof raw === "object" && raw !== null ? raw : {}) as Partial<Record<keyof RunsResponse, unknown>>;
  const runs: RunInfo[] = [];
  for (const r of arr(obj.runs).map(rec)) {
    if (!r || typeof r["name"] !== "string") continue;
    const workers: WorkerInfo[] = [];
    for (const w of arr(r["workers"]).map(rec)) {
      if (!w || typeof w["name"] !== "string") continue;
      const spans = arr(w["spans"]).map(normalizeSpan).filter((sp): sp is SpanInfo => sp !== null);
      if (spans.length) workers.push({ name: w["name"], spans });
    }
    const snapshots = normalizeSnapshots(r["snapshots"]).filter((s) => !workers.some((w) => w.name === s.name));
    workers.push(...snapshots.map(snapshotWorker));
    if (workers.length) runs.push({ name: r["name"], workers, snapshots });
  }
  return {
    runs,
    logdir: typeof obj.logdir === "string" ? obj.logdir : "",
    scanning: obj.scanning === true,
    errors: arr(obj.errors).filter((e): e is string => typeof e === "string"),
  };
}

/** 2: ready, 1: queued/loading, 0: failed. */
function spanScore(s: SpanInfo): number {
  return s.state === "ready" ? 2 : s.state === "failed" ? 0 : 1;
}
const workerScore = (w: WorkerInfo): number => Math.max(0, ...w.spans.map(spanScore));
const runScore = (r: RunInfo): number => Math.max(0, ...r.workers.map(workerScore));
/** The newest file of a run: the run opened first is the one profiled last (as the old plugin did). */
export const runMtime = (r: RunInfo): number => Math.max(0, ...r.workers.flatMap((w) => w.spans.map((s) => s.mtime)));
/** The view a run opens on when no link names one: the Overview, as the old plugin did. */
export const DEFAULT_VIEW = "Overview";

/**
 * Choose one item of a picker level:
 * 1. the wished one (from the link or the user; `names` of an item: its name and other keys), whatever its state;
 * 2. else the one shown before, unless it failed: defaults do not jump around while files load;
 * 3. else the first of the best score (ties: the newest by `recency`, else the first).
 */
function pick<T>(
  items: readonly T[],
  names: (t: T) => readonly string[],
  wanted: string | undefined,
  previous: string | undefined,
  score: (t: T) => number,
  recency: (t: T) => number = () => 0,
): T | undefined {
  const byName = (n: string | undefined): T | undefined =>
    n === undefined ? undefined : (items.find((i) => names(i)[0] === n) ?? items.find((i) => names(i).includes(n)));
  const wish = byName(wanted);
  if (wish) return wish;
  const prev = byName(previous);
  if (prev && score(prev) > 0) return prev;
  let best: T | undefined;
  for (const item of items) {
    if (best === undefined || score(item) > score(best) || (score(item) === score(best) && recency(item) > recency(best))) best = item;
  }
  return best;
}

function runSignature(run: RunInfo): string {
  return run.workers.map((w) => `${w.name}:${w.spans.map((s) => `${s.span}=${s.state}`).join(",")}`).join(";");
}

function where(run: string, worker: string, span: string): string {
  return span === SNAPSHOT_SPAN ? `${run} · snapshot ${worker}` : `${run} · ${worker} · span ${span}`;
}

export class App {
  private runs: RunsResponse | null = null;
  /** The page fields of the last answer (counts over every run, what loads or failed anywhere). */
  private page: PageInfo | null = null;
  /** What the run picker's search box holds: the server lists the runs whose name holds it. */
  private runSearch = "";
  private searchTimer: number | undefined;
  /** The parse shown for each span (its file's mtime): a span being parsed again keeps its page until the new parse. */
  private readonly shownVersions = new Map<string, number>();
  private connection: Connection = { state: "connecting" };
  /** What the user (or the URL) asked for; resolved against the catalog on every update. */
  private want: UrlState;
  private readonly views = new Map<string, ViewsEntry>();
  /** The run/worker/span on screen, so defaults stay put while files load. */
  private shown: { run: string; worker: string; span: string } | null = null;
  private pollTimer: number | undefined;
  private polling = false;
  private lastPollAt = 0;

  private contentKey: string | null = null;
  private contentFailed = false;
  private leaveContent: (() => void) | null = null;

  private readonly el: {
    runSelect: HTMLSelectElement;
    runSearch: HTMLInputElement;
    workerSelect: HTMLSelectElement;
    spanSelect: HTMLSelectElement;
    status: HTMLElement;
    tabs: HTMLElement;
    banner: HTMLElement;
    files: HTMLElement;
    content: HTMLElement;
    /** what the server computes for the page in the background (409 "computing"), see computing.ts */
    computing: HTMLElement;
  };
  private optionSignatures = { run: "", worker: "", span: "", tabs: "", files: "" };

  constructor(
    private readonly root: HTMLElement,
    private readonly api: Api,
    private readonly theme: ThemeSource,
  ) {
    this.want = readUrlState();
    const select = (testid: string, label: string, onChange: (value: string) => void): HTMLSelectElement => {
      const s = h("select", { testid, attrs: { "aria-label": label }, onChange: () => { onChange(s.value); } });
      return s;
    };
    this.el = {
      runSelect: select("run-select", "Run", (v) => { this.choose({ run: v }); }),
      runSearch: h("input", {
        class: "ptp-run-search",
        testid: "run-search",
        attrs: { type: "search", placeholder: "Search runs", "aria-label": "Search runs", hidden: "" },
      }),
      workerSelect: select("worker-select", "Worker", (v) => { this.choose({ worker: v }); }),
      spanSelect: select("span-select", "Span", (v) => { this.choose({ span: v }); }),
      status: h("div", { class: "ptp-status", testid: "status", attrs: { "aria-live": "polite" } }),
      tabs: h("nav", { class: "ptp-tabs", role: "tablist", testid: "tabs", attrs: { "aria-label": "Profiler views" } }),
      banner: h("div", { class: "ptp-banner", testid: "banner" }),
      files: h("div", { class: "ptp-files ptp-stack", testid: "files" }),
      content: h("div", { class: "ptp-content", role: "tabpanel", testid: "content" }),
      computing: computingStatus(),
    };
    this.el.tabs.addEventListener("keydown", (e) => { this.onTabKey(e); });
    this.el.runSearch.addEventListener("input", () => {
      window.clearTimeout(this.searchTimer);
      this.searchTimer = window.setTimeout(() => {
        this.runSearch = this.el.runSearch.value;
        this.pollNow();
      }, 250);
    });
  }

  start(): void {
    const picker = (label: string, ...controls: HTMLElement[]): HTMLElement =>
      h("label", { class: "ptp-picker" }, label, ...controls);
    replaceChildren(
      this.root,
      h(
        "div",
        { class: "ptp-app" },
        h(
          "header",
          { class: "ptp-header" },
          h("div", { class: "ptp-brand" }, "PyTorch Profiler"),
          picker("Run", this.el.runSearch, this.el.runSelect),
          picker("Worker", this.el.workerSelect),
          picker("Span", this.el.spanSelect),
          this.el.status,
          h("button", {
            class: "ptp-button",
            testid: "capture-open",
            title: "Capture a profile from a running job (tb_plugin.capture)",
            attrs: { type: "button" },
            onClick: () => { this.openCapture(); },
          }, "Capture"),
        ),
        this.el.banner,
        this.el.files,
        this.el.tabs,
        this.el.computing,
        h("main", { class: "ptp-main" }, this.el.content),
      ),
    );
    replaceChildren(this.el.content, h("p", { class: "ptp-muted", testid: "connecting" }, "Connecting to the profiler plugin…"));
    this.update();

    onUrlStateChange((state) => {
      // Back/forward or a hand-edited URL: follow it.
      this.want = state;
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
      currentRun: () => this.shown?.run,
      open: (target: OpenTarget) => {
        // the dialog saw the span listed: the next poll lists it here too, and the wish selects it
        this.want = { run: target.run, worker: target.worker, span: target.span, view: DEFAULT_VIEW };
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
      const raw = await this.api.getJSON<unknown>("runs", runsQuery(this.runSearch, this.want.run ?? this.shown?.run), { timeoutMs: 20_000 });
      this.runs = normalizeRuns(raw);
      this.page = pageInfo(rec(raw) ?? {}, this.runs.runs, normalizeSpan);
      const reconnected = this.connection.state !== "ok";
      this.connection = { state: "ok" };
      if (reconnected && this.contentFailed) this.contentKey = null;
      delay = this.busy() ? POLL_ACTIVE_MS : POLL_IDLE_MS;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (err instanceof ApiError && err.unreachable) {
        this.connection = { state: "unreachable", message };
        delay = POLL_UNREACHABLE_MS;
      } else {
        this.connection = { state: "error", message };
        delay = POLL_IDLE_MS;
      }
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

  // ---------------------------------------------------------------- selection

  private choose(change: UrlState): void {
    this.want = { ...this.want, ...change };
    this.update(true);
  }

  private resolve(): Selection | null {
    const runs = this.runs?.runs ?? [];
    const prev = this.shown;
    // A page of runs (a big logdir) holds the run the server would open first: chosen here by name, as it ranks them.
    const newest = this.page?.newest ?? undefined;
    const run = pick(runs, (r) => [r.name], this.want.run, prev?.run ?? newest, runScore, runMtime);
    if (!run) return null;
    const sameRun = prev?.run === run.name;
    const worker = pick(run.workers, (w) => [w.name], this.want.worker, sameRun ? prev.worker : undefined, workerScore);
    if (!worker) return null;
    const sameWorker = sameRun && prev.worker === worker.name;
    // A span is named by its stable key (links) or its position (older links, other pages); the key wins.
    const span = pick(worker.spans, (s) => [s.key, s.span], this.want.span, sameWorker ? prev.span : undefined, spanScore);
    if (!span) return null;
    this.shown = { run: run.name, worker: worker.name, span: span.key };
    return { run, worker, span, view: isSnapshot(run, worker) ? SNAPSHOT_VIEW : this.viewFor(run.name) };
  }

  /**
   * The tab to show: the wished one where the run has it (kept while the run's views are not known yet), else
   * the Overview where the run has one (or while its views are not known), else Trace info.
   */
  private viewFor(run: string): string {
    const tabs = this.tabsFor(run);
    const known = this.views.get(run)?.views != null;
    const wish = this.want.view;
    if (wish !== undefined && (tabs.includes(wish) || (!known && (wish === INFO_TAB || viewLoader(wish))))) return wish;
    return !known || tabs.includes(DEFAULT_VIEW) ? DEFAULT_VIEW : INFO_TAB;
  }

  /** Tab ids for a run: "info" plus the registered views the server lists, in canonical order. */
  private tabsFor(run: string): string[] {
    const listed = this.views.get(run)?.views ?? [];
    const known = VIEW_NAMES.filter((v) => (listed.includes(v) || ALWAYS_AVAILABLE.has(v)) && viewLoader(v));
    return [INFO_TAB, ...known];
  }

  /**
   * Write the effective selection to the URL. Wishes (`want`) are only what a link or the user
   * asked for; defaults are written to the URL but never become wishes. A wish that names
   * something absent is kept while the first scan runs (it may still appear), then dropped.
   */
  private syncUrl(sel: Selection | null, force = false): void {
    if (!this.runs) return;
    const w = this.want;
    const settled = !this.runs.scanning || force;
    if (settled) {
      if (!sel) {
        if (this.runs.runs.length > 0) this.want = {};
        return;
      }
      if (w.run !== undefined && w.run !== sel.run.name) delete w.run;
      if (w.worker !== undefined && w.worker !== sel.worker.name) delete w.worker;
      if (w.span !== undefined && w.span !== sel.span.span && w.span !== sel.span.key) delete w.span;
    }
    if (!sel) return;
    // A span named by its position is held by its stable key from now on: a file added later with an older stamp
    // shifts the positions, and must not move the page to another file.
    if (w.span === sel.span.span) w.span = sel.span.key;
    const out: UrlState = {
      run: w.run ?? sel.run.name,
      worker: w.worker ?? sel.worker.name,
      // the stable key (a link by position was rewritten above)
      span: w.span ?? sel.span.key,
      view: sel.view,
    };
    // A view is judged once ./views answered for this run: until then keep the linked one.
    const viewsKnown = this.views.get(sel.run.name)?.views != null;
    if (w.view !== undefined) {
      if (!viewsKnown) out.view = w.view;
      else if (w.view !== sel.view) delete w.view;
    }
    // The user's own choice (a tab, a picker, a link) is a step Back can undo; what the shell fills in is not.
    if (force) pushUrlState(out);
    else writeUrlState(out);
  }

  // ---------------------------------------------------------------- views list

  private ensureViews(run: RunInfo): void {
    const signature = runSignature(run);
    const entry = this.views.get(run.name);
    if (entry && (entry.inFlight || entry.signature === signature)) return;
    if (!run.workers.some((w) => w.spans.some((s) => s.state === "ready"))) {
      // Views need analysed data: nothing to ask before a span of this run is ready. The list
      // stays unknown (null), so a view named by a link is kept until it can be judged.
      this.views.set(run.name, { signature, views: null, inFlight: false });
      return;
    }
    const next: ViewsEntry = { signature, views: entry?.views ?? null, inFlight: true };
    this.views.set(run.name, next);
    this.api
      .getJSON<ViewsResponse>("views", { run: run.name })
      .then((resp) => {
        next.views = Array.isArray(resp.views) ? resp.views.filter((v): v is string => typeof v === "string") : [];
      })
      .catch(() => {
        // Keep the old list (or none): the Trace info tab always works. Asked again when the run's
        // spans change state (never in a loop).
        next.views ??= [];
      })
      .finally(() => {
        next.inFlight = false;
        this.update();
      });
  }

  // ---------------------------------------------------------------- rendering

  /** Re-render from the current state; `userAction` commits the selection to the URL at once. */
  private update(userAction = false): void {
    const sel = this.resolve();
    if (sel) this.ensureViews(sel.run);
    this.syncUrl(sel, userAction);
    this.renderPickers(sel);
    this.renderStatus();
    this.renderBanner();
    this.renderFiles(sel);
    this.renderTabs(sel);
    this.renderContent(sel);
  }

  private setOptions(
    select: HTMLSelectElement,
    key: "run" | "worker" | "span",
    options: string[],
    value: string | undefined,
  ): void {
    const signature = JSON.stringify(options);
    if (signature !== this.optionSignatures[key]) {
      this.optionSignatures[key] = signature;
      replaceChildren(select, options.map((o) => h("option", { attrs: { value: o } }, o)));
    }
    select.disabled = options.length === 0;
    if (value !== undefined && select.value !== value) select.value = value;
  }

  private renderPickers(sel: Selection | null): void {
    const runs = this.runs?.runs ?? [];
    this.setOptions(this.el.runSelect, "run", runs.map((r) => r.name), sel?.run.name);
    this.el.runSearch.hidden = !needsSearch(this.page, this.runSearch);
    const more = moreRunsText(this.page, runs.length);
    const note = this.el.runSelect.querySelector("option[data-more]");
    if (more === null) note?.remove();
    else if (note) note.textContent = more;
    else this.el.runSelect.append(h("option", { attrs: { disabled: "", "data-more": "" } }, more));
    this.setWorkerOptions(sel);
    this.setOptions(this.el.spanSelect, "span", sel ? sel.worker.spans.map((s) => s.span) : [], sel?.span.span);
    for (const option of Array.from(this.el.spanSelect.options)) {
      const span = sel?.worker.spans.find((s) => s.span === option.value);
      option.title = span ? `${span.file} (${span.state})` : "";
    }
  }

  /** The Worker picker: the run's workers, then its allocator snapshots in a group of their own. */
  private setWorkerOptions(sel: Selection | null): void {
    const select = this.el.workerSelect;
    const run = sel?.run;
    const traces = run ? run.workers.filter((w) => !isSnapshot(run, w)).map((w) => w.name) : [];
    const snapshots = run ? run.workers.filter((w) => isSnapshot(run, w)).map((w) => w.name) : [];
    const signature = JSON.stringify([traces, snapshots]);
    if (signature !== this.optionSignatures.worker) {
      this.optionSignatures.worker = signature;
      const option = (o: string): HTMLOptionElement => h("option", { attrs: { value: o } }, o);
      replaceChildren(
        select,
        traces.map(option),
        snapshots.length ? h("optgroup", { attrs: { label: "Allocator snapshots" }, testid: "snapshot-options" }, snapshots.map(option)) : null,
      );
    }
    select.disabled = traces.length + snapshots.length === 0;
    if (sel && select.value !== sel.worker.name) select.value = sel.worker.name;
  }

  private renderStatus(): void {
    const status = this.el.status;
    const logdir = this.runs?.logdir ?? "";
    status.title = logdir ? `logdir: ${logdir}` : "";
    if (this.connection.state === "unreachable") {
      replaceChildren(status, "offline");
    } else if (this.runs?.scanning) {
      replaceChildren(status, h("span", { class: "ptp-spinner", attrs: { "aria-hidden": "true" } }), "scanning logdir…");
    } else if (this.runs) {
      replaceChildren(status, runCountText(this.page, this.runs.runs.length, this.runSearch));
    } else {
      replaceChildren(status);
    }
  }

  private renderBanner(): void {
    const c = this.connection;
    if (c.state === "unreachable" && this.runs) {
      replaceChildren(this.el.banner, unreachableCard(c.message, POLL_UNREACHABLE_MS / 1000));
    } else if (c.state === "error" && this.runs) {
      replaceChildren(this.el.banner, errorCard("The profiler plugin reported an error", c.message, "server-error"));
    } else {
      replaceChildren(this.el.banner);
    }
  }

  /**
   * Progress rows for every queued/loading file, an error card for every failed one (except the
   * selected span, whose error is the page itself) and the catalog's logdir-level errors. Long
   * lists are folded so hundreds of files do not push the page away.
   */
  private renderFiles(sel: Selection | null): void {
    // a page's spans that need attention are the traces'; the listed runs' allocator snapshots are told of too
    const snapshots = (this.runs?.runs ?? []).flatMap((r) =>
      r.workers.filter((w) => isSnapshot(r, w)).flatMap((w) => w.spans.map((span) => ({ run: r.name, worker: w.name, span }))),
    );
    const all = this.runs ? attentionOf(this.runs, this.page, snapshots) : { loading: [], failed: [], loadingTotal: 0, failedTotal: 0 };
    const isShown = (s: SpanAt): boolean =>
      sel !== null && s.run === sel.run.name && s.worker === sel.worker.name && s.span.span === sel.span.span;
    const loading = all.loading.map((s) => ({ at: where(s.run, s.worker, s.span.span), span: s.span }));
    const failedSpans = all.failed.filter((s) => !isShown(s));
    const failed = failedSpans.map((s) => ({ at: where(s.run, s.worker, s.span.span), span: s.span }));
    // a page lists some of them: the counts are of every span (the one on screen is not told of twice)
    const loadingTotal = all.loadingTotal;
    const failedTotal = all.failedTotal - (all.failed.length - failedSpans.length);
    const logdirErrors = (this.runs?.errors ?? []).filter((e): e is string => typeof e === "string" && e !== "");
    const signature = JSON.stringify([
      loading.map(({ at, span }) => [at, span.file, span.state, Math.round(span.progress * 100)]),
      failed.map(({ at, span }) => [at, span.file, span.error]),
      loadingTotal,
      failedTotal,
      logdirErrors,
    ]);
    if (signature === this.optionSignatures.files) return;
    this.optionSignatures.files = signature;

    const wasOpen = new Set(
      Array.from(this.el.files.querySelectorAll<HTMLDetailsElement>("details[data-fold]"))
        .filter((d) => d.open)
        .map((d) => d.dataset["fold"]),
    );
    const fold = (id: string, shown: number, items: HTMLElement[], noun: string, total: number): (HTMLElement | null)[] => {
      if (total <= shown) return items;
      const more = h(
        "details",
        { dataset: { fold: id }, testid: `more-${id}` },
        h("summary", { class: "ptp-muted" }, `${(total - shown).toLocaleString("en-US")} more ${noun}`),
        h("div", { class: "ptp-stack" }, items.slice(shown)),
      );
      more.open = wasOpen.has(id);
      return [...items.slice(0, shown), more];
    };

    const loadingRows = loading.map(({ at, span }) => progressRow(at, span));
    const failedCards = failed.map(({ at, span }) => fileErrorCard(at, span));
    replaceChildren(
      this.el.files,
      logdirErrors.map((e) => errorCard(e.startsWith("the cache folder") ? "Problem with the parse cache" : "Problem with the log directory", e, "logdir-error")),
      loadingTotal
        ? h(
            "section",
            { class: "ptp-card", testid: "loading-files" },
            h("h3", { class: "ptp-section-title" }, `Loading ${loadingTotal.toLocaleString("en-US")} file${loadingTotal === 1 ? "" : "s"}`),
            fold("loading", 6, loadingRows, "files waiting", loadingTotal),
          )
        : null,
      fold("failed", 3, failedCards, "files could not be loaded", failedTotal),
    );
  }

  private renderTabs(sel: Selection | null): void {
    const tabs = sel ? (isSnapshot(sel.run, sel.worker) ? [SNAPSHOT_VIEW] : this.tabsFor(sel.run.name)) : [];
    const signature = `${tabs.join("|")}#${sel?.view ?? ""}`;
    if (signature === this.optionSignatures.tabs) return;
    this.optionSignatures.tabs = signature;
    replaceChildren(
      this.el.tabs,
      tabs.map((id) => {
        const selected = sel?.view === id;
        return h(
          "button",
          {
            class: "ptp-tab",
            role: "tab",
            testid: `tab-${id}`,
            dataset: { view: id },
            attrs: { type: "button", "aria-selected": selected ? "true" : "false", tabindex: selected ? 0 : -1 },
            onClick: () => { this.choose({ view: id }); },
          },
          id === INFO_TAB ? INFO_LABEL : (VIEW_LABELS[id as keyof typeof VIEW_LABELS] ?? id),
        );
      }),
    );
  }

  private onTabKey(e: KeyboardEvent): void {
    if (e.key !== "ArrowLeft" && e.key !== "ArrowRight") return;
    const buttons = Array.from(this.el.tabs.querySelectorAll<HTMLButtonElement>("button[role=tab]"));
    const current = buttons.findIndex((b) => b.getAttribute("aria-selected") === "true");
    if (current < 0 || buttons.length === 0) return;
    const next = buttons[(current + (e.key === "ArrowRight" ? 1 : buttons.length - 1)) % buttons.length];
    const view = next?.dataset["view"];
    if (view) {
      this.choose({ view });
      this.el.tabs.querySelector<HTMLButtonElement>(`button[data-view="${CSS.escape(view)}"]`)?.focus();
    }
  }

  private renderContent(sel: Selection | null): void {
    const c = this.connection;
    let key: string;
    if (!this.runs) {
      key = `nodata:${c.state}:${"message" in c ? c.message : ""}`;
    } else if (!sel) {
      key = `empty:${this.runs.logdir}:${this.runs.scanning}`;
    } else {
      const s = sel.span;
      const stateKey = s.state === "ready" ? "ready" : s.state === "failed" ? `failed:${s.error ?? ""}` : "loading";
      key = JSON.stringify([sel.run.name, sel.worker.name, s.span, sel.view, stateKey, s.file, this.shownVersion(sel)]);
    }
    if (key === this.contentKey) {
      // Same page: only a loading bar may need a refresh.
      if (sel && (sel.span.state === "loading" || sel.span.state === "queued")) this.renderSpanLoading(sel);
      return;
    }
    this.contentKey = key;
    this.leaveContent?.();
    this.leaveContent = null;
    this.contentFailed = false;
    const pane = h("div", { class: "ptp-pane" });
    replaceChildren(this.el.content, pane);

    if (!this.runs) {
      if (c.state === "unreachable") {
        replaceChildren(pane, unreachableCard(c.message, POLL_UNREACHABLE_MS / 1000));
      } else if (c.state === "error") {
        replaceChildren(pane, errorCard("The profiler plugin could not list runs", c.message, "server-error"));
      } else {
        replaceChildren(pane, h("p", { class: "ptp-muted", testid: "connecting" }, "Connecting to the profiler plugin…"));
      }
      return;
    }
    if (!sel) {
      replaceChildren(pane, emptyState(this.runs.logdir, this.runs.scanning, (this.runs.errors ?? []).length > 0));
      return;
    }
    const at = where(sel.run.name, sel.worker.name, sel.span.span);
    if (sel.span.state === "failed") {
      replaceChildren(pane, fileErrorCard(at, sel.span));
      return;
    }
    if (sel.span.state !== "ready") {
      this.renderSpanLoading(sel);
      return;
    }
    this.mountView(pane, sel);
  }

  /**
   * Which parse of the span the page shows: its file's mtime once ready. While a rewritten file is parsed again
   * (`updating`) the server still answers with the last parse, so the page stays as it is; it is drawn again when
   * the new parse is ready (a new mtime).
   */
  private shownVersion(sel: Selection): number | null {
    const id = JSON.stringify([sel.run.name, sel.worker.name, sel.span.span, sel.span.file]);
    if (sel.span.state !== "ready") return null;
    if (sel.span.updating) return this.shownVersions.get(id) ?? null;
    this.shownVersions.set(id, sel.span.mtime);
    return sel.span.mtime;
  }

  private renderSpanLoading(sel: Selection): void {
    const pane = this.el.content.firstElementChild;
    if (!(pane instanceof HTMLElement)) return;
    const s = sel.span;
    replaceChildren(
      pane,
      h(
        "section",
        { class: "ptp-card", testid: "span-loading" },
        h("h3", {}, `${s.state === "queued" ? "Waiting to load" : "Loading"} this ${s.span === SNAPSHOT_SPAN ? "snapshot" : "trace"}`),
        progressRow(where(sel.run.name, sel.worker.name, s.span), s),
        h("p", { class: "ptp-muted" }, "The page fills in by itself when the file is ready."),
      ),
    );
  }

  /** Mount the built-in tab or a registered view into `pane`, with a fresh ViewContext. */
  private mountView(pane: HTMLElement, sel: Selection): void {
    const controller = new AbortController();
    const cleanups: (() => void)[] = [];
    this.leaveContent = () => {
      controller.abort();
      for (const fn of cleanups.splice(0)) {
        try {
          fn();
        } catch {
          // a view's cleanup must not break the shell
        }
      }
    };
    const theme = this.theme;
    const ctx: ViewContext = {
      run: sel.run.name,
      worker: sel.worker.name,
      span: sel.span.span,
      snapshot: isSnapshot(sel.run, sel.worker) ? sel.worker.name : null,
      runInfo: sel.run,
      workerInfo: sel.worker,
      spanInfo: sel.span,
      api: this.api,
      signal: controller.signal,
      get theme() {
        return theme.current;
      },
      onThemeChange: (listener) => {
        cleanups.push(theme.subscribe(listener));
      },
      onResize: (listener) => {
        const ro = new ResizeObserver((entries) => {
          const rect = entries[entries.length - 1]?.contentRect;
          if (rect && rect.width > 0 && rect.height > 0) listener({ width: rect.width, height: rect.height });
        });
        ro.observe(pane);
        cleanups.push(() => { ro.disconnect(); });
      },
      loadPlotly,
      navigate: (view, selection) => { this.choose({ ...selection, view }); },
    };

    const load: () => Promise<ViewModule> =
      sel.view === INFO_TAB ? () => Promise.resolve(traceInfo) : (viewLoader(sel.view) ?? (() => Promise.resolve(traceInfo)));
    pane.dataset["view"] = sel.view;
    const fail = (err: unknown): void => {
      if (controller.signal.aborted) return;
      this.contentFailed = true;
      const message = err instanceof Error ? err.message : String(err);
      replaceChildren(pane, errorCard(`The ${sel.view === INFO_TAB ? INFO_LABEL : sel.view} page failed`, message, "view-error"));
    };
    const left = (): boolean => controller.signal.aborted;
    load()
      .then(async (mod) => {
        if (left()) return;
        const cleanup = await mod.render(pane, ctx);
        if (typeof cleanup === "function") {
          if (left()) cleanup();
          else cleanups.push(cleanup);
        }
        if (pane.querySelector('[data-testid="error-card"]')) this.contentFailed = true;
      })
      .catch(fail);
  }
}
