/**
 * Progressive answers: on a big trace the server answers 409 `{"state": "computing", "analysis", "progress",
 * "retry_after_ms"}` while the analysis behind an answer is computed in the background (docs/api/openapi.yaml,
 * `Pending`). api.ts asks again until the answer is ready and tells the listeners here how far it is, so the page
 * that waits (loadView's line, the Trace view's indicator) says "Computing operators… 42 %" instead of an error.
 */

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

/** The wait before asking again: the server's hint, growing by half with every attempt, within 0.2 and 5 s. */
export function retryDelayMs(attempt: number, retryAfterMs: number): number {
  const base = Math.max(200, retryAfterMs);
  return Math.min(5000, Math.round(base * 1.5 ** Math.max(0, attempt)));
}

/** "Computing operators… 42 %" (no percentage when the server has no estimate). */
export function computingLine(c: Computing): string {
  const pct = c.progress === null ? "" : ` ${Math.floor(c.progress * 100)} %`;
  return `Computing ${c.analysis}…${pct}`;
}

export type ComputingListener = (route: string, computing: Computing) => void;

const listeners = new Set<ComputingListener>();

/** Be told of every "computing" answer (route and progress) until the returned function is called. */
export function onComputing(listener: ComputingListener): () => void {
  listeners.add(listener);
  return () => {
    listeners.delete(listener);
  };
}

/** Tell the listeners (api.ts calls this for each "computing" answer before it waits and asks again). */
export function announceComputing(route: string, computing: Computing): void {
  for (const listener of [...listeners]) listener(route, computing);
}
