/**
 * Python call stacks of operators (`with_stack=True`): frames like `torch/nn/modules/linear.py(130): forward`,
 * ";"-joined, innermost first. The user's own frames come first and library frames are dimmed (which file is
 * whose comes from GET ./sources, loaded once per span). Each frame is a button: inside VS Code's webview it asks
 * the editor to open the file at that line; elsewhere it copies `path:line` and says so in a toast (the pure
 * rules, and what VS Code's side expects, are in sourceFrames.ts).
 */
import { h } from "../../dom";
import type { ViewContext } from "../types";
import {
  type Frame,
  frameAction,
  frameKind,
  frameLocation,
  leadingFrames,
  type SourceFile,
  type SourceIndex,
} from "./sourceFrames";
import { copyText, showToast, vsCodeOrigin } from "./ui";

export { type Frame, frameLocation, parseFrame, parseStack } from "./sourceFrames";

const loaded = new Map<string, Promise<SourceIndex>>();
let current: SourceIndex = new Map();

/**
 * The source files of the selected span (cached per span); frame lists drawn afterwards use them. A failure
 * leaves frames unclassified (shown in stack order, none dimmed) rather than failing the page.
 */
export function loadSources(ctx: ViewContext): Promise<SourceIndex> {
  const key = `${ctx.run}\u0000${ctx.worker}\u0000${ctx.span}`;
  let pending = loaded.get(key);
  if (!pending) {
    pending = ctx.api
      .get("sources", { run: ctx.run, worker: ctx.worker, span: ctx.span })
      .then((resp) => new Map((Array.isArray(resp.files) ? resp.files : []).map((f) => [f.path, f] as const)))
      .catch(() => {
        loaded.delete(key);
        return new Map<string, SourceFile>();
      });
    loaded.set(key, pending);
  }
  return pending.then((index) => {
    current = index;
    return index;
  });
}

/** Open the frame in VS Code, or copy its location; the result is always told in a toast. */
export function openFrame(f: Frame, index: SourceIndex = current): void {
  const origin = vsCodeOrigin();
  const action = frameAction(f, index, origin !== null);
  if (!action) return;
  if (action.kind === "open" && origin !== null) {
    try {
      // The webview checks that the message comes from TensorBoard's origin; we address only the webview's.
      window.parent.parent.postMessage({ filename: action.filename, line: action.line }, origin);
      showToast(action.message);
      return;
    } catch {
      // fall back to the clipboard
    }
  }
  const text = action.kind === "copy" ? action.text : frameLocation(f);
  void copyText(text).then((ok) => {
    if (ok) showToast(action.kind === "copy" ? action.message : `Copied ${text}`);
    else showToast(`Could not copy to the clipboard here: ${text}`, "error");
  });
}

export function frameButton(f: Frame, index: SourceIndex = current): HTMLElement {
  const kind = frameKind(f, index);
  const cls = ["ptp-frame", `ptp-frame-${kind}`];
  if (f.path === null) {
    return h("span", { class: [...cls, "ptp-frame-plain"], testid: "frame", title: f.raw, dataset: { kind } }, h("span", { class: "ptp-frame-func" }, f.func));
  }
  const action = frameAction(f, index, vsCodeOrigin() !== null);
  const library = kind === "library" ? " (library file)" : kind === "generated" ? " (generated code)" : "";
  return h(
    "button",
    {
      class: cls,
      testid: "frame",
      title: `${action?.kind === "open" ? "Open in the editor" : "Copy"}: ${frameLocation(f)}${library}`,
      dataset: { path: f.path, line: String(f.line ?? ""), kind },
      attrs: { type: "button" },
      onClick: (e) => {
        e.stopPropagation();
        openFrame(f, index);
      },
    },
    h("span", { class: "ptp-frame-func" }, f.func),
    h("span", { class: "ptp-frame-loc" }, frameLocation(f)),
  );
}

/**
 * The frames as a list: the user's own frames first (at most `limit`), then a toggle that shows the whole stack
 * in call order (innermost first), library frames dimmed.
 */
export function frameList(frames: readonly Frame[], limit = Infinity, index: SourceIndex = current): HTMLElement {
  const list = h("ol", { class: "ptp-frames", testid: "frames" });
  const { lead, hidden } = leadingFrames(frames, index, limit);
  const leadItems = lead.map((f) => h("li", {}, frameButton(f, index)));
  list.append(...leadItems);
  if (hidden === 0) return list;
  let full: HTMLElement[] | null = null;
  let open = false;
  const collapsedLabel = `+${hidden} more frames`;
  const toggle = h(
    "button",
    {
      class: "ptp-link-button ptp-frames-more",
      testid: "frames-more",
      attrs: { type: "button", "aria-expanded": "false" },
      onClick: (e) => {
        e.stopPropagation();
        open = !open;
        toggle.setAttribute("aria-expanded", String(open));
        toggle.textContent = open ? "show fewer frames" : collapsedLabel;
        full ??= frames.map((f) => h("li", {}, frameButton(f, index)));
        for (const li of open ? leadItems : full) li.remove();
        for (const li of open ? full : leadItems) list.insertBefore(li, moreItem);
      },
    },
    collapsedLabel,
  );
  const moreItem = h("li", { class: "ptp-frames-more-item" }, toggle);
  list.appendChild(moreItem);
  return list;
}
