/**
 * The shell's view of `./runs` in page mode (a logdir of thousands of runs): the query it asks with, and the numbers
 * and lists it shows from an answer (what is loading or failed anywhere, how many runs there are). DOM-free, so it is
 * unit-tested under Node (frontend/test/runsPage.test.ts); an older server's answer (every run, no page fields)
 * gives the same results, computed from its runs.
 */
import type { RunInfo, RunsResponse, SpanInfo } from "./types";

/** Runs one poll asks for: the run picker lists them; the rest is found by searching. */
export const RUNS_PAGE = 200;

/** A span the shell tells of (a progress row or an error card), with where it is. */
export interface SpanAt {
  run: string;
  worker: string;
  span: SpanInfo;
}

/** The page-mode fields of an answer, normalised (null where the server sent none: an older server). */
export interface PageInfo {
  totalRuns: number;
  matched: number;
  newest: string | null;
  states: { queued: number; loading: number; ready: number; failed: number; updating: number } | null;
  attention: SpanAt[] | null;
}

/** The query of one poll: a page of runs matching `search`, with the run on screen (or wished) included. */
export function runsQuery(search: string, run: string | undefined): Record<string, string | number> {
  const query: Record<string, string | number> = { limit: RUNS_PAGE };
  if (search.trim() !== "") query["q"] = search.trim();
  if (run !== undefined && run !== "") query["run"] = run;
  return query;
}

const count = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0);

/** The page fields of a raw answer; `normalizeSpan` turns one raw span into a SpanInfo (or null if malformed). */
export function pageInfo(raw: Record<string, unknown>, runs: RunInfo[], normalizeSpan: (v: unknown) => SpanInfo | null): PageInfo {
  const states = typeof raw["states"] === "object" && raw["states"] !== null ? (raw["states"] as Record<string, unknown>) : null;
  const attention = Array.isArray(raw["attention"])
    ? (raw["attention"] as unknown[]).flatMap((a): SpanAt[] => {
        const rec = typeof a === "object" && a !== null ? (a as Record<string, unknown>) : null;
        const span = rec ? normalizeSpan(rec) : null;
        return rec && span && typeof rec["run"] === "string" && typeof rec["worker"] === "string"
          ? [{ run: rec["run"], worker: rec["worker"], span }]
          : [];
      })
    : null;
  return {
    totalRuns: typeof raw["total_runs"] === "number" ? count(raw["total_runs"]) : runs.length,
    matched: typeof raw["matched"] === "number" ? count(raw["matched"]) : runs.length,
    newest: typeof raw["newest"] === "string" ? raw["newest"] : null,
    states: states
      ? { queued: count(states["queued"]), loading: count(states["loading"]), ready: count(states["ready"]), failed: count(states["failed"]), updating: count(states["updating"]) }
      : null,
    attention,
  };
}

const isLoading = (s: SpanInfo): boolean => s.state === "queued" || s.state === "loading";

/** Every span of the listed runs, with where it is. */
function spansOf(runs: readonly RunInfo[]): SpanAt[] {
  return runs.flatMap((run) => run.workers.flatMap((worker) => worker.spans.map((span) => ({ run: run.name, worker: worker.name, span }))));
}

/**
 * The spans the shell tells of: loading ones (being parsed first, then queued) and failed ones, and how many of each
 * there are in all (a page's `attention` lists some of them; its `states` counts them all).
 */
export function attentionOf(resp: RunsResponse, page: PageInfo | null, extra: SpanAt[] = []): {
  loading: SpanAt[];
  failed: SpanAt[];
  loadingTotal: number;
  failedTotal: number;
} {
  // a page's `attention` and `states` are of trace spans only: `extra` (the listed runs' allocator snapshots, which
  // the shell shows as spans) is added to them; a whole listing holds them already
  const paged = page?.attention != null;
  const spans = paged ? [...(page.attention ?? []), ...extra] : spansOf(resp.runs);
  const loading = spans.filter((s) => isLoading(s.span));
  loading.sort((a, b) => Number(a.span.state === "queued") - Number(b.span.state === "queued"));
  const failed = spans.filter((s) => s.span.state === "failed");
  const states = paged ? page.states : null;
  const extraLoading = extra.filter((s) => isLoading(s.span)).length;
  const extraFailed = extra.filter((s) => s.span.state === "failed").length;
  return {
    loading,
    failed,
    loadingTotal: states ? Math.max(loading.length, states.queued + states.loading + extraLoading) : loading.length,
    failedTotal: states ? Math.max(failed.length, states.failed + extraFailed) : failed.length,
  };
}

/** Whether anything is still loading (the shell polls faster then): in any run, not only the listed ones. */
export function busyOf(resp: RunsResponse, page: PageInfo | null): boolean {
  if (resp.scanning) return true;
  if (page?.states) return page.states.queued + page.states.loading + page.states.updating > 0;
  return spansOf(resp.runs).some((s) => isLoading(s.span) || s.span.updating);
}

/** The status line's run count: every run of the logdir, and how many match a search. */
export function runCountText(page: PageInfo | null, listed: number, search: string): string {
  const total = page?.totalRuns ?? listed;
  const runs = `${total.toLocaleString("en-US")} run${total === 1 ? "" : "s"}`;
  if (search.trim() === "" || page === null) return runs;
  return `${page.matched.toLocaleString("en-US")} of ${runs} match`;
}

/** Whether the run picker needs its search box: the logdir holds more runs than one page lists. */
export function needsSearch(page: PageInfo | null, search: string): boolean {
  return page !== null && (page.totalRuns > RUNS_PAGE || search.trim() !== "");
}

/** The note under the listed runs when the page cut some off ("… 4,800 more: type to search"), or null. */
export function moreRunsText(page: PageInfo | null, listed: number): string | null {
  if (page === null || page.matched <= listed) return null;
  return `… ${(page.matched - listed).toLocaleString("en-US")} more: type to search`;
}
