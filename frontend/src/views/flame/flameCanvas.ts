/**
 * The Flame graph's canvas: draws the laid-out frames (flame: root at the bottom; icicle: at the top), zoomed
 * into one frame, with search matches highlighted, and answers which frame is under the pointer.
 * Thousands of frames draw in a few milliseconds: frames narrower than half a pixel are skipped.
 */
import { type FlameLayout, type FlameResponse, type FrameKindName, ancestry, frameColor, zoomRange } from "./flameData";

export const ROW_H = 18;
const MIN_PX = 0.5;
const TEXT_MIN_PX = 28;

export type Orientation = "flame" | "icicle";

/** A frame as drawn, in canvas CSS pixels (frame -1 is the root bar); for hit tests and the test hook. */
export interface DrawnFrame {
  frame: number;
  name: string;
  kind: string;
  value: number;
  x: number;
  y: number;
  w: number;
  h: number;
}

export class FlameCanvas {
  readonly el: HTMLCanvasElement;
  private data: FlameResponse | null = null;
  private layout: FlameLayout | null = null;
  private drawn: DrawnFrame[] = [];
  orientation: Orientation = "flame";
  zoom = -1;
  matched: Uint8Array | null = null;
  rootLabel = "all";

  constructor() {
    this.el = document.createElement("canvas");
    this.el.className = "ptp-flame-canvas";
    this.el.dataset["testid"] = "flame-canvas";
  }

  setData(data: FlameResponse, layout: FlameLayout): void {
    this.data = data;
    this.layout = layout;
    this.zoom = -1;
    this.matched = null;
  }

  framesOnScreen(): DrawnFrame[] {
    return this.drawn.slice();
  }

  /** The frame under a point in CSS pixels, or null. */
  hit(px: number, py: number): DrawnFrame | null {
    for (const d of this.drawn) if (px >= d.x && px < d.x + d.w && py >= d.y && py < d.y + d.h) return d;
    return null;
  }

  draw(width: number, colors: { match: string }): void {
    const data = this.data;
    const layout = this.layout;
    this.drawn = [];
    if (!data || !layout) return;
    const rows = layout.maxDepth + 2;
    const height = rows * ROW_H;
    const dpr = window.devicePixelRatio || 1;
    this.el.width = Math.max(1, Math.floor(width * dpr));
    this.el.height = Math.floor(height * dpr);
    this.el.style.width = `${width}px`;
    this.el.style.height = `${height}px`;
    const g = this.el.getContext("2d");
    if (!g) return;
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, width, height);
    g.font = "11px system-ui, sans-serif";
    g.textBaseline = "middle";
    const rowY = (row: number): number => (this.orientation === "flame" ? height - (row + 1) * ROW_H : row * ROW_H);
    const [z0, z1] = zoomRange(data, layout, this.zoom);
    const scale = z1 > z0 ? width / (z1 - z0) : 0;
    const path = new Set(ancestry(data, this.zoom));
    const zoomDepth = this.zoom >= 0 ? (layout.depth[this.zoom] ?? 0) : -1;
    const charW = g.measureText("M").width * 0.62 + 0.6;
    const box = (frame: number, name: string, kind: string, value: number, x: number, w: number, row: number): void => {
      const y = rowY(row);
      const searching = this.matched !== null;
      const hitMatch = frame >= 0 && searching && this.matched?.[frame] === 1;
      const faded = searching && frame >= 0 && !hitMatch; // a search fades the rest, keeping its colours
      g.globalAlpha = faded ? 0.3 : 1;
      g.fillStyle = hitMatch ? colors.match : frameColor(kind as FrameKindName, name);
      g.fillRect(x, y + 1, Math.max(w - 0.5, 0.5), ROW_H - 2);
      if (w >= TEXT_MIN_PX) {
        const chars = Math.floor((w - 6) / charW);
        const label = name.length > chars ? `${name.slice(0, Math.max(chars - 1, 1))}…` : name;
        g.fillStyle = hitMatch ? "#ffffff" : "#1b1b1b";
        g.fillText(label, x + 3, y + ROW_H / 2, w - 4);
      }
      g.globalAlpha = 1;
      this.drawn.push({ frame, name, kind, value, x, y: y + 1, w, h: ROW_H - 2 });
    };
    box(-1, this.rootLabel, "other", layout.total, 0, width, 0);
    const { name, value } = data.frames;
    for (let f = 0; f < layout.n; f++) {
      const d = layout.depth[f] ?? 0;
      const label = data.strings[name[f] ?? 0] ?? "";
      const kind = data.kinds[name[f] ?? 0] ?? "other";
      const v = value[f] ?? 0;
      if (path.has(f)) {
        box(f, label, kind, v, 0, width, d + 1); // the zoomed frame and its ancestors span the width
        continue;
      }
      if (d <= zoomDepth) continue;
      const start = layout.x[f] ?? 0;
      if (start < z0 - 1e-9 || start + v > z1 + 1e-6 * Math.max(1, z1)) continue;
      const w = v * scale;
      if (w < MIN_PX) continue;
      box(f, label, kind, v, (start - z0) * scale, w, d + 1);
    }
  }
}
