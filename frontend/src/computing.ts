/**
 * Progressive answers: on a big trace the server answers 409 `{"state": "computing", "analysis", "progress",
 * "retry_after_ms"}` while the analysis behind an answer is computed in the background (docs/api/openapi.yaml,
 * `Pending`). api.ts asks again until the answer is ready and tells the listeners here how far it is, so the page
 * that waits says "Computing operators… 42 %" instead of an error: the shell's line above every page
 * (`computingStatus`), loadView's loading line, and the Trace view's own indicator.
 */
import { h, replaceChildren } from "./dom";


/** One "computing" answer of the server. */
export interface Computing {
  analysis: string;
  /** 0..1, an estimate; null when the server has none */
  progress: number | null;
  retryAfterMs: number;
}

/** The "computing" answer in a 409 body, or null for any other 409 (a span still loading). */
export function computingOf(body: unknown): Computing | null {
  if (typeof body !== "object" || body === null) return null;
  const b = body as Record<string, unknown>;
  if (b["state"] !== "computing" || typeof b["analysis"] !== "string") return null;
  const progress = typeof b["progress"] === "number" && Number.isFinite(b["progress"]) ? Math.min(1, Math.max(0, b["progress"])) : null;
  const retry = typeof b["retry_after_ms"] === "number" && Number.isFinite(b["retry_after_ms"]) ? b["retry_after_ms"] : 500;
  return { analysis: b["analysis"], progress, retryAfterMs: retry };
}

/**
 * The pause before asking again: the server's hint, growing by a quarter with every attempt, within 0.2 and 2 s.
 * Short, since each request waits up to a second for the answer on the server (a long poll): the pause is the
 * most an answer waits to be picked up.
 */
export function retryDelayMs(attempt: number, retryAfterMs: number): number {
  const base = Math.max(200, retryAfterMs);
  return Math.min(2000, Math.round(base * 1.25 ** Math.max(0, attempt)));
}

/** "Computing operators… 42 %" (no percentage when the server has no estimate). */
export function computingLine(c: Computing): string {
  const pct = c.progress === null ? "" : ` ${Math.floor(c.progress * 100)} %`;
  return `Computing ${c.analysis}…${pct}`;
}

/** Told each "computing" answer of a route, then `null` once that request is over (answered, failed or left). */
export type ComputingListener = (route: string, computing: Computing | null) => void;

const listeners = new Set<ComputingListener>();

/** Be told of every "computing" answer (route and progress) until the returned function is called. */
export function onComputing(listener: ComputingListener): () => void {
  listeners.add(listener);
  return () => {
    listeners.delete(listener);
  };
}

/** Tell the listeners (api.ts calls this for each "computing" answer before it waits and asks again, and with
 * `null` when that request is over). */
export function announceComputing(route: string, computing: Computing | null): void {
  for (const listener of [...listeners]) listener(route, computing);
}

/**
 * The shell's line of what the server is computing for the page now ("Computing operators… 42 %", one per route;
 * hidden when nothing is). The Trace view's windows are left to the Trace view's own indicator.
 */
export function computingStatus(): HTMLElement {
  const el = h("div", { class: "ptp-computing ptp-muted", testid: "computing", attrs: { "aria-live": "polite" } });
  el.hidden = true;
  const pending = new Map<string, Computing>();
  onComputing((route, computing) => {
    if (route === "trace/window") return;
    if (computing) pending.set(route, computing);
    else pending.delete(route);
    replaceChildren(el, ...[...pending.values()].map((c) => h("div", {}, h("span", { class: "ptp-spinner", attrs: { "aria-hidden": "true" } }), computingLine(c))));
    el.hidden = pending.size === 0;
  });
  return el;
}
