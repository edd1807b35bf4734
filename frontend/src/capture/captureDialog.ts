/**
 * The Capture dialog: pick a run whose job listens, the steps and the options, send the request, follow it rank
 * by rank ("3 of 8 ranks capturing, step 40,012"), and open the new traces once every rank wrote and the
 * rescan listed them. Off unless TensorBoard was started with --profiler_capture: the dialog then says so.
 * Every text from the server (run names, reasons, file names) is set as text, never parsed as HTML.
 */
import { ApiError, type Api } from "../api";
import { h, replaceChildren } from "../dom";
import type { RunsResponse } from "../types";
import {
  ACTIVITIES,
  type CaptureInfo,
  type CaptureProgress,
  type OpenTarget,
  jobLine,
  listed,
  openTarget,
  pickTarget,
  rankRows,
  ranksNotShown,
  requestBody,
  targetLabel,
} from "./captureData";

export interface CaptureHost {
  api: Api;
  /** The run on screen, offered first when a job listens there. */
  currentRun(): string | undefined;
  /** Show the new traces (the shell selects them once its own listing has them). */
  open(target: OpenTarget): void;
}

const INFO_MS = 3_000;
const STATUS_MS = 1_000;
const LISTED_MS = 1_000;
const LISTED_WAIT_MS = 120_000;

interface Controls {
  run: HTMLSelectElement;
  job: HTMLElement;
  steps: HTMLInputElement;
  activities: Map<string, HTMLInputElement>;
  recordShapes: HTMLInputElement;
  profileMemory: HTMLInputElement;
  withStack: HTMLInputElement;
  start: HTMLButtonElement;
  off: HTMLElement;
  progress: HTMLElement;
}

const checkbox = (testid: string, checked = false): HTMLInputElement => {
  const box = h("input", { testid, attrs: { type: "checkbox" } });
  box.checked = checked;
  return box;
};

function buildControls(onRun: () => void, onStart: () => void): Controls {
  const steps = h("input", { testid: "capture-steps", attrs: { type: "number", min: 1, max: 50, step: 1, value: 3 } });
  steps.style.width = "5em";
  return {
    run: h("select", { testid: "capture-run", attrs: { "aria-label": "Run" }, onChange: onRun }),
    job: h("p", { class: "ptp-muted", testid: "capture-job" }),
    steps,
    activities: new Map(ACTIVITIES.map((a) => [a, checkbox(`capture-act-${a}`, a === "cpu" || a === "cuda")])),
    recordShapes: checkbox("capture-record-shapes"),
    profileMemory: checkbox("capture-profile-memory"),
    withStack: checkbox("capture-with-stack"),
    start: h("button", { class: "ptp-button", testid: "capture-start", attrs: { type: "button" }, onClick: onStart },
      "Capture"),
    off: h("div", { testid: "capture-off-slot" }),
    progress: h("div", { class: "ptp-stack", testid: "capture-progress", attrs: { "aria-live": "polite" } }),
  };
}

function formBody(c: Controls): HTMLElement {
  const label = (text: string, control: HTMLElement): HTMLElement => h("label", { class: "ptp-picker" }, control, text);
  return h(
    "div",
    { class: "ptp-stack" },
    h("label", { class: "ptp-picker" }, "Run", c.run),
    c.job,
    h("div", { class: "ptp-toolbar" }, h("label", { class: "ptp-picker" }, "Steps", c.steps),
      ...ACTIVITIES.map((a) => label(a.toUpperCase(), c.activities.get(a) as HTMLInputElement))),
    h("div", { class: "ptp-toolbar" }, label("record shapes", c.recordShapes), label("profile memory", c.profileMemory),
      label("with stack", c.withStack)),
  );
}

/** Open the dialog (one at a time); Escape, Close or a click outside closes it and stops its polling. */
export function openCaptureDialog(host: CaptureHost): HTMLElement {
  document.querySelector(".ptp-capture-overlay")?.remove();
  const dialog = new CaptureDialog(host);
  return dialog.show();
}

