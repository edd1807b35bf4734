/**
 * The shell's view host: the tab bar (arrow keys move between tabs) and the content pane, which shows the
 * connection's state, the empty logdir, the selected span's loading or failure, or mounts the selected page
 * (the built-in Trace info tab or a registered view) with a fresh ViewContext, leaving the previous one first.
 * A page is mounted again only when what it shows changes (its span, tab, state or parse).
 */
import type { Api } from "../api";
import { emptyState, errorCard, fileErrorCard, progressRow, unreachableCard } from "../components";
import { h, replaceChildren } from "../dom";
import { loadPlotly } from "../lib/plotly";
import type { ThemeSource } from "../theme";
import type { RunsResponse } from "../types";
import type { UrlState } from "../urlState";
import { VIEW_LABELS, viewLoader } from "../views/registry";
import * as traceInfo from "../views/trace/traceInfo";
import type { ViewContext, ViewModule } from "../views/types";
import { type Connection, INFO_LABEL, INFO_TAB, isSnapshot, type Selection, SNAPSHOT_SPAN, where } from "./runs";

export interface HostOptions {
  api: Api;
  theme: ThemeSource;
  /** a tab or a page's link asks for another selection */
  choose(change: UrlState): void;
  /** how long the unreachable card says the next try is away, in seconds */
  retrySeconds: number;
}

export class ViewHost {
  readonly tabs: HTMLElement;
  readonly content: HTMLElement;
  private tabsSignature = "";
  private contentKey: string | null = null;
  private failed = false;
  private leave: (() => void) | null = null;
  /** The parse shown for each span (its file's mtime): a span being parsed again keeps its page until the new parse. */
  private readonly shownVersions = new Map<string, number>();

  constructor(private readonly opts: HostOptions) {
    this.tabs = h("nav", { class: "ptp-tabs", role: "tablist", testid: "tabs", attrs: { "aria-label": "Profiler views" } });
    this.content = h("div", { class: "ptp-content", role: "tabpanel", testid: "content" });
    this.tabs.addEventListener("keydown", (e) => { this.onTabKey(e); });
  }

  /** Back online: a page that failed (likely for the lost connection) is mounted again. */
  retryFailed(): void {
    if (this.failed) this.contentKey = null;
  }

  renderTabs(sel: Selection | null, tabs: string[]): void {
    const signature = `${tabs.join("|")}#${sel?.view ?? ""}`;
    if (signature === this.tabsSignature) return;
    this.tabsSignature = signature;
    replaceChildren(
      this.tabs,
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
            onClick: () => { this.opts.choose({ view: id }); },
          },
          id === INFO_TAB ? INFO_LABEL : (VIEW_LABELS[id as keyof typeof VIEW_LABELS] ?? id),
        );
      }),
    );
  }

  private onTabKey(e: KeyboardEvent): void {
    if (e.key !== "ArrowLeft" && e.key !== "ArrowRight") return;
    const buttons = Array.from(this.tabs.querySelectorAll<HTMLButtonElement>("button[role=tab]"));
    const current = buttons.findIndex((b) => b.getAttribute("aria-selected") === "true");
    if (current < 0 || buttons.length === 0) return;
    const next = buttons[(current + (e.key === "ArrowRight" ? 1 : buttons.length - 1)) % buttons.length];
    const view = next?.dataset["view"];
    if (view) {
      this.opts.choose({ view });
      this.tabs.querySelector<HTMLButtonElement>(`button[data-view="${CSS.escape(view)}"]`)?.focus();
    }
  }

  /** What the content pane shows, as a key: the same key keeps the page mounted. */
  private keyOf(runs: RunsResponse | null, c: Connection, sel: Selection | null): string {
    if (!runs) return `nodata:${c.state}:${"message" in c ? c.message : ""}`;
    if (!sel) return `empty:${runs.logdir}:${runs.scanning}`;
    const s = sel.span;
    const stateKey = s.state === "ready" ? "ready" : s.state === "failed" ? `failed:${s.error ?? ""}` : "loading";
    return JSON.stringify([sel.run.name, sel.worker.name, s.span, sel.view, stateKey, s.file, this.shownVersion(sel)]);
  }

  renderContent(runs: RunsResponse | null, c: Connection, sel: Selection | null): void {
    const key = this.keyOf(runs, c, sel);
    if (key === this.contentKey) {
      // Same page: only a loading bar may need a refresh.
      if (sel && (sel.span.state === "loading" || sel.span.state === "queued")) this.renderSpanLoading(sel);
      return;
    }
    this.contentKey = key;
    this.leave?.();
    this.leave = null;
    this.failed = false;
    const pane = h("div", { class: "ptp-pane" });
    replaceChildren(this.content, pane);
    if (!runs) {
      if (c.state === "unreachable") replaceChildren(pane, unreachableCard(c.message, this.opts.retrySeconds));
      else if (c.state === "error") replaceChildren(pane, errorCard("The profiler plugin could not list runs", c.message, "server-error"));
      else replaceChildren(pane, h("p", { class: "ptp-muted", testid: "connecting" }, "Connecting to the profiler plugin…"));
      return;
    }
    if (!sel) {
      replaceChildren(pane, emptyState(runs.logdir, runs.scanning, runs.errors.length > 0));
      return;
    }
    if (sel.span.state === "failed") replaceChildren(pane, fileErrorCard(where(sel.run.name, sel.worker.name, sel.span.span), sel.span));
    else if (sel.span.state !== "ready") this.renderSpanLoading(sel);
    else this.mountView(pane, sel);
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
    const pane = this.content.firstElementChild;
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

  /** The context a page is mounted with: its selection, the API, the theme, and hooks undone when it is left. */
  private context(pane: HTMLElement, sel: Selection, signal: AbortSignal, cleanups: (() => void)[]): ViewContext {
    const theme = this.opts.theme;
    return {
      run: sel.run.name,
      worker: sel.worker.name,
      span: sel.span.span,
      snapshot: isSnapshot(sel.run, sel.worker) ? sel.worker.name : null,
      runInfo: sel.run,
      workerInfo: sel.worker,
      spanInfo: sel.span,
      api: this.opts.api,
      signal,
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
      navigate: (view, selection) => { this.opts.choose({ ...selection, view }); },
    };
  }

  /** Mount the built-in tab or a registered view into `pane`, with a fresh ViewContext. */
  private mountView(pane: HTMLElement, sel: Selection): void {
    const controller = new AbortController();
    const cleanups: (() => void)[] = [];
    this.leave = () => {
      controller.abort();
      for (const fn of cleanups.splice(0)) {
        try {
          fn();
        } catch {
          // a view's cleanup must not break the shell
        }
      }
    };
    const ctx = this.context(pane, sel, controller.signal, cleanups);
    const load: () => Promise<ViewModule> =
      sel.view === INFO_TAB ? () => Promise.resolve(traceInfo) : (viewLoader(sel.view) ?? (() => Promise.resolve(traceInfo)));
    pane.dataset["view"] = sel.view;
    const fail = (err: unknown): void => {
      if (controller.signal.aborted) return;
      this.failed = true;
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
        if (pane.querySelector('[data-testid="error-card"]')) this.failed = true;
      })
      .catch(fail);
  }
}
