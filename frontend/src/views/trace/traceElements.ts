/**
 * The Trace view's elements: the canvas in its scroller, the overlays (tooltip, loading, errors, notices), the
 * side panels and the toolbar's controls, made once per page; TraceView wires them.
 */
import { h } from "../../dom";

/** Every element of a Trace page, by role (`trace-*` test ids). */
export function traceElements(fileUrl: string, file: string) {
  const el = {
    canvas: h("canvas", { class: "ptp-trace-canvas", testid: "trace-canvas" }),
    spacer: h("div", { class: "ptp-trace-spacer" }),
    scroller: h("div", {
      class: "ptp-trace-scroller",
      testid: "trace-scroller",
      attrs: { tabindex: 0, "aria-label": "Trace timeline: W/S zoom, A/D pan, wheel scrolls the tracks, Ctrl+wheel zooms, shift+wheel pans, drag pans, shift+drag selects a range" },
      role: "application",
    }),
    viewport: h("div", { class: "ptp-trace-viewport", testid: "trace-viewport" }),
    tooltip: h("div", { class: "ptp-trace-tooltip", testid: "trace-tooltip", attrs: { "aria-hidden": "true" } }),
    loading: h("div", { class: "ptp-trace-loading", testid: "trace-loading", attrs: { "aria-live": "polite" } },
               h("span", { class: "ptp-spinner", attrs: { "aria-hidden": "true" } }), h("span", { testid: "trace-loading-text" }, "Loading…")),
    error: h("div", { class: "ptp-trace-overlay-error", testid: "trace-window-error" }),
    notice: h("div", { class: "ptp-trace-notice", testid: "trace-notice", attrs: { "aria-live": "polite" } }),
    highlight: h("div", { class: "ptp-trace-highlight", testid: "trace-highlight", attrs: { "aria-live": "polite" } }),
    details: h("section", { class: "ptp-trace-panel", testid: "trace-details-panel" }),
    rangePanel: h("section", { class: "ptp-trace-panel", testid: "trace-range-panel" }),
    side: h("aside", { class: "ptp-trace-side", testid: "trace-side" }),
    body: h("div", { class: "ptp-trace-body" }),
    helpButton: h("button", { class: "ptp-button", testid: "trace-help-toggle", title: "Show or hide the keyboard and mouse help",
                              attrs: { type: "button", "aria-label": "Keyboard help", "aria-pressed": "false" } }, "?"),
    readout: h("span", { class: "ptp-trace-readout", testid: "trace-readout" }),
    stepSelect: h("select", { class: "ptp-trace-select", testid: "trace-step-select", attrs: { "aria-label": "Fit a step" } }),
    pathSelect: h("select", { class: "ptp-trace-select", testid: "trace-critical-path", attrs: { "aria-label": "Highlight critical path", title: "Highlight the critical path of a step: the chain of host and GPU work that determined its duration" } }),
    pathSummary: h("span", { class: "ptp-trace-readout", testid: "trace-critical-summary", attrs: { "aria-live": "polite" } }),
    searchInput: h("input", {
      class: "ptp-search ptp-trace-search",
      testid: "trace-search",
      attrs: { type: "search", placeholder: "Search events (\"name\" exact)", "aria-label": "Search events by name: text finds names containing it, \"text\" in quotes the exact name",
               title: "Names containing the text (any case); in double quotes, the exact name: \"nn.Module: Linear_1\" does not find Linear_10", spellcheck: "false" },
    }),
    searchCount: h("span", { class: "ptp-trace-count", testid: "trace-search-count", attrs: { "aria-live": "polite" } }),
    prevButton: h("button", { class: "ptp-button", testid: "trace-search-prev", title: "Previous match (Shift+Enter)", attrs: { type: "button", "aria-label": "Previous match" } }, "‹"),
    nextButton: h("button", { class: "ptp-button", testid: "trace-search-next", title: "Next match (Enter)", attrs: { type: "button", "aria-label": "Next match" } }, "›"),
    selectButton: h("button", { class: "ptp-button", testid: "trace-box-select", title: "Box select: drag to select a time range (or shift+drag in pan mode)", attrs: { type: "button", "aria-pressed": "false" } }, "Box select"),
    zoomSelection: h("button", { class: "ptp-button", testid: "trace-zoom-selection", title: "Zoom to the selected range", attrs: { type: "button", disabled: true } }, "Zoom to selection"),
    flowsToggle: h("input", { testid: "trace-all-flows", attrs: { type: "checkbox" } }),
    download: h("a", { class: "ptp-button", testid: "trace-download", attrs: { href: fileUrl, download: file, title: "Download the original trace file" } }, "Download trace"),
    perfetto: h("button", { class: "ptp-button", testid: "trace-perfetto", title: "Open this trace in ui.perfetto.dev (the file is sent from this browser, not uploaded)", attrs: { type: "button" } }, "Open in Perfetto"),
  };
  el.scroller.append(el.canvas, el.spacer);
  el.viewport.append(el.scroller, el.tooltip, el.loading, el.error);
  el.side.append(el.details, el.rangePanel);
  el.loading.hidden = true;
  el.error.hidden = true;
  el.notice.hidden = true;
  el.highlight.hidden = true;
  el.rangePanel.hidden = true;
  return el;
}

export type TraceElements = ReturnType<typeof traceElements>;

/** Fit, steps, zoom, box select, flows, critical path; search; download, Perfetto and the help toggle. */
export function toolbar(el: TraceElements, act: { fit(): void; zoom(factor: number): void }): HTMLElement {
  const button = (label: string, title: string, testid: string, onClick: () => void): HTMLElement =>
    h("button", { class: "ptp-button", testid, title, attrs: { type: "button" }, onClick }, label);
  return h(
    "div",
    { class: "ptp-trace-toolbar", testid: "trace-toolbar" },
    h(
      "div",
      { class: "ptp-trace-group" },
      button("Fit", "Show the whole trace", "trace-fit", () => { act.fit(); }),
      el.stepSelect,
      button("−", "Zoom out (S)", "trace-zoom-out", () => { act.zoom(1.6); }),
      button("+", "Zoom in (W)", "trace-zoom-in", () => { act.zoom(1 / 1.6); }),
      el.selectButton,
      el.zoomSelection,
      h("label", { class: "ptp-trace-check", title: "Draw every launch → GPU flow of the window (the selected event's flows are always drawn)" }, el.flowsToggle, "All flows"),
      el.pathSelect,
      el.pathSummary,
    ),
    h(
      "div",
      { class: "ptp-trace-group ptp-trace-search-group" },
      el.searchInput,
      el.searchCount,
      el.prevButton,
      el.nextButton,
    ),
    h("div", { class: "ptp-trace-group ptp-trace-export" }, el.download, el.perfetto, el.helpButton),
  );
}

