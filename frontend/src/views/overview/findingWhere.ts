/**
 * A finding's location on the Overview: the user's own stack frame (a source link, as call stacks elsewhere in the
 * plugin: it opens the file in VS Code or copies `path:line`), the API that line calls, the nn.Module around it and
 * the record_function region or framework annotation (optimizer step, backward) that holds the evidence. Trace
 * strings are rendered as text only.
 */
import { type Child, h } from "../../dom";
import type { Where } from "../common/apiTypes";
import { frameButton, parseFrame } from "../common/callStack";

/** "nn.Module: Linear_0" → "nn.Module Linear". */
export function moduleLabel(frame: string): string {
  return `nn.Module ${frame.replace(/^nn\.Module: /, "").replace(/_\d+$/, "")}`;
}

/** The parts after the frame, as the server words them: " → api", "in nn.Module X", "inside 'region'". */
export function whereParts(w: Where): string[] {
  const parts: string[] = [];
  if (w.frame && w.api) parts.push(`→ ${w.api}`);
  if (w.module) parts.push(`in ${moduleLabel(w.module)}`);
  const inside = [w.region, w.annotation].filter((a): a is string => typeof a === "string" && a !== "" && a !== w.api);
  if (inside.length) parts.push(`inside ${inside.map((a) => `'${a}'`).join(" and ")}`);
  return parts;
}

/** The "Where:" line of a finding, or null when it has no location. */
export function whereLine(w: Where | null | undefined): HTMLElement | null {
  if (!w || typeof w.text !== "string" || w.text === "") return null;
  const children: Child[] = [h("span", { class: "ptp-muted" }, "Where: ")];
  if (w.frame) children.push(frameButton(parseFrame(w.frame)));
  const rest = whereParts(w);
  if (rest.length) children.push(h("span", { class: "ptp-where-rest" }, `${w.frame ? " " : ""}${rest.join(", ")}`));
  if (w.frame && w.share > 0 && w.share < 0.9) children.push(h("span", { class: "ptp-muted" }, ` (${Math.round(100 * w.share)} % of it)`));
  return h("div", { class: "ptp-finding-where", testid: "finding-where", title: w.text }, ...children);
}
