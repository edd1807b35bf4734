/**
 * The Trace view's side panel: the selected event (times, args, launch partners, operator, call
 * stack) and the aggregated table of a box-selected time range. Text from the trace is always set
 * as text (h()).
 */
import { h, replaceChildren } from "../../dom";
import { frameList, parseFrame } from "../common/callStack";
import { formatTime } from "../../format";
import { formatOffset } from "./traceData";
import type { EventBrief, TraceEventResponse, TraceRangeResponse } from "./traceTypes";

export interface DetailsHooks {
  /** trace start (absolute µs): times are shown relative to it */
  traceStart: number;
  trackLabel(id: number | null): string;
  /** select an event and bring it into view */
  reveal(brief: EventBrief): void;
  zoomToSelected(): void;
}

function fmtInt(n: number): string {
  return new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 }).format(n);
}

function argValue(v: unknown): string {
  if (v === null || v === undefined) return "—";
  if (typeof v === "number") {
    if (!Number.isFinite(v)) return "—";
    return Number.isInteger(v) ? String(v) : new Intl.NumberFormat("en-US", { maximumFractionDigits: 6, useGrouping: false }).format(v);
  }
  if (typeof v === "string") return v;
  if (typeof v === "boolean") return v ? "true" : "false";
  try {
    return JSON.stringify(v);
  } catch {
    return "—";
  }
}

function briefButton(b: EventBrief, hooks: DetailsHooks, testid: string): HTMLElement {
  return h(
    "button",
    {
      class: "ptp-trace-partner",
      testid,
      title: `${b.name}\n${hooks.trackLabel(b.track)} · ${formatOffset(b.start_us - hooks.traceStart)} · ${formatTime(b.dur_us)}`,
      dataset: { id: String(b.id) },
      attrs: { type: "button" },
      onClick: () => {
        hooks.reveal(b);
      },
    },
    h("span", { class: "ptp-trace-partner-name" }, b.name),
    h("span", { class: "ptp-trace-partner-meta" }, `${formatTime(b.dur_us)} · ${hooks.trackLabel(b.track)}`),
  );
}

function section(title: string, testid: string, ...children: (Node | null)[]): HTMLElement {
  return h("div", { class: "ptp-trace-section", testid }, h("h4", { class: "ptp-section-title" }, title), ...children);
}

const HELP_KEY = "ptp.trace.help";

/** Whether the keyboard help is shown (remembered in localStorage; open where storage is blocked). */
export function helpOpen(): boolean {
  try {
    return window.localStorage.getItem(HELP_KEY) !== "closed";
  } catch {
    return true;
  }
}

export function rememberHelp(open: boolean): void {
  try {
    if (open) window.localStorage.removeItem(HELP_KEY);
    else window.localStorage.setItem(HELP_KEY, "closed");
  } catch {
    // storage blocked (a sandboxed frame): the choice lasts for this page only
  }
}

/** The keys and mouse of the timeline, with a close button (reopened by the toolbar's "?"). */
export function hintPanel(onClose: () => void): HTMLElement {
  return h(
    "div",
    { class: "ptp-trace-hint", testid: "trace-details-empty" },
    h(
      "div",
      { class: "ptp-trace-title-row" },
      h("p", { class: "ptp-muted" }, "Click an event to see its details, launch partners and call stack."),
      h("button", { class: "ptp-link-button", testid: "trace-help-close", title: "Hide this help (the ? button in the toolbar shows it again)",
                    attrs: { type: "button", "aria-label": "Hide the keyboard help" }, onClick: onClose }, "✕"),
    ),
    h(
      "dl",
      { class: "ptp-trace-keys" },
      [
        ["W / S", "zoom in / out"],
        ["A / D", "pan left / right"],
        ["wheel", "scroll the tracks"],
        ["ctrl / ⌘ + wheel, pinch", "zoom around the cursor"],
        ["shift + wheel", "pan"],
        ["drag", "pan (and scroll the tracks)"],
        ["shift + drag", "select a time range"],
        ["double-click", "zoom to an event"],
        ["F", "zoom to the selected event"],
        ["Esc", "clear the selection"],
      ].map(([k, v]) => [h("dt", {}, h("kbd", {}, k ?? "")), h("dd", {}, v ?? "")]),
    ),
  );
}

export function loadingPanel(name: string): HTMLElement {
  return h(
    "div",
    { testid: "trace-details-loading" },
    h("h3", { class: "ptp-trace-title ptp-break" }, name),
    h("p", { class: "ptp-muted" }, "Loading details…"),
  );
}

export function errorPanel(message: string): HTMLElement {
  return h("div", { class: "ptp-trace-error", testid: "trace-details-error" }, h("p", { class: "ptp-break" }, message));
}

/** The event's name: long (templated kernel) names are cut to four lines; a click shows them whole. */
function clampedTitle(name: string): HTMLElement {
  const long = name.length > 120;
  const el = h("h3", { class: ["ptp-trace-title", "ptp-break", long && "ptp-trace-title-clamp"], testid: "trace-details-name", title: long ? "Click to show the whole name" : undefined }, name);
  if (long) {
    el.addEventListener("click", () => {
      el.classList.toggle("ptp-trace-title-open");
    });
  }
  return el;
}

