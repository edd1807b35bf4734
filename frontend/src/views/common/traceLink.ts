/**
 * "Find in trace" links: from an Operator or Kernel row to its occurrences in the Trace view, which reads the
 * `q` URL key as its initial search (and steps through the hits with next/previous).
 */
import { h } from "../../dom";
import { writeViewUrlState } from "../../urlState";
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
          writeViewUrlState({ q: name, start: undefined, end: undefined });
          ctx.navigate("Trace");
        },
      },
    );
}
