/**
 * Python call stacks of operators (`with_stack=True`): frames like
 * `torch/nn/modules/linear.py(130): forward`, ";"-joined, innermost first. Each frame is a button:
 * inside VS Code (TensorBoard itself framed) it asks the editor to open the file at that line;
 * elsewhere it copies `path:line` to the clipboard and says so in a toast.
 */
import { h } from "../../dom";
import { copyText, inVsCode, showToast } from "./ui";

export interface Frame {
  raw: string;
  /** null when the frame has no `path(line): ` prefix */
  path: string | null;
  line: number | null;
  func: string;
}

const FRAME = /^(.*)\((\d+)\): (.*)$/;

export function parseFrame(raw: string): Frame {
  const m = FRAME.exec(raw.trim());
  if (!m) return { raw, path: null, line: null, func: raw.trim() };
  return { raw, path: m[1] ?? "", line: Number(m[2]), func: (m[3] ?? "").trim() || "(unknown)" };
}

export function parseStack(stack: string): Frame[] {
  return stack
    .split(";")
    .filter((f) => f.trim() !== "")
    .map(parseFrame);
}

export function frameLocation(f: Frame): string {
  return f.path === null ? f.raw : `${f.path}:${f.line ?? 0}`;
}

/** Open the frame in VS Code, or copy `path:line`; the result is always told in a toast. */
export function openFrame(f: Frame): void {
  if (f.path === null || f.line === null) return;
  const where = frameLocation(f);
  if (inVsCode()) {
    try {
      // VS Code's TensorBoard integration listens on the window above TensorBoard; it wants a
      // 0-based line and ignores 0 (falsy), hence at least 1.
      window.parent.parent.postMessage({ filename: f.path, line: Math.max(1, f.line - 1) }, "*");
      showToast(`Opening ${where} in VS Code`);
      return;
    } catch {
      // fall back to the clipboard
    }
  }
  void copyText(where).then((ok) => {
    if (ok) showToast(`Copied ${where}`);
    else showToast(`Could not copy to the clipboard here: ${where}`, "error");
  });
}

export function frameButton(f: Frame): HTMLElement {
  if (f.path === null) {
    return h("span", { class: "ptp-frame ptp-frame-plain", testid: "frame", title: f.raw }, h("span", { class: "ptp-frame-func" }, f.func));
  }
  const where = frameLocation(f);
  return h(
    "button",
    {
      class: "ptp-frame",
      testid: "frame",
      title: inVsCode() ? `Open ${where} in the editor` : `Copy ${where}`,
      dataset: { path: f.path, line: String(f.line ?? "") },
      attrs: { type: "button" },
      onClick: (e) => {
        e.stopPropagation();
        openFrame(f);
      },
    },
    h("span", { class: "ptp-frame-func" }, f.func),
    h("span", { class: "ptp-frame-loc" }, where),
  );
}

/** The frames as a list; beyond `limit` frames a toggle shows the rest. */
export function frameList(frames: readonly Frame[], limit = Infinity): HTMLElement {
  const list = h("ol", { class: "ptp-frames", testid: "frames" });
  const items = frames.map((f) => h("li", {}, frameButton(f)));
  if (items.length <= limit) {
    list.append(...items);
    return list;
  }
  const head = items.slice(0, limit);
  const rest = items.slice(limit);
  list.append(...head);
  let open = false;
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
        toggle.textContent = open ? "show fewer frames" : `+${rest.length} more frames`;
        for (const li of rest) {
          if (open) list.insertBefore(li, moreItem);
          else li.remove();
        }
      },
    },
    `+${rest.length} more frames`,
  );
  const moreItem = h("li", { class: "ptp-frames-more-item" }, toggle);
  list.appendChild(moreItem);
  return list;
}