export function detailsPanel(ev: TraceEventResponse, hooks: DetailsHooks): HTMLElement {
  const facts: [string, string][] = [
    ["Start", formatOffset(ev.start_us - hooks.traceStart)],
    ["Duration", formatTime(ev.dur_us)],
    ["End", formatOffset(ev.start_us + ev.dur_us - hooks.traceStart)],
    ["Category", ev.category ?? "—"],
    ["Kind", ev.kind],
    ["Track", hooks.trackLabel(ev.track)],
    ["pid / tid", `${ev.pid} / ${ev.tid}`],
  ];
  const args = Object.entries(ev.args);
  const launched = Array.isArray(ev.launched) ? ev.launched : [];
  const stack = Array.isArray(ev.call_stack) ? ev.call_stack : [];
  const root = h(
    "div",
    { testid: "trace-details" },
    h(
      "div",
      { class: "ptp-trace-title-row" },
      clampedTitle(ev.full_name ?? ev.name), // the whole name where every other view shows it shortened
      h(
        "button",
        { class: "ptp-button ptp-button-small", testid: "trace-zoom-event", attrs: { type: "button" }, title: "Zoom to this event (F)", onClick: () => { hooks.zoomToSelected(); } },
        "Zoom",
      ),
    ),
    h("dl", { class: "ptp-dl ptp-trace-facts", testid: "trace-details-facts" }, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    ev.launched_by
      ? section("Launched by", "trace-launched-by", briefButton(ev.launched_by, hooks, "trace-launched-by-link"))
      : null,
    ev.operator ? section("Operator", "trace-operator", briefButton(ev.operator, hooks, "trace-operator-link")) : null,
    launched.length
      ? section(
          launched.length === 1 ? "Launched kernel" : `Launched GPU events (${launched.length})`,
          "trace-launched",
          h("div", { class: "ptp-trace-partners" }, launched.map((b) => briefButton(b, hooks, "trace-launched-link"))),
        )
      : null,
    args.length
      ? section(
          "Arguments",
          "trace-args",
          h(
            "table",
            { class: "ptp-table ptp-trace-args" },
            h("tbody", {}, args.map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", { class: "ptp-break" }, argValue(v))))),
          ),
        )
      : null,
    stack.length ? section("Call stack", "trace-call-stack", frameList(stack.map(parseFrame), 12)) : null,
  );
  root.dataset["id"] = String(ev.id);
  return root;
}

export interface RangeHooks {
  traceStart: number;
  zoom(): void;
  clear(): void;
  search(name: string): void;
  /** "all tracks" or "2 tracks" */
  scope: string;
}

export function rangeLoading(start: number, end: number, hooks: RangeHooks): HTMLElement {
  return h(
    "div",
    { testid: "trace-range-loading" },
    rangeHeader(start, end, hooks),
    h("p", { class: "ptp-muted" }, "Summing the events in this range…"),
  );
}

function rangeHeader(start: number, end: number, hooks: RangeHooks): HTMLElement {
  return h(
    "div",
    { class: "ptp-trace-title-row" },
    h(
      "div",
      {},
      h("h3", { class: "ptp-trace-title" }, `Selected range · ${formatTime(end - start)}`),
      h("div", { class: "ptp-muted ptp-trace-sub" }, `${formatOffset(start - hooks.traceStart)} to ${formatOffset(end - hooks.traceStart)} · ${hooks.scope}`),
    ),
    h(
      "div",
      { class: "ptp-trace-actions" },
      h("button", { class: "ptp-button ptp-button-small", testid: "trace-range-zoom", attrs: { type: "button" }, onClick: () => { hooks.zoom(); } }, "Zoom"),
      h("button", { class: "ptp-button ptp-button-small", testid: "trace-range-clear", attrs: { type: "button" }, onClick: () => { hooks.clear(); } }, "Clear"),
    ),
  );
}

export function rangePanel(resp: TraceRangeResponse, hooks: RangeHooks): HTMLElement {
  const rows = Array.isArray(resp.rows) ? resp.rows : [];
  const table = h(
    "table",
    { class: "ptp-table ptp-trace-range-table", testid: "trace-range-table" },
    h(
      "thead",
      {},
      h("tr", {}, h("th", {}, "Name"), h("th", { class: "ptp-num" }, "Count"), h("th", { class: "ptp-num" }, "Total"), h("th", { class: "ptp-num" }, "Self")),
    ),
    h(
      "tbody",
      {},
      rows.map((r) => {
        const tr = h(
          "tr",
          { testid: "trace-range-row" },
          h(
            "td",
            { class: "ptp-trace-range-name" },
            h(
              "button",
              {
                class: "ptp-trace-name-button",
                title: `${r.name}\nSearch the trace for this name`,
                attrs: { type: "button" },
                onClick: () => {
                  hooks.search(r.name);
                },
              },
              r.name,
            ),
          ),
          h("td", { class: "ptp-num" }, fmtInt(r.count)),
          h("td", { class: "ptp-num" }, formatTime(r.total_us)),
          h("td", { class: "ptp-num" }, formatTime(r.self_us)),
        );
        tr.dataset["name"] = r.name;
        tr.dataset["count"] = String(r.count);
        return tr;
      }),
    ),
  );
  return h(
    "div",
    { testid: "trace-range" },
    rangeHeader(resp.start_us, resp.end_us, hooks),
    h(
      "p",
      { class: "ptp-muted ptp-trace-sub", testid: "trace-range-summary" },
      `${fmtInt(resp.events)} events in ${fmtInt(resp.groups)} names` + (rows.length < resp.groups ? ` (largest ${rows.length} shown)` : ""),
    ),
    rows.length ? h("div", { class: "ptp-table-wrap" }, table) : h("p", { class: "ptp-muted" }, "No events in this range."),
  );
}

export function setPanel(el: HTMLElement, child: HTMLElement | null): void {
  if (child) replaceChildren(el, child);
  else replaceChildren(el);
  el.hidden = child === null;
}