class CaptureDialog {
  private readonly controls: Controls;
  private readonly controller = new AbortController();
  private info: CaptureInfo | null = null;
  private requestId: string | null = null;
  private timers: number[] = [];
  /** the one pending refresh of the targets (a change of run refreshes at once and replaces it) */
  private infoTimer: number | undefined;
  private overlay: HTMLElement | null = null;
  private readonly onKey = (e: KeyboardEvent): void => {
    if (e.key === "Escape") this.close();
  };

  constructor(private readonly host: CaptureHost) {
    this.controls = buildControls(() => { void this.refreshInfo(); }, () => { void this.start(); });
  }

  show(): HTMLElement {
    const c = this.controls;
    const overlay = h(
      "div",
      { class: "ptp-overlay ptp-capture-overlay", testid: "capture-dialog",
        onClick: (e) => { if (e.target === overlay) this.close(); } },
      h(
        "div",
        { class: "ptp-card ptp-overlay-box", role: "dialog",
          attrs: { "aria-modal": "true", "aria-label": "Capture a profile from a running job" } },
        h("h3", {}, "Capture a profile from a running job"),
        c.off,
        formBody(c),
        c.progress,
        h("div", { class: "ptp-overlay-actions" }, h("span", {}), c.start,
          h("button", { class: "ptp-button", testid: "capture-close", attrs: { type: "button" },
            onClick: () => { this.close(); } }, "Close")),
      ),
    );
    this.overlay = overlay;
    document.addEventListener("keydown", this.onKey);
    document.body.appendChild(overlay);
    void this.refreshInfo();
    return overlay;
  }

  close(): void {
    this.controller.abort();
    for (const t of this.timers.splice(0)) window.clearTimeout(t);
    window.clearTimeout(this.infoTimer);
    document.removeEventListener("keydown", this.onKey);
    this.overlay?.remove();
  }

  private later(fn: () => void, ms: number): void {
    const id = window.setTimeout(() => {
      this.timers = this.timers.filter((t) => t !== id);
      fn();
    }, ms);
    this.timers.push(id);
  }

  private get closed(): boolean {
    return this.controller.signal.aborted;
  }

  /** The targets, the job in the chosen folder and whether capture is on; asked again every few seconds. */
  private async refreshInfo(): Promise<void> {
    const c = this.controls;
    const chosen = c.run.value || undefined;
    try {
      const first = this.info ?? await this.host.api.getJSON<CaptureInfo>("capture", {}, { signal: this.controller.signal });
      const run = chosen ?? pickTarget(first.targets, this.host.currentRun());
      this.info = await this.host.api.getJSON<CaptureInfo>("capture", { run }, { signal: this.controller.signal });
      this.renderInfo(run);
    } catch (err) {
      if (this.closed) return;
      c.job.textContent = `Cannot ask the server about jobs: ${err instanceof Error ? err.message : String(err)}`;
    }
    window.clearTimeout(this.infoTimer);
    if (!this.closed) this.infoTimer = window.setTimeout(() => { void this.refreshInfo(); }, INFO_MS);
  }

  private renderInfo(run: string | undefined): void {
    const c = this.controls;
    const info = this.info;
    if (!info) return;
    const signature = JSON.stringify(info.targets.map((t) => [t.run, t.listening]));
    if (c.run.dataset["signature"] !== signature) {
      c.run.dataset["signature"] = signature;
      replaceChildren(c.run, info.targets.map((t) => h("option", { attrs: { value: t.run } }, targetLabel(t))));
    }
    if (run !== undefined) c.run.value = run;
    c.job.textContent = info.targets.length ? jobLine(info.job) : "No run folder yet: a job with capture enabled " +
      "appears here as soon as it starts training.";
    replaceChildren(c.off, info.enabled ? null
      : h("section", { class: "ptp-card ptp-warn-card", testid: "capture-off" }, h("p", {}, info.message ?? "")));
    c.start.disabled = !info.enabled || info.targets.length === 0 || this.requestId !== null;
  }

