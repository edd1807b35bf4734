/**
 * What the shell tells of the logdir beside the page: the status (offline, scanning, how many runs), a banner
 * while the server cannot be reached or reports an error, and the files that need attention: progress rows for
 * the files loading, an error card for each that failed (not the one on screen: its error is the page), and the
 * catalog's logdir-level errors. Long lists are folded, so hundreds of files do not push the page away.
 */
import { errorCard, fileErrorCard, progressRow, unreachableCard } from "../components";
import { h, replaceChildren } from "../dom";
import { attentionOf, runCountText, type PageInfo, type SpanAt } from "../runsPage";
import type { RunsResponse, SpanInfo } from "../types";
import { type Connection, isSnapshot, type Selection, where } from "./runs";

interface Listed {
  at: string;
  span: SpanInfo;
}

/** The spans loading and failed of a page of runs (a snapshot too), and the counts over every run. */
function attention(runs: RunsResponse | null, page: PageInfo | null, sel: Selection | null) {
  // a page's spans that need attention are the traces'; the listed runs' allocator snapshots are told of too
  const snapshots = (runs?.runs ?? []).flatMap((r) =>
    r.workers.filter((w) => isSnapshot(r, w)).flatMap((w) => w.spans.map((span) => ({ run: r.name, worker: w.name, span }))),
  );
  const all = runs ? attentionOf(runs, page, snapshots) : { loading: [], failed: [], loadingTotal: 0, failedTotal: 0 };
  const isShown = (s: SpanAt): boolean =>
    sel !== null && s.run === sel.run.name && s.worker === sel.worker.name && s.span.span === sel.span.span;
  const listed = (s: SpanAt): Listed => ({ at: where(s.run, s.worker, s.span.span), span: s.span });
  const failedSpans = all.failed.filter((s) => !isShown(s));
  return {
    loading: all.loading.map(listed),
    failed: failedSpans.map(listed),
    // a page lists some of them: the counts are of every span (the one on screen is not told of twice)
    loadingTotal: all.loadingTotal,
    failedTotal: all.failedTotal - (all.failed.length - failedSpans.length),
  };
}

export class Notices {
  readonly status = h("div", { class: "ptp-status", testid: "status", attrs: { "aria-live": "polite" } });
  readonly banner = h("div", { class: "ptp-banner", testid: "banner" });
  readonly files = h("div", { class: "ptp-files ptp-stack", testid: "files" });
  private filesSignature = "";

  constructor(private readonly retrySeconds: number) {}

  renderStatus(runs: RunsResponse | null, c: Connection, page: PageInfo | null, search: string): void {
    const status = this.status;
    const logdir = runs?.logdir ?? "";
    status.title = logdir ? `logdir: ${logdir}` : "";
    if (c.state === "unreachable") replaceChildren(status, "offline");
    else if (runs?.scanning) replaceChildren(status, h("span", { class: "ptp-spinner", attrs: { "aria-hidden": "true" } }), "scanning logdir…");
    else if (runs) replaceChildren(status, runCountText(page, runs.runs.length, search));
    else replaceChildren(status);
  }

  renderBanner(runs: RunsResponse | null, c: Connection): void {
    if (c.state === "unreachable" && runs) replaceChildren(this.banner, unreachableCard(c.message, this.retrySeconds));
    else if (c.state === "error" && runs) replaceChildren(this.banner, errorCard("The profiler plugin reported an error", c.message, "server-error"));
    else replaceChildren(this.banner);
  }

  renderFiles(runs: RunsResponse | null, page: PageInfo | null, sel: Selection | null): void {
    const { loading, failed, loadingTotal, failedTotal } = attention(runs, page, sel);
    const logdirErrors = (runs?.errors ?? []).filter((e): e is string => typeof e === "string" && e !== "");
    const signature = JSON.stringify([
      loading.map(({ at, span }) => [at, span.file, span.state, Math.round(span.progress * 100)]),
      failed.map(({ at, span }) => [at, span.file, span.error]),
      loadingTotal,
      failedTotal,
      logdirErrors,
    ]);
    if (signature === this.filesSignature) return;
    this.filesSignature = signature;
    const fold = this.folder();
    const loadingRows = loading.map(({ at, span }) => progressRow(at, span));
    const failedCards = failed.map(({ at, span }) => fileErrorCard(at, span));
    replaceChildren(
      this.files,
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

  /** Folds a list past its first `shown` items ("N more …"), kept open if the user had opened it. */
  private folder(): (id: string, shown: number, items: HTMLElement[], noun: string, total: number) => (HTMLElement | null)[] {
    const wasOpen = new Set(
      Array.from(this.files.querySelectorAll<HTMLDetailsElement>("details[data-fold]")).filter((d) => d.open).map((d) => d.dataset["fold"]),
    );
    return (id, shown, items, noun, total) => {
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
  }
}
