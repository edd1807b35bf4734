/**
 * The prologue every data page repeats: say what is loading, fetch what the page needs (in parallel), and
 * put an error card in the page's place when a fetch fails ("Still loading" for a 409, the server's sentence
 * otherwise). While the server computes an answer of a big trace (409 "computing", which api.ts asks again for),
 * the line says so: "Computing operators… 42 %". A page then renders from typed answers and never sees a
 * half-loaded state:
 *
 *   const data = await loadView(ctx, container, {
 *     idle: () => ctx.api.get("idle", { run: ctx.run, worker: ctx.worker, span: ctx.span }, { signal: ctx.signal }),
 *     launches: () => spanGet(ctx, "launch_stats"),
 *   }, { what: "the GPU insights" });
 *   if (!data) return undefined;
 */
import { computingLine, onComputing } from "../../computing";
import { h, replaceChildren } from "../../dom";
import { loadErrorCard } from "./ui";
import type { ViewContext } from "../types";

/** One request per answer the page needs, by the name the page reads it under. */
export type Fetches<T> = { [K in keyof T]: () => Promise<T[K]> };

export interface LoadViewOptions {
  /** what the page loads, for the error card's title: "Could not load the kernels" */
  what: string;
  /** the line shown while loading; default "Loading the kernels…" */
  loading?: string;
}

/**
 * Show the loading line in `container`, run every fetch, and return their answers by name; null when one
 * failed (its error card is shown instead) or the user left the page meanwhile (nothing is touched then).
 */
export async function loadView<T extends Record<string, unknown>>(
  ctx: Pick<ViewContext, "signal">,
  container: HTMLElement,
  fetches: Fetches<T>,
  options: LoadViewOptions,
): Promise<T | null> {
  const line = h("p", { class: "ptp-muted", testid: "view-loading", attrs: { "aria-live": "polite" } }, options.loading ?? `Loading ${options.what}…`);
  replaceChildren(container, line);
  const names = Object.keys(fetches) as (keyof T & string)[];
  const stop = onComputing((_route, computing) => {
    if (computing && !ctx.signal.aborted) line.textContent = computingLine(computing);
  });
  let values: unknown[];
  try {
    values = await Promise.all(names.map((name) => fetches[name]()));
  } catch (err) {
    if (!ctx.signal.aborted) replaceChildren(container, loadErrorCard(err, options.what));
    return null;
  } finally {
    stop();
  }
  if (ctx.signal.aborted) return null;
  return Object.fromEntries(names.map((name, i) => [name, values[i]])) as T;
}
