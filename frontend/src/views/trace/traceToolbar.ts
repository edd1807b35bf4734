/**
 * The Trace view's toolbar and its messages: the step picker (every step of the trace, each once), the critical
 * path picker, the select mode, "zoom to selection", all flows, the help toggle, the download and Perfetto exports
 * (with the notices that say how they went, and a link to copy where the page may not open windows), and the chip
 * of a highlighted step-breakdown category.
 */
import type { Api } from "../../api";
import { h, listen, replaceChildren } from "../../dom";
import { formatTime } from "../../format";
import type { SpanInfo } from "../../types";
import { writeViewUrlState } from "../../urlState";
import { type Category, CATEGORY_COLORS, highlightText } from "../common/stepCategories";
import { copyText, inVsCode, showToast } from "../common/ui";
import type { CriticalPath } from "./traceCriticalPath";
import { formatBytesShort, locate, mergeSteps, type Step } from "./traceData";
import type { TraceElements } from "./traceElements";
import { absoluteUrl, openInPerfetto, type ExportStatus } from "./traceExport";
import type { TraceActions, TraceState } from "./traceState";

export interface ToolbarHooks {
  api: Api;
  ids: { run: string; worker: string; span: string };
  signal: AbortSignal;
  spanInfo: SpanInfo;
  /** "run · worker · span N", Perfetto's title */
  title: string;
  criticalPath: CriticalPath;
  toggleHelp(): void;
}

export class TraceToolbar {
  private exportStop: (() => void) | null = null;
  /** every step of the trace is known (the first window covered it, or the coarse ask answered) */
  private stepsComplete = false;

  constructor(private readonly el: TraceElements, private readonly s: TraceState, private readonly act: TraceActions,
    private readonly hooks: ToolbarHooks) {}

  /** Wire the toolbar's controls (listeners removed with `cleanups`). */
  wire(cleanups: (() => void)[]): void {
    const el = this.el;
    cleanups.push(
      listen(el.stepSelect, "change", () => {
        const s = this.s.steps[Number(el.stepSelect.value)];
        el.stepSelect.value = "";
        if (s) this.act.animateTo({ start: s.start - s.dur * 0.02, end: s.start + s.dur * 1.02 });
        el.scroller.focus({ preventScroll: true });
      }),
      listen(el.pathSelect, "change", () => { void this.hooks.criticalPath.show(el.pathSelect.value); }),
      listen(el.selectButton, "click", () => {
        this.s.mode = this.s.mode === "pan" ? "select" : "pan";
        el.selectButton.setAttribute("aria-pressed", String(this.s.mode === "select"));
        el.selectButton.classList.toggle("ptp-button-on", this.s.mode === "select");
        this.act.updateCursor(null);
      }),
      listen(el.zoomSelection, "click", () => { this.act.zoomToRange(); }),
      listen(el.flowsToggle, "change", () => {
        this.s.allFlows = el.flowsToggle.checked;
        if (this.s.allFlows && this.s.data) locate(this.s.data, -1);
        this.act.markDirty();
      }),
      listen(el.perfetto, "click", () => { this.openPerfetto(); }),
      listen(el.helpButton, "click", () => { this.hooks.toggleHelp(); }),
      listen(el.download, "click", () => {
        if (inVsCode()) this.showFallback("download", "If nothing is downloaded (VS Code may block downloads from this panel), copy the file's link and open it in a browser:");
      }),
    );
  }

  stop(): void {
    this.exportStop?.();
  }

  // ------------------------------------------------------------------------------------------ steps

  /** Take in the steps of an answer (each step once: see traceData.mergeSteps) and refill the step pickers. */
  takeSteps(steps: Step[], complete: boolean): void {
    if (complete) this.stepsComplete = true;
    const merged = mergeSteps(this.s.steps, steps);
    if (merged.length === this.s.steps.length && this.el.stepSelect.options.length > 0) return; // nothing new
    this.s.steps = merged;
    this.fillStepPickers();
  }

  private fillStepPickers(): void {
    const select = this.el.stepSelect;
    const steps = this.s.steps;
    replaceChildren(
      select,
      h("option", { attrs: { value: "" } }, steps.length ? "Fit step…" : "No steps"),
      steps.map((s, i) => h("option", { attrs: { value: String(i) } }, `Step ${s.name} · ${formatTime(s.dur)}`)),
    );
    select.value = "";
    select.disabled = steps.length === 0;
    // A trace without ProfilerStep#N shows one step "0" over the whole trace: the picker offers its annotations
    this.hooks.criticalPath.offer(steps.map((s) => s.name));
  }

