/**
 * Links from a number or a row to its evidence in another view. "Find in trace" links: from an Operator or Kernel row to its occurrences in the Trace view, which reads the
 * `q` URL key as its initial search (and steps through the hits with next/previous); the name is quoted, an exact search.
 */
import { h } from "../../dom";
import { type ViewUrlKey, writeViewUrlState } from "../../urlState";
import { exactQuery } from "./traceQuery";
import type { ViewContext } from "../types";

export type TraceLinker = (name: string) => HTMLElement;

export function traceLinker(ctx: ViewContext): TraceLinker {
  return (name) =>
    h(
      "button",
      {
        class: "ptp-link-button ptp-trace-link",
        testid: "find-in-trace",
        // The label is drawn by CSS (::after), so the cell's text stays the name alone (search, copy, tests).
        attrs: { type: "button", title: `Show the occurrences of ${name} in the Trace view`,
                 "aria-label": `Find ${name} in the Trace view` },
        onClick: (ev: Event) => {
          ev.stopPropagation();
          // quoted: the exact name, so that Linear_1's link does not also step through Linear_10's calls
          writeViewUrlState({ q: exactQuery(name), start: undefined, end: undefined });
          ctx.navigate("Trace");
        },
      },
    );
}

/**
 * A link from a number to where it comes from: opens the Trace view on [start, end] (absolute µs, a little
 * margin around) with `q` as its search (e.g. the kernel's name, so the event is highlighted and selectable).
 */
export function traceRangeLink(ctx: ViewContext, label: string, start: number, end: number, q?: string): HTMLElement {
  const margin = Math.max((end - start) * 0.1, 1);
  return h(
    "button",
    {
      class: "ptp-link-button",
      testid: "trace-range-link",
      dataset: { start: String(start), end: String(end) },
      attrs: { type: "button", title: `Show ${start.toFixed(1)}–${end.toFixed(1)} µs in the Trace view` },
      onClick: (ev: Event) => {
        ev.stopPropagation();
        writeViewUrlState({ start: (start - margin).toFixed(3), end: (end + margin).toFixed(3), q });
        ctx.navigate("Trace");
      },
    },
    label,
  );
}

/**
 * A link to another view with view-owned URL keys set (see urlState's VIEW_URL_KEYS), optionally on another
 * worker (a rank's own trace): e.g. an operator row to the Kernel view with `op` set.
 */
export function viewLink(
  ctx: ViewContext,
  opts: { label: string; title: string; testid: string; view: string; state: Partial<Record<ViewUrlKey, string | undefined>>; worker?: string },
): HTMLElement {
  return rowLinkButton({
    label: opts.label,
    title: opts.title,
    testid: opts.testid,
    onClick: () => {
      writeViewUrlState(opts.state);
      if (opts.worker !== undefined && opts.worker !== ctx.worker) ctx.navigate(opts.view, { worker: opts.worker });
      else ctx.navigate(opts.view);
    },
  });
}

/** A small link button after a row's name whose label is drawn by CSS (data-label), so that the cell's text stays
 * the name alone (search, copy, CSV, tests), as with "in trace". */
export function rowLinkButton(opts: { label: string; title: string; testid: string; onClick: () => void }): HTMLElement {
  return h("button", {
    class: "ptp-link-button ptp-row-link",
    testid: opts.testid,
    dataset: { label: opts.label },
    attrs: { type: "button", title: opts.title, "aria-label": opts.title },
    onClick: (ev: Event) => {
      ev.stopPropagation();
      opts.onClick();
    },
  });
}

/** Opens the Trace view on [start, end] µs (of `worker`'s trace when given), with a little margin around. */
export function traceWindowState(start: number, end: number, q?: string): Partial<Record<ViewUrlKey, string | undefined>> {
  const margin = Math.max((end - start) * 0.02, 1);
  return { start: (start - margin).toFixed(3), end: (end + margin).toFixed(3), q };
}
