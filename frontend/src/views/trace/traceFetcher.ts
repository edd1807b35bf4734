/**
 * The Trace view's window fetcher: which `./trace/window` to ask for (the visible range with a margin on each
 * side, at the plot's resolution), whether the window in hand still covers the view, and one request at a time
 * with a stale-answer guard: asking again aborts the request in flight, and an answer that arrives after a newer
 * request was made is dropped, so a slow answer for an old range never replaces a newer one. Requests are
 * debounced (a wheel zoom asks once, not 60 times a second) but never held back more than FETCH_MAX_WAIT_MS.
 * DOM-free: frontend/test/traceFetcher.test.ts checks it.
 */
import { computingLine, onComputing } from "../../computing";
import type { Answer, SpanExtra } from "../../types";
import type { WindowData } from "./traceData";
import { plotWidth, type ViewRange } from "./traceViewport";

export const FETCH_DEBOUNCE_MS = 100;
export const FETCH_MAX_WAIT_MS = 300;
/** a window reaches this share of the visible span beyond each side, so a small pan needs no new request */
export const FETCH_MARGIN = 0.5;
export const MAX_WIDTH_PX = 8192;
/** an answer slower than this shows the loading indicator (quick ones do not flicker) */
export const SPINNER_DELAY_MS = 150;

export type WindowQuery = SpanExtra<"trace/window">;

/** What decides a window: the view, the trace's bounds, the plot's width and the lanes and category asked for. */
export interface WindowRequest {
  view: ViewRange | null;
  bounds: readonly [number, number] | null;
  plotW: number;
  levelsKey: string;
  skipKey: string;
  /** the first window of the page: the tracks are not known yet, so only the host's first levels are asked */
  first: boolean;
  hostLevels: number;
  category: string | null;
}

/** The query of the window to fetch for `r`: the view ± FETCH_MARGIN (within the trace), one column a pixel. */
export function windowQuery(r: WindowRequest): WindowQuery {
  const q: WindowQuery = {};
  let widthPx = r.plotW;
  const v = r.view;
  if (v) {
    const span = v.end - v.start;
    let s = v.start - span * FETCH_MARGIN;
    let e = v.end + span * FETCH_MARGIN;
    if (r.bounds) {
      s = Math.max(s, Math.min(v.start, r.bounds[0]));
      e = Math.min(e, Math.max(v.end, r.bounds[1]));
    }
    widthPx = Math.round((r.plotW * (e - s)) / span);
    if (widthPx > MAX_WIDTH_PX) {
      const extra = ((MAX_WIDTH_PX / r.plotW) * span - span) / 2;
      s = v.start - extra;
      e = v.end + extra;
      widthPx = MAX_WIDTH_PX;
    }
    q.start_us = Number(s.toFixed(3));
    q.end_us = Number(e.toFixed(3));
  }
  q.width_px = Math.max(1, Math.min(MAX_WIDTH_PX, widthPx));
  if (r.levelsKey) q.levels = r.levelsKey;
  if (r.skipKey) q.skip = r.skipKey;
  if (r.first) q.host_levels = r.hostLevels;
  if (r.category !== null) q.category = r.category as NonNullable<WindowQuery["category"]>;
  return q;
}

/**
 * Whether the window in hand still serves the view: the same lanes and category, the visible part of the trace
 * inside it, and its resolution within -15 %..+18 % of the plot's (else a zoom would show coarse or too fine boxes).
 */
export function covers(data: WindowData, v: ViewRange, axis: { width: number; labelW: number }, lanesKey: string,
  category: string | null): boolean {
  if (data.levelsKey !== lanesKey || data.category !== category) return false;
  const span = v.end - v.start;
  const lo = Math.max(v.start, data.bounds[0]);
  const hi = Math.min(v.end, data.bounds[1]);
  const eps = span * 1e-6;
  if (hi > lo && (data.t0 > lo + eps || data.t1 < hi - eps)) return false;
  const ratio = data.pxUs / (span / plotWidth(axis));
  return ratio > 0.85 && ratio < 1.18;
}

/** What the fetcher needs of the page: the request, where to say it is loading, and where the answer goes. */
export interface FetchHooks {
  get(query: WindowQuery, signal: AbortSignal): Promise<Answer<"trace/window">>;
  /** aborted when the user leaves the page */
  leave: AbortSignal;
  /** the indicator: show it (with `text`, else as it is), or hide it (null) */
  loading(text?: string | null): void;
  answer(resp: Answer<"trace/window">, query: WindowQuery, elapsedMs: number): void;
  failed(err: unknown): void;
}

export class WindowFetcher {
  private current: AbortController | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private firstAsked = 0;
  fetches = 0;

  constructor(private readonly hooks: FetchHooks) {}

  /** A request is in flight. */
  get busy(): boolean {
    return this.current !== null;
  }

  /** A request is asked for and waits for its debounce (it goes out when the timer fires). */
  get scheduled(): boolean {
    return this.timer !== null;
  }

  /** Run `ask` once the asking settles: FETCH_DEBOUNCE_MS after the last call, at most FETCH_MAX_WAIT_MS after the first. */
  schedule(ask: () => void, now = performance.now()): void {
    if (this.timer === null) this.firstAsked = now;
    else clearTimeout(this.timer);
    const wait = now - this.firstAsked >= FETCH_MAX_WAIT_MS ? 0 : FETCH_DEBOUNCE_MS;
    this.timer = setTimeout(() => {
      this.timer = null;
      ask();
    }, wait);
  }

  /** Ask for `query`, dropping the request in flight; only the newest request's answer reaches the page. */
  fetch(query: WindowQuery): void {
    this.current?.abort();
    const controller = new AbortController();
    this.current = controller;
    const newest = (): boolean => this.current === controller;
    const onLeave = (): void => { controller.abort(); };
    this.hooks.leave.addEventListener("abort", onLeave, { once: true });
    this.fetches++;
    const started = performance.now();
    const spinner = setTimeout(() => { if (newest()) this.hooks.loading(); }, SPINNER_DELAY_MS);
    // a big trace's index may still be computing (409 "computing", asked again by api.ts): say how far it is
    const stopComputing = onComputing((route, computing) => {
      if (route === "trace/window" && computing && newest()) this.hooks.loading(computingLine(computing));
    });
    this.hooks
      .get(query, controller.signal)
      .then((resp) => {
        if (newest()) this.hooks.answer(resp, query, performance.now() - started);
      })
      .catch((err: unknown) => {
        if (!controller.signal.aborted && !this.hooks.leave.aborted && newest()) this.hooks.failed(err);
      })
      .finally(() => {
        clearTimeout(spinner);
        stopComputing();
        this.hooks.leave.removeEventListener("abort", onLeave);
        if (newest()) {
          this.current = null;
          this.hooks.loading(null);
        }
      });
  }

  /** Stop: the request in flight and any scheduled one (the page is left). */
  stop(): void {
    this.current?.abort();
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }
}
