/** Small reusable pieces of UI (cards, progress rows, the empty state). */
import { h } from "./dom";
import { formatBytes, formatPercent } from "./format";
import type { SpanInfo } from "./types";

export function card(props: { class?: string; testid?: string; title?: string }, ...children: (Node | string | null)[]): HTMLElement {
  return h(
    "section",
    { class: ["ptp-card", props.class], testid: props.testid },
    props.title ? h("h3", {}, props.title) : null,
    ...children,
  );
}

/** An error card for a trace file that failed to load: names the file, shows the reason as text. */
export function fileErrorCard(where: string, span: SpanInfo): HTMLElement {
  const el = card(
    { class: "ptp-error-card", testid: "error-card", title: `Could not load ${span.file || "a trace file"}` },
    h("p", { class: "ptp-break", testid: "error-reason" }, span.error ?? "The file could not be read."),
    h("p", { class: "ptp-muted ptp-break" }, where, span.size_bytes ? ` · ${formatBytes(span.size_bytes)}` : ""),
  );
  el.dataset["file"] = span.file;
  return el;
}

/** A generic error card (server error sentence, view failure). */
export function errorCard(title: string, message: string, testid = "error-card"): HTMLElement {
  return card({ class: "ptp-error-card", testid, title }, h("p", { class: "ptp-break" }, message));
}

/** A thin progress bar; `fraction` null means indeterminate (queued). */
export function progressBar(fraction: number | null, label: string): HTMLElement {
  const pct = fraction === null ? 0 : Math.round(Math.min(1, Math.max(0, fraction)) * 100);
  return h(
    "div",
    {
      class: ["ptp-bar", fraction === null && "ptp-indeterminate"],
      role: "progressbar",
      attrs: {
        "aria-label": label,
        "aria-valuemin": 0,
        "aria-valuemax": 100,
        "aria-valuenow": fraction === null ? null : pct,
      },
    },
    h("div", { style: { width: `${pct}%` } }),
  );
}

/** One row per queued/loading file: "<where> — <file>", bar, percentage. */
export function progressRow(where: string, span: SpanInfo): HTMLElement {
  const queued = span.state === "queued";
  const fraction = queued ? null : span.progress;
  const row = h(
    "div",
    { class: "ptp-progress-row", testid: "progress-row" },
    h(
      "div",
      { class: "ptp-progress-label", title: `${where} — ${span.file}` },
      h("span", {}, where),
      h("span", { class: "ptp-muted" }, ` — ${span.file} (${formatBytes(span.size_bytes)})`),
    ),
    progressBar(fraction, `Loading ${span.file}`),
    h("div", { class: "ptp-pct" }, queued ? "queued" : formatPercent(span.progress)),
  );
  row.dataset["file"] = span.file;
  row.dataset["state"] = span.state;
  return row;
}

const SNIPPET = `import torch
from torch.profiler import ProfilerActivity, schedule, tensorboard_trace_handler

with torch.profiler.profile(
    activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
    schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
    on_trace_ready=torch.profiler.tensorboard_trace_handler("./log"),
    record_shapes=True,
    profile_memory=True,
    with_stack=True,
) as prof:
    for step, batch in enumerate(loader):
        train_step(batch)
        prof.step()  # tell the profiler a step ended
`;

/** Shown when the logdir holds no trace yet: how a new user produces one. */
export function emptyState(logdir: string, scanning: boolean, unreadable = false): HTMLElement {
  if (unreadable) {
    // The logdir could not be listed (its error card is shown above): "no traces" would mislead.
    return card(
      { class: "ptp-empty", testid: "empty-state" },
      h("p", {}, "No runs to show: ", h("code", { class: "ptp-break" }, logdir || "the log directory"),
        " could not be read. Fix the problem above; the plugin tries again at every rescan."),
    );
  }
  if (scanning) {
    return card(
      { class: "ptp-empty", testid: "empty-state", title: "Looking for profiler traces…" },
      h("p", {}, "Scanning ", h("code", { class: "ptp-break" }, logdir || "the log directory"), " for ", h("code", {}, "*.pt.trace.json[.gz]"), " files."),
    );
  }
  return card(
    { class: "ptp-empty", testid: "empty-state" },
    h("h2", {}, "No profiler traces found"),
    h(
      "p",
      {},
      "There are no ",
      h("code", {}, "*.pt.trace.json"),
      " or ",
      h("code", {}, "*.pt.trace.json.gz"),
      " files under ",
      h("code", { class: "ptp-break" }, logdir || "the log directory"),
      " yet.",
    ),
    h("p", {}, "1. Record a trace with ", h("code", {}, "torch.profiler"), " and let it write into a log folder:"),
    h("pre", { class: "ptp-code" }, h("code", {}, SNIPPET)),
    h("p", {}, "2. Point TensorBoard at that folder and open the PYTORCH_PROFILER tab:"),
    h("pre", { class: "ptp-code" }, h("code", {}, "pip install pytorch-tb-profiler\ntensorboard --logdir ./log")),
    h(
      "p",
      { class: "ptp-muted" },
      "Each sub-folder holding traces is one run; each trace file is one worker and span. New files show up here by themselves within a few seconds.",
    ),
    h(
      "p",
      { class: "ptp-muted", testid: "empty-capture-hint" },
      "Or, from a job already training with ",
      h("code", {}, "tb_plugin.capture.enable(\"./log/my_run\")"),
      ": press Capture above (TensorBoard started with ",
      h("code", {}, "--profiler_capture"),
      "), or run ",
      h("code", {}, "pytorch-tb-profiler capture ./log/my_run --steps 3"),
      ".",
    ),
  );
}

export function unreachableCard(detail: string, retrySeconds: number): HTMLElement {
  return card(
    { class: "ptp-error-card", testid: "unreachable", title: "Cannot reach the TensorBoard server" },
    h("p", { class: "ptp-break" }, detail),
    h(
      "p",
      { class: "ptp-muted" },
      `Is the tensorboard process still running? Retrying every ${retrySeconds} s; the data shown may be out of date.`,
    ),
  );
}

/**
 * A small "i" marker whose tooltip (title) explains how a number is computed; focusable so keyboard
 * users get the same text (aria-label).
 */
export function infoIcon(text: string): HTMLElement {
  return h(
    "span",
    { class: "ptp-info", title: text, role: "img", attrs: { "aria-label": text, tabindex: 0 } },
    "i",
  );
}
