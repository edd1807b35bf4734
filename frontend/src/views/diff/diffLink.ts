/**
 * The experiment a Diff link names (`exp_run` / `exp_worker` / `exp_span` in the URL), checked against the runs
 * listed: what is missing is filled in the way a person would expect (the baseline's worker name, the first span
 * that is not the baseline) and said in a note, and what does not exist is said instead of silently comparing
 * another trace. DOM-free: tested under Node (frontend/test/diffLink.test.ts).
 */
import type { RunInfo } from "../../types";
import type { ViewUrlState } from "../../urlState";
import { describeTarget, type Target } from "./diffTypes";

export interface LinkedExperiment {
  /** the trace to compare with; null when the link names one that is not there */
  target: Target | null;
  /** what the page says about it (null: the link named it exactly) */
  note: string | null;
}

/** The experiment of a link, or null when the URL names none (the page then picks one itself). */
export function linkedExperiment(runs: readonly RunInfo[], base: Target, url: ViewUrlState): LinkedExperiment | null {
  if (!url.exp_run && !url.exp_worker && !url.exp_span) return null;
  const runName = url.exp_run ?? base.run;
  const run = runs.find((r) => r.name === runName);
  if (!run) return { target: null, note: `The link's experiment run "${runName}" is not in the log directory` };
  const worker = url.exp_worker
    ? run.workers.find((w) => w.name === url.exp_worker)
    : (run.workers.find((w) => w.name === base.worker) ?? run.workers[0]);
  if (!worker) return { target: null, note: `The link's experiment run "${run.name}" has no worker "${url.exp_worker ?? ""}"` };
  const isBase = (span: string): boolean => run.name === base.run && worker.name === base.worker && span === base.span;
  const named = url.exp_span;
  const span = named ? worker.spans.find((s) => s.span === named || s.key === named) : (worker.spans.find((s) => !isBase(s.span)) ?? worker.spans[0]);
  if (!span) {
    return { target: null, note: `The link's experiment ${run.name} · ${worker.name} has no span "${named ?? ""}" (it has ${worker.spans.length})` };
  }
  const target = { run: run.name, worker: worker.name, span: span.span };
  const missing = [url.exp_run ? null : "run", url.exp_worker ? null : "worker", named ? null : "span"].filter((m) => m !== null);
  if (missing.length === 0) return { target, note: null };
  const of = worker.spans.length > 1 ? `, span ${span.span} of the ${worker.spans.length} this worker has` : "";
  return { target, note: `The link does not name the experiment's ${missing.join(" or ")}: comparing with ${describeTarget(target)}${of}.` };
}