  /** A deep link opened a part of the trace: ask once, coarsely, for the whole trace's steps. */
  fetchStepList(): void {
    if (this.stepsComplete) return;
    this.stepsComplete = true;
    const collapsed = this.s.tracksMeta.map((t) => t.id).join(",");
    this.hooks.api
      .get("trace/window", { ...this.hooks.ids, width_px: 16, collapsed }, { signal: this.hooks.signal, timeoutMs: 120_000 })
      .then((resp) => {
        const steps = (Array.isArray(resp.steps) ? resp.steps : []).map(([name, t, d]) => ({ name, start: resp.t0 + t, dur: d }));
        this.takeSteps(steps, true);
        this.act.markDirty();
      })
      .catch(() => undefined);
  }

  // ------------------------------------------------------------------------------------------ highlight

  /**
   * Highlight a category of the step breakdown (null: none): the chip says what is highlighted and removes it; the
   * URL keeps it (`cat`), and the next window is asked with it so the server marks the category's events.
   */
  showHighlight(category: Category | null): void {
    this.s.category = category;
    writeViewUrlState({ cat: category ?? undefined });
    const chip = this.el.highlight;
    if (category === null) {
      chip.hidden = true;
      replaceChildren(chip);
      return;
    }
    replaceChildren(
      chip,
      h("span", { class: "ptp-chip", testid: "trace-highlight-chip", dataset: { category } },
        h("span", { class: "ptp-swatch", style: { background: CATEGORY_COLORS[category] ?? "#9e9e9e" } }),
        h("span", { testid: "trace-highlight-text" }, highlightText(category)),
        h("button", {
          class: "ptp-chip-remove",
          testid: "trace-highlight-clear",
          attrs: { type: "button", title: "Stop highlighting: show every event in full", "aria-label": `Stop highlighting ${category}` },
          onClick: () => { this.clearHighlight(); },
        }, "✕")),
    );
    chip.hidden = false;
  }

  private clearHighlight(): void {
    this.showHighlight(null);
    for (const track of this.s.data?.tracks ?? []) {
      for (const lane of track.lanes) {
        if (lane) {
          lane.ehl = null;
          lane.bhl = null;
        }
      }
    }
    this.act.markDirty();
    this.act.requestWindow(true);
  }

  // ------------------------------------------------------------------------------------------ export

  private showNotice(kind: "info" | "error", ...children: (Node | string)[]): void {
    const n = this.el.notice;
    replaceChildren(
      n,
      h("div", { class: "ptp-trace-notice-body" }, ...children),
      h("button", { class: "ptp-link-button", testid: "trace-notice-close", attrs: { type: "button", "aria-label": "Dismiss" }, onClick: () => { n.hidden = true; } }, "Dismiss"),
    );
    n.dataset["kind"] = kind;
    n.hidden = false;
  }

  private showFallback(testid: string, message: string): void {
    const url = absoluteUrl(this.hooks.api.url("trace/file", this.hooks.ids));
    const link = h("input", { class: "ptp-trace-file-input ptp-mono", testid: "trace-file-link", attrs: { type: "text", readonly: true, "aria-label": "Direct link to the trace file" } });
    link.value = url;
    link.addEventListener("focus", () => { link.select(); });
    const copy = (): void => {
      link.select();
      void copyText(url).then((ok) => { showToast(ok ? "Copied the link to the trace file" : "Copying is blocked here: select the link and press Ctrl+C", ok ? "ok" : "error"); });
    };
    this.showNotice(
      "info",
      h("span", { testid }, message),
      h("div", { class: "ptp-trace-fallback" }, link,
        h("button", { class: "ptp-button ptp-button-small", testid: "trace-copy-link", attrs: { type: "button" }, onClick: copy }, "Copy link")),
    );
  }

  private openPerfetto(): void {
    this.exportStop?.();
    const { api, ids, spanInfo } = this.hooks;
    this.exportStop = openInPerfetto({
      fileUrl: api.url("trace/file", ids),
      fileName: spanInfo.file || "trace.json",
      title: this.hooks.title,
      signal: this.hooks.signal,
      onStatus: (s) => { this.exportStatus(s); },
    });
  }

  /** Say how sending the trace to Perfetto goes. */
  private exportStatus(s: ExportStatus): void {
    if (s.state === "blocked") {
      this.showFallback(
        "perfetto-blocked",
        `Perfetto could not be opened: this page may not open new windows (as inside VS Code). ${s.detail} ` +
          "Download the trace, or copy its link and open it in a browser, then load it at ui.perfetto.dev (Open trace file).",
      );
    } else if (s.state === "waiting") {
      this.showNotice("info", h("span", { testid: "perfetto-waiting" }, "Waiting for Perfetto to open…"));
    } else if (s.state === "sending") {
      this.showNotice("info", h("span", { testid: "perfetto-sending" }, `Sending ${formatBytesShort(this.hooks.spanInfo.size_bytes)} to Perfetto…`));
    } else if (s.state === "sent") {
      this.showNotice("info", h("span", { testid: "perfetto-sent" }, `Sent ${formatBytesShort(s.bytes)} to Perfetto: switch to its tab.`));
    } else {
      this.showFallback("perfetto-failed", `Perfetto did not receive the trace: ${s.detail}`);
    }
  }
}