  private form(): ReturnType<typeof requestBody> {
    const c = this.controls;
    return requestBody({
      steps: Number(c.steps.value),
      activities: ACTIVITIES.filter((a) => c.activities.get(a)?.checked),
      recordShapes: c.recordShapes.checked,
      profileMemory: c.profileMemory.checked,
      withStack: c.withStack.checked,
    });
  }

  private async start(): Promise<void> {
    const c = this.controls;
    const body = this.form();
    if (typeof body === "string") {
      this.showProblem(body);
      return;
    }
    c.start.disabled = true;
    try {
      const made = await this.host.api.postJSON<CaptureProgress>("capture", { run: c.run.value }, body,
        { signal: this.controller.signal });
      this.requestId = made.id;
      this.renderProgress(made);
      this.later(() => { void this.follow(made.run ?? c.run.value, made.id); }, STATUS_MS);
    } catch (err) {
      if (this.closed) return;
      this.showProblem(err instanceof ApiError ? err.message : String(err));
      c.start.disabled = false;
    }
  }

  private showProblem(text: string): void {
    replaceChildren(this.controls.progress,
      h("section", { class: "ptp-card ptp-error-card", testid: "capture-error" }, h("p", { class: "ptp-break" }, text)));
  }

  /** Poll the request until it is done; then open the traces (every rank wrote) or say what failed. */
  private async follow(run: string, id: string): Promise<void> {
    let progress: CaptureProgress | null = null;
    try {
      progress = await this.host.api.getJSON<CaptureProgress>("capture/status", { run, id },
        { signal: this.controller.signal });
      this.renderProgress(progress);
    } catch (err) {
      if (this.closed) return;
      this.controls.progress.dataset["error"] = err instanceof Error ? err.message : String(err);
    }
    if (this.closed) return;
    if (!progress?.done) {
      this.later(() => { void this.follow(run, id); }, STATUS_MS);
      return;
    }
    this.requestId = null;
    this.controls.start.disabled = !(this.info?.enabled ?? false);
    const target = openTarget(progress);
    if (target) void this.openWhenListed(target, progress, Date.now() + LISTED_WAIT_MS);
  }

  private renderProgress(p: CaptureProgress): void {
    const rows = rankRows(p);
    const more = ranksNotShown(p);
    replaceChildren(
      this.controls.progress,
      h("p", { testid: "capture-summary", dataset: { state: p.state } }, h("b", {}, p.summary)),
      p.message ? h("p", { class: "ptp-break", testid: "capture-message" }, p.message) : null,
      h("div", { class: "ptp-table-wrap" }, h("table", { class: "ptp-table", testid: "capture-ranks" },
        h("thead", {}, h("tr", {}, h("th", {}, "Rank"), h("th", {}, "State"), h("th", { class: "ptp-num" }, "Step"),
          h("th", {}, "File or reason"))),
        h("tbody", {}, rows.map((r) => h("tr", { testid: "capture-rank" }, h("td", {}, r.rank), h("td", {}, r.state),
          h("td", { class: "ptp-num" }, r.step), h("td", { class: "ptp-break" }, r.detail)))))),
      more ? h("p", { class: "ptp-muted" }, `${more} more ranks not listed.`) : null,
    );
  }

  /** Wait for the rescan to list the new span on every rank that wrote, then hand it to the shell. */
  private async openWhenListed(target: OpenTarget, progress: CaptureProgress, until: number): Promise<void> {
    const note = h("p", { class: "ptp-muted", testid: "capture-opening" }, "Opening the new traces when the logdir's " +
      "rescan lists them…");
    this.controls.progress.append(note);
    while (!this.closed && Date.now() < until) {
      try {
        // a page of one run, plus the new one whatever the page: a logdir of thousands of runs stays cheap
        const runs = await this.host.api.getJSON<RunsResponse>("runs", { limit: 1, run: target.run },
          { signal: this.controller.signal });
        if (listed(runs, target, progress)) {
          this.close();
          this.host.open(target);
          return;
        }
      } catch {
        // the next poll tells
      }
      await new Promise((resolve) => { this.later(() => { resolve(null); }, LISTED_MS); });
    }
    if (!this.closed) note.textContent = "The traces are written, but the rescan has not listed them yet.";
  }
}
