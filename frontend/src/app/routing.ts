/**
 * The shell's routing: what a link or the user asked for (`want`, from TensorBoard's URL hash) resolved against
 * the runs listed into the run, worker, span and tab shown; the selection written back to the URL (a user's
 * choice is a step Back can undo, what the shell fills in is not); and each run's views (`./views`), asked once
 * per change of its spans' states.
 */
import type { Api } from "../api";
import type { RunInfo, RunsResponse } from "../types";
import { VIEW_NAMES } from "../types";
import { pushUrlState, readUrlState, writeUrlState, type UrlState } from "../urlState";
import { ALWAYS_AVAILABLE, viewLoader } from "../views/registry";
import {
  DEFAULT_VIEW, INFO_TAB, isSnapshot, pick, runMtime, runScore, runSignature, type Selection, SNAPSHOT_VIEW, spanScore,
  type ViewsEntry, workerScore,
} from "./runs";

export class Routing {
  /** What the user (or the URL) asked for; resolved against the catalog on every update. */
  want: UrlState = readUrlState();
  /** The run/worker/span on screen, so defaults stay put while files load. */
  shown: { run: string; worker: string; span: string } | null = null;
  private readonly views = new Map<string, ViewsEntry>();

  constructor(private readonly api: Api, private readonly changed: () => void) {}

  /** The selection to show: the wishes where the runs have them, else the defaults (see runs.pick). */
  resolve(runs: readonly RunInfo[], newest: string | undefined): Selection | null {
    const prev = this.shown;
    // A page of runs (a big logdir) holds the run the server would open first: chosen here by name, as it ranks them.
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
  tabsFor(run: string): string[] {
    const listed = this.views.get(run)?.views ?? [];
    const known = VIEW_NAMES.filter((v) => (listed.includes(v) || ALWAYS_AVAILABLE.has(v)) && viewLoader(v));
    return [INFO_TAB, ...known];
  }

  /**
   * Write the effective selection to the URL. Wishes (`want`) are only what a link or the user
   * asked for; defaults are written to the URL but never become wishes. A wish that names
   * something absent is kept while the first scan runs (it may still appear), then dropped.
   */
  syncUrl(runs: RunsResponse | null, sel: Selection | null, force = false): void {
    if (!runs) return;
    const w = this.want;
    const settled = !runs.scanning || force;
    if (settled) {
      if (!sel) {
        if (runs.runs.length > 0) this.want = {};
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

  /** Ask for a run's views when its spans' states changed (once at a time); `changed` is called when it answers. */
  ensureViews(run: RunInfo): void {
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
      .get("views", { run: run.name })
      .then((resp) => {
        // a newer server may list views this page does not know: kept as text, passed over by the registry
        const listed: unknown = resp.views;
        next.views = Array.isArray(listed) ? listed.filter((v): v is string => typeof v === "string") : [];
      })
      .catch(() => {
        // Keep the old list (or none): the Trace info tab always works. Asked again when the run's
        // spans change state (never in a loop).
        next.views ??= [];
      })
      .finally(() => {
        next.inFlight = false;
        this.changed();
      });
  }
}
