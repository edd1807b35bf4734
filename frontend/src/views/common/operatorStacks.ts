/**
 * What the Operator and Kernel pages share about an operator: the meaning of its columns (`OP_HELP`) and its
 * distinct Python call stacks (`stacksPanel`, fetched on first expand of an Operator row, or under a Kernel row:
 * its launching operator).
 */
import { h, replaceChildren } from "../../dom";
import { formatDuration, formatExactUs, formatInt } from "../../format";
import type { ViewContext } from "../types";
import { frameList, parseStack } from "./callStack";
import { spanGet, left, loadErrorCard } from "./ui";

export const OP_HELP = {
  calls: "How many times the operator ran in this trace.",
  deviceSelf:
    "Sum of the durations of the GPU work (kernels, memory copies and sets) that this operator launched itself.",
  deviceTotal:
    "Sum of the durations of the GPU work launched by this operator and by the operators it called.",
  deviceWall:
    "Device total counted as covered time: GPU work of this operator that ran at the same time on several streams counts once.",
  hostSelf: "Wall time on the host inside this operator, minus the time in its children (operators, annotations, CUDA runtime calls).",
  hostTotal: "Wall time on the host from the operator's start to its end, children included.",
  tcEligible:
    "Whether the operator could run on tensor cores (convolutions, matrix multiplications, attention, RNNs), judged from its name.",
  tcSelf: "Share of this operator's device self time spent in kernels that use tensor cores (detected from kernel names).",
  tcTotal: "Share of this operator's device total time spent in kernels that use tensor cores (detected from kernel names).",
  inputShape: "The operator's input dimensions as recorded (record_shapes=True).",
  callStack: "The Python call stack of the call, innermost frame first (with_stack=True). Click a frame to open or copy its location.",
};

function stat(label: string, value: string, help: string): HTMLElement {
  return h("span", { title: help }, `${label} `, h("b", {}, value));
}

/** The call stacks of one operator, fetched on first expand (also under a Kernel row: its launching operator). */
export function stacksPanel(ctx: ViewContext, name: string, device: boolean): HTMLElement {
  const panel = h("div", { class: "ptp-stacks", testid: "call-stacks" }, h("span", { class: "ptp-muted" }, "Loading call stacks…"));
  spanGet(ctx, "operators", { group_by: "name_stack", name })
    .then((resp) => {
      const rows = Array.isArray(resp.rows) ? resp.rows : [];
      if (rows.length === 0) {
        replaceChildren(panel, h("span", { class: "ptp-muted" }, "No Python call stack was recorded for this operator."));
        return;
      }
      replaceChildren(
        panel,
        h("div", { class: "ptp-muted" }, `${formatInt(rows.length)} distinct call stack${rows.length === 1 ? "" : "s"} (innermost frame first; click a frame to open or copy its location):`),
        rows.map((r) =>
          h(
            "div",
            { class: "ptp-stack-entry", testid: "call-stack" },
            h(
              "div",
              { class: "ptp-stack-stats" },
              stat("Calls", formatInt(r.calls), OP_HELP.calls),
              device ? stat("Device self", formatDuration(r.device_self_us), `${formatExactUs(r.device_self_us)}\n${OP_HELP.deviceSelf}`) : null,
              device ? stat("Device total", formatDuration(r.device_total_us), `${formatExactUs(r.device_total_us)}\n${OP_HELP.deviceTotal}`) : null,
              stat("Host self", formatDuration(r.host_self_us), `${formatExactUs(r.host_self_us)}\n${OP_HELP.hostSelf}`),
              stat("Host total", formatDuration(r.host_total_us), `${formatExactUs(r.host_total_us)}\n${OP_HELP.hostTotal}`),
            ),
            frameList(parseStack(r.call_stack ?? ""), 8),
          ),
        ),
      );
    })
    .catch((err: unknown) => {
      if (left(ctx)) return;
      replaceChildren(panel, loadErrorCard(err, `the call stacks of ${name}`));
    });
  return panel;
}
