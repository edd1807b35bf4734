/**
 * The shell's pickers: Run (with a search box once the logdir has more runs than a page, and a note of the runs
 * not listed), Worker (a run's workers, then its allocator snapshots in a group of their own) and Span (each with
 * its file and state as a tooltip). A picker's options are rebuilt only when they change, so an open picker is
 * not closed under the user by a poll.
 */
import { h, replaceChildren } from "../dom";
import { moreRunsText, needsSearch, type PageInfo } from "../runsPage";
import type { UrlState } from "../urlState";
import { isSnapshot, type Selection } from "./runs";
import type { RunInfo } from "../types";

export class RunPicker {
  readonly runSelect: HTMLSelectElement;
  readonly runSearch: HTMLInputElement;
  readonly workerSelect: HTMLSelectElement;
  readonly spanSelect: HTMLSelectElement;
  /** What the search box holds: the server lists the runs whose name holds it. */
  search = "";
  private searchTimer: number | undefined;
  private readonly signatures = { run: "", worker: "", span: "" };

  /** `choose`: the user picked something; `searched`: the search changed (ask for the runs again). */
  constructor(choose: (change: UrlState) => void, searched: () => void) {
    const select = (testid: string, label: string, onChange: (value: string) => void): HTMLSelectElement => {
      const s = h("select", { testid, attrs: { "aria-label": label }, onChange: () => { onChange(s.value); } });
      return s;
    };
    this.runSelect = select("run-select", "Run", (v) => { choose({ run: v }); });
    this.runSearch = h("input", {
      class: "ptp-run-search",
      testid: "run-search",
      attrs: { type: "search", placeholder: "Search runs", "aria-label": "Search runs", hidden: "" },
    });
    this.workerSelect = select("worker-select", "Worker", (v) => { choose({ worker: v }); });
    this.spanSelect = select("span-select", "Span", (v) => { choose({ span: v }); });
    this.runSearch.addEventListener("input", () => {
      window.clearTimeout(this.searchTimer);
      this.searchTimer = window.setTimeout(() => {
        this.search = this.runSearch.value;
        searched();
      }, 250);
    });
  }

  /** The header's pickers, each with its label. */
  controls(): HTMLElement[] {
    const picker = (label: string, ...controls: HTMLElement[]): HTMLElement => h("label", { class: "ptp-picker" }, label, ...controls);
    return [picker("Run", this.runSearch, this.runSelect), picker("Worker", this.workerSelect), picker("Span", this.spanSelect)];
  }

  render(runs: readonly RunInfo[], page: PageInfo | null, sel: Selection | null): void {
    this.setOptions(this.runSelect, "run", runs.map((r) => r.name), sel?.run.name);
    this.runSearch.hidden = !needsSearch(page, this.search);
    const more = moreRunsText(page, runs.length);
    const note = this.runSelect.querySelector("option[data-more]");
    if (more === null) note?.remove();
    else if (note) note.textContent = more;
    else this.runSelect.append(h("option", { attrs: { disabled: "", "data-more": "" } }, more));
    this.setWorkerOptions(sel);
    this.setOptions(this.spanSelect, "span", sel ? sel.worker.spans.map((s) => s.span) : [], sel?.span.span);
    for (const option of Array.from(this.spanSelect.options)) {
      const span = sel?.worker.spans.find((s) => s.span === option.value);
      option.title = span ? `${span.file} (${span.state})` : "";
    }
  }

  private setOptions(select: HTMLSelectElement, key: "run" | "span", options: string[], value: string | undefined): void {
    const signature = JSON.stringify(options);
    if (signature !== this.signatures[key]) {
      this.signatures[key] = signature;
      replaceChildren(select, options.map((o) => h("option", { attrs: { value: o } }, o)));
    }
    select.disabled = options.length === 0;
    if (value !== undefined && select.value !== value) select.value = value;
  }

  /** The Worker picker: the run's workers, then its allocator snapshots in a group of their own. */
  private setWorkerOptions(sel: Selection | null): void {
    const select = this.workerSelect;
    const run = sel?.run;
    const traces = run ? run.workers.filter((w) => !isSnapshot(run, w)).map((w) => w.name) : [];
    const snapshots = run ? run.workers.filter((w) => isSnapshot(run, w)).map((w) => w.name) : [];
    const signature = JSON.stringify([traces, snapshots]);
    if (signature !== this.signatures.worker) {
      this.signatures.worker = signature;
      const option = (o: string): HTMLOptionElement => h("option", { attrs: { value: o } }, o);
      replaceChildren(
        select,
        traces.map(option),
        snapshots.length ? h("optgroup", { attrs: { label: "Allocator snapshots" }, testid: "snapshot-options" }, snapshots.map(option)) : null,
      );
    }
    select.disabled = traces.length + snapshots.length === 0;
    if (sel && select.value !== sel.worker.name) select.value = sel.worker.name;
  }
}
