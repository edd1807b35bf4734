/**
 * Pure logic of call-stack frames (no DOM, unit-tested under node by frontend/test/names_sources.test.ts):
 * parsing `file(line): function` frames, putting the user's own frames first, and talking to VS Code.
 *
 * VS Code's TensorBoard integration (microsoft/vscode-tensorboard, src/tensorBoardSession.ts; formerly
 * vscode-python's src/client/tensorBoard/tensorBoardSession.ts, same code) shows TensorBoard in a webview:
 * its HTML frames TensorBoard in `<iframe id="vscode-tensorboard-iframe">` and listens for `message` events:
 *
 *   if (!"${fullWebServerUri}".startsWith(event.origin) || !event.data || !event.data.filename || !event.data.line) return;
 *   vscode.postMessage({ command: 'jump_to_source', args: { filename, line } });
 *
 * and the extension opens the file (`fs.existsSync(fsPath)`, else it asks the user to pick it) and selects
 * `new Position(line, 0)` when `line < document.lineCount`. So: the message goes to the window above TensorBoard
 * (our `window.parent.parent`), from TensorBoard's origin (ours: the plugin frame is same-origin), with a
 * 0-based `line` that must be truthy. Line 1 of a file is 0, which the filter drops: for it we send a line past
 * any file's end, so the file opens without a selection, at its top (line 1).
 *
 * The webview document is served from `vscode-webview://<id>` by the desktop app and from
 * `https://<id>.vscode-cdn.net` by the browser builds (vscode.dev, Codespaces; older releases
 * `*.vscode-webview.net`): those origins are the documented markers of a VS Code webview. Any other framing
 * (Jupyter's or Colab's `%tensorboard`, a portal) is not VS Code: there a click copies `path:line`.
 */

export interface Frame {
  raw: string;
  /** null when the frame has no `path(line): ` prefix */
  path: string | null;
  line: number | null;
  func: string;
}

/** Where a frame's file comes from (GET ./sources); "none" for a frame without a file (`nn.Module: Linear_0`). */
export type SourceKind = "user" | "library" | "generated" | "none";

export interface SourceFile {
  path: string;
  kind: Exclude<SourceKind, "none">;
  /** an absolute path an editor can open, null when the trace does not say where the file lives */
  absolute: string | null;
}

export type SourceIndex = ReadonlyMap<string, SourceFile>;

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

export function frameKind(f: Frame, index: SourceIndex): SourceKind {
  if (f.path === null) return "none";
  return index.get(f.path)?.kind ?? "user";
}

/**
 * The frames to show first: the user's own (innermost first) when the stack has any, else the first `limit`;
 * `hidden` is how many frames the collapsed list leaves out (the full stack is shown in order when expanded).
 */
export function leadingFrames(frames: readonly Frame[], index: SourceIndex, limit: number): { lead: Frame[]; hidden: number } {
  const own = frames.filter((f) => frameKind(f, index) === "user");
  const lead = (own.length && own.length < frames.length ? own : frames).slice(0, limit);
  return { lead, hidden: frames.length - lead.length };
}

/** Whether `origin` is a VS Code webview's (see the module comment). */
export function isVsCodeWebviewOrigin(origin: string): boolean {
  if (origin.startsWith("vscode-webview://")) return true;
  const m = /^https:\/\/[^/]+\.(vscode-cdn\.net|vscode-webview\.net)(:\d+)?$/.exec(origin);
  return m !== null;
}

/**
 * The origin of the VS Code webview above TensorBoard, or null when TensorBoard is not in one.
 * `ancestors` are this frame's ancestor origins, nearest first (TensorBoard's page, then what frames it);
 * `referrer` is TensorBoard's page's document.referrer, used where a browser has no ancestorOrigins.
 */
export function vsCodeWebviewOrigin(ancestors: readonly string[], referrer: string): string | null {
  const host = ancestors[1];
  if (host !== undefined) return isVsCodeWebviewOrigin(host) ? host : null;
  if (ancestors.length === 1 || referrer === "") return null;
  let origin: string;
  try {
    const url = new URL(referrer);
    origin = url.protocol === "vscode-webview:" ? `vscode-webview://${url.host}` : url.origin;
  } catch {
    return null;
  }
  return isVsCodeWebviewOrigin(origin) ? origin : null;
}

/** A line past the end of any source file: VS Code then opens the file without a selection, at line 1. */
export const VSCODE_PAST_END = 2 ** 31 - 1;

/** VS Code's line for a 1-based frame line: 0-based, and never 0 (its filter drops falsy lines). */
export function vsCodeLine(line: number): number {
  return line >= 2 ? Math.floor(line) - 1 : VSCODE_PAST_END;
}

/** What a click on a frame does: open it in VS Code, or copy a location, with the sentence to show. */
export type FrameAction =
  | { kind: "open"; filename: string; line: number; message: string }
  | { kind: "copy"; text: string; message: string };

export function frameAction(f: Frame, index: SourceIndex, vsCode: boolean): FrameAction | null {
  if (f.path === null || f.line === null) return null;
  const file = index.get(f.path);
  const absolute = file?.absolute ?? null;
  const where = `${absolute ?? f.path}:${f.line}`;
  const library = file?.kind === "library" && absolute === null;
  if (vsCode && !library) {
    return { kind: "open", filename: absolute ?? f.path, line: vsCodeLine(f.line), message: `Opening ${where} in VS Code` };
  }
  const note = library ? ` (a library file: the trace does not say which folder ${f.path} is relative to)` : "";
  return { kind: "copy", text: where, message: `Copied ${where}${note}` };
}
