/**
 * What the Memory page adds to an allocation: whether it was allocated in the selected range or only live in it,
 * the summary of the allocations live at an instant (the peak: GET ./memory/events?at_us=), and the Python call stack of the
 * operator that allocated it (the code to change to allocate less).
 */
import { h } from "../../dom";
import { formatBytes, formatInt } from "../../format";
import { frameList, parseStack } from "../common/callStack";
import type { Column } from "../common/table";
import type { MemoryEvent } from "./memoryData";

export const LIVE_HELP = {
  inRange:
    "\"allocated in range\": allocated inside the selected range (it may be freed in it too); \"live in range\": allocated before the range and still held during it (freed in it or later).",
  live: "Allocations held at that instant: allocated at or before it and not yet freed. What they do not add up to was allocated before the trace started (weights, optimizer state), which the trace does not itemise.",
};

/** The allocations live at an instant, over every page: how many, their bytes, and the device's total allocated
 * then (null when the trace has none). */
export interface LiveTotals {
  count: number;
  bytes: number;
  allocatedBytes: number | null;
}

/** "101 allocations live at 12.3 ms hold 416.8 MiB of the 674.2 MiB allocated; 257.4 MiB was allocated before the trace." */
export function liveSummary(live: LiveTotals, when: string): string {
  const head = `${formatInt(live.count)} allocation${live.count === 1 ? "" : "s"} live at ${when} hold ${formatBytes(live.bytes)}`;
  if (live.allocatedBytes === null) return `${head}.`;
  const rest = live.allocatedBytes - live.bytes;
  return `${head} of the ${formatBytes(live.allocatedBytes)} allocated${rest > 0 ? `; the other ${formatBytes(rest)} was allocated before the trace started` : ""}.`;
}

/** The "In range" column: allocated in the range, or allocated before it and live in it. */
export function inRangeColumn(): Column<MemoryEvent> {
  const text = (e: MemoryEvent): string => (e.in_range === "live" ? "live in range" : "allocated in range");
  return {
    key: "in_range",
    label: "In range",
    help: LIVE_HELP.inRange,
    value: text,
    render: (e) => h("span", { class: e.in_range === "live" ? "ptp-tag ptp-tag-muted" : "ptp-tag", testid: "memory-in-range" }, text(e)),
    title: () => LIVE_HELP.inRange,
  };
}

/** Row expansion of the events table: the allocating operator's call stack, user frames first. */
export const stackExpand = {
  can: (e: MemoryEvent): boolean => typeof e.call_stack === "string" && e.call_stack !== "",
  render: (e: MemoryEvent): HTMLElement =>
    h("div", { class: "ptp-stacks", testid: "memory-call-stack" }, frameList(parseStack(e.call_stack ?? ""), 6)),
  label: "Show the call stack of the allocating operator",
};
