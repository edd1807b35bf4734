/**
 * The Flame graph's data side (no DOM): the /flamegraph payload, its layout (each frame's offset and depth,
 * heaviest child first), zoom ranges, search matches with their share, and the frame colours by kind.
 */

export type FrameKindName =
  | "user"
  | "library"
  | "builtin"
  | "module"
  | "operator"
  | "annotation"
  | "runtime"
  | "device"
  | "other";

export type FlameMetric = "self_host_us" | "self_device_us" | "calls" | "alloc_bytes";

export interface FlameResponse {
  metric: FlameMetric;
  unit: "us" | "calls" | "bytes";
  merge: boolean;
  step: string | null;
  operator: string | null;
  total: number;
  python_stacks: boolean;
  steps: string[];
  strings: string[];
  kinds: FrameKindName[];
  frames: { name: number[]; parent: number[]; value: number[]; self: number[] };
  frames_total: number;
  min_share: number;
}

/** Frames laid out: `x` is the offset (in metric units) from the root's left edge; depth 0 is a top frame. */
export interface FlameLayout {
  readonly n: number;
  readonly x: Float64Array;
  readonly depth: Int32Array;
  readonly byDepth: number[][];
  readonly maxDepth: number;
  readonly total: number;
}

export function layoutFrames(data: FlameResponse): FlameLayout {
  const { parent, value } = data.frames;
  const n = parent.length;
  const children: number[][] = Array.from({ length: n + 1 }, () => []);
  for (let i = 0; i < n; i++) children[(parent[i] ?? -1) + 1]?.push(i);
  const x = new Float64Array(n);
  const depth = new Int32Array(n);
  const byDepth: number[][] = [];
  // parents come before children, so one pass in order places every frame
  const place = (list: number[], start: number, d: number): void => {
    list.sort((a, b) => (value[b] ?? 0) - (value[a] ?? 0));
    let at = start;
    for (const f of list) {
      x[f] = at;
      depth[f] = d;
      at += value[f] ?? 0;
    }
  };
  place(children[0] ?? [], 0, 0);
  let maxDepth = -1;
  for (let f = 0; f < n; f++) {
    const d = depth[f] ?? 0;
    (byDepth[d] ??= []).push(f);
    maxDepth = Math.max(maxDepth, d);
    place(children[f + 1] ?? [], x[f] ?? 0, d + 1);
  }
  return { n, x, depth, byDepth, maxDepth, total: data.total };
}

/** The frames from the top frame down to `frame` (empty for the root). */
export function ancestry(data: FlameResponse, frame: number): number[] {
  const out: number[] = [];
  for (let f = frame; f >= 0 && out.length <= data.frames.parent.length; f = data.frames.parent[f] ?? -1) out.push(f);
  return out.reverse();
}

/** The visible range [start, end) in metric units when zoomed into `frame` (-1: the whole graph). */
export function zoomRange(data: FlameResponse, layout: FlameLayout, frame: number): [number, number] {
  if (frame < 0) return [0, layout.total];
  const start = layout.x[frame] ?? 0;
  return [start, start + (data.frames.value[frame] ?? 0)];
}

export interface SearchResult {
  matched: Uint8Array;
  count: number;
  /** the summed value of the matching frames, each counted once (a match inside a match is not added) */
  value: number;
}

export function searchFrames(data: FlameResponse, query: string): SearchResult {
  const n = data.frames.name.length;
  const matched = new Uint8Array(n);
  const q = query.trim().toLowerCase();
  if (!q) return { matched, count: 0, value: 0 };
  const nameMatch = data.strings.map((s) => s.toLowerCase().includes(q));
  const covered = new Uint8Array(n); // a matching frame is at or above
  let count = 0;
  let value = 0;
  for (let f = 0; f < n; f++) {
    const p = data.frames.parent[f] ?? -1;
    const above = p >= 0 && covered[p] === 1;
    if (nameMatch[data.frames.name[f] ?? 0]) {
      matched[f] = 1;
      count++;
      if (!above) value += data.frames.value[f] ?? 0;
    }
    covered[f] = above || matched[f] === 1 ? 1 : 0;
  }
  return { matched, count, value };
}

/** Colours by kind: the user's own code warm, library code cool, operators and device work apart. */
export const KIND_COLORS: Record<FrameKindName, string> = {
  user: "#f08a4b",
  library: "#8fb0d8",
  builtin: "#b9bec7",
  module: "#9ccc65",
  operator: "#f5cd5b",
  annotation: "#c9a0dc",
  runtime: "#7fcdc4",
  device: "#ef6b6b",
  other: "#c8c8c8",
};

export const KIND_LABELS: Record<FrameKindName, string> = {
  user: "Your code",
  library: "Library (torch, site-packages, stdlib)",
  builtin: "Built-in / C function",
  module: "nn.Module",
  operator: "Operator",
  annotation: "record_function / step",
  runtime: "CUDA runtime / driver call",
  device: "Kernel / memcpy / memset",
  other: "Other",
};

/** A frame's fill: its kind's colour, a little lighter or darker by name so neighbours stay apart. */
export function frameColor(kind: FrameKindName, name: string): string {
  let hash = 0;
  for (let i = 0; i < name.length; i++) hash = (hash * 31 + name.charCodeAt(i)) | 0;
  const base = KIND_COLORS[kind];
  const shift = ((hash >>> 0) % 21) - 10; // -10 … +10
  const channel = (i: number): number => Math.max(0, Math.min(255, parseInt(base.slice(i, i + 2), 16) + shift * 2));
  return `rgb(${channel(1)}, ${channel(3)}, ${channel(5)})`;
}

export const METRICS: { id: FlameMetric; label: string; help: string }[] = [
  { id: "self_host_us", label: "Self host time", help: "Self time on the host of every operator, record_function region and CUDA runtime call, under the Python stack that called it." },
  { id: "self_device_us", label: "Self device time", help: "Duration of every kernel, memcpy and memset, under the operator that launched it." },
  { id: "calls", label: "Calls", help: "One per operator or record_function region." },
  { id: "alloc_bytes", label: "Allocated bytes", help: "Bytes of every allocation (profile_memory=True), under the operator that allocated them." },
];
