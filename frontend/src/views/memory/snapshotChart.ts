/**
 * The active-memory timeline of an allocator snapshot, on a canvas: each allocation a band from its alloc to its
 * free, stacked in allocation order and coloured by the frame that made it, the smaller allocations as one grey band
 * on top, the reserved bytes as a dashed line, the peak, the out-of-memory and the chosen moment marked.
 *
 * The server sends one window at the detail of the canvas's columns (./snapshot/timeline); the chart asks for a new
 * one when the user zooms (wheel, or a drag across it), so 100,000 history entries draw as quickly as 100. A hover
 * tells `onHover` what is under the pointer, a click `onPick` (a band pins it, and the moment moves there).
 * `window.__ptpSnapshot` (the tests read it) lists where each band is drawn.
 */
import { h } from "../../dom";
import { formatBytes } from "../../format";
import { OTHER_COLOR } from "../common/charts";
import {
  bandAt,
  bandRuns,
  byteTicks,
  columnOfPosition,
  drawnTop,
  frameColor,
  momentLabel,
  type SnapshotBand,
  type SnapshotWindow,
} from "./snapshotData";

export const CHART_HEIGHT = 340;
const PAD = { left: 70, right: 12, top: 18, bottom: 24 };

export interface ChartMarks {
  peak: number | null;
  oom: number | null;
  moment: number | null;
  pinned: number | null;
  startUs: number | null;
}

export interface ChartEvents {
  onHover(target: SnapshotBand | "other" | null, column: number, at: { x: number; y: number }): void;
  onPick(target: SnapshotBand | "other" | null, position: number): void;
  onZoom(columns: [number, number] | null, factor: number, column: number): void;
}

interface Colours { fg: string; muted: string; grid: string; accent: string; error: string; surface: string }

function colours(): Colours {
  const style = getComputedStyle(document.documentElement);
  const v = (name: string, fallback: string): string => style.getPropertyValue(name).trim() || fallback;
  return { fg: v("--ptp-fg", "#212121"), muted: v("--ptp-fg-muted", "#616161"), grid: "rgba(128, 128, 128, 0.18)",
    accent: v("--ptp-accent", "#f57c00"), error: v("--ptp-error", "#c62828"), surface: v("--ptp-surface", "#fff") };
}

export class SnapshotChart {
  readonly el: HTMLElement;
  readonly canvas: HTMLCanvasElement;
  private win: SnapshotWindow | null = null;
  private marks: ChartMarks = { peak: null, oom: null, moment: null, pinned: null, startUs: null };
  private hovered: number | null = null;
  private width = 800;
  private drag: { x0: number; x1: number } | null = null;

  constructor(private readonly events: ChartEvents) {
    this.canvas = h("canvas", { class: "ptp-snap-canvas", testid: "snapshot-canvas", attrs: { "aria-label": "Active memory over time" } });
    this.el = h("div", { class: "ptp-snap-chart", testid: "snapshot-chart" }, this.canvas);
    this.canvas.addEventListener("mousemove", (e) => { this.onMove(e); });
    this.canvas.addEventListener("mouseleave", () => { this.setHovered(null); this.events.onHover(null, -1, { x: 0, y: 0 }); });
    this.canvas.addEventListener("mousedown", (e) => { this.drag = { x0: e.offsetX, x1: e.offsetX }; });
    this.canvas.addEventListener("mouseup", (e) => { this.onUp(e); });
    this.canvas.addEventListener("dblclick", () => { this.events.onZoom(null, 1, 0); });
    this.canvas.addEventListener("wheel", (e) => {
      if (!this.win) return;
      e.preventDefault();
      this.events.onZoom(null, e.deltaY > 0 ? 1.6 : 1 / 1.6, this.columnAt(e.offsetX));
    }, { passive: false });
  }

  /** How many columns the plot area has room for (what to ask the server for). */
  columns(): number {
    return Math.max(16, Math.floor(this.width - PAD.left - PAD.right));
  }

  resize(width: number): void {
    this.width = Math.max(320, Math.floor(width));
    this.draw();
  }

  set(win: SnapshotWindow | null, marks: ChartMarks): void {
    this.win = win;
    this.marks = marks;
    this.el.dataset["start"] = win ? String(win.start) : "";
    this.el.dataset["end"] = win ? String(win.end) : "";
    this.el.dataset["bands"] = win ? String(win.bands.length) : "0";
    this.draw();
  }

  private plotWidth(): number {
    return this.width - PAD.left - PAD.right;
  }

  private yMax(): number {
    const w = this.win;
    if (!w) return 1;
    return Math.max(1, w.y_max, ...w.reserved_bytes);
  }

  private x(c: number): number {
    const n = this.win?.at.length ?? 1;
    return PAD.left + (c / Math.max(1, n)) * this.plotWidth();
  }

  private y(bytes: number): number {
    return PAD.top + (1 - bytes / this.yMax()) * (CHART_HEIGHT - PAD.top - PAD.bottom);
  }

  columnAt(px: number): number {
    const n = this.win?.at.length ?? 0;
    return Math.max(0, Math.min(n - 1, Math.floor(((px - PAD.left) / this.plotWidth()) * n)));
  }

  private bytesAt(py: number): number {
    return (1 - (py - PAD.top) / (CHART_HEIGHT - PAD.top - PAD.bottom)) * this.yMax();
  }

  private onMove(e: MouseEvent): void {
    if (!this.win) return;
    if (this.drag && e.buttons === 1) {
      this.drag.x1 = e.offsetX;
      this.draw();
      return;
    }
    const c = this.columnAt(e.offsetX);
    const target = e.offsetX < PAD.left ? null : bandAt(this.win, c, this.bytesAt(e.offsetY));
    this.setHovered(target && target !== "other" ? target.id : null);
    this.events.onHover(target, c, { x: e.offsetX, y: e.offsetY });
  }

  private onUp(e: MouseEvent): void {
    const drag = this.drag;
    this.drag = null;
    if (!this.win) return;
    if (drag && Math.abs(drag.x1 - drag.x0) > 6) {
      this.events.onZoom([this.columnAt(drag.x0), this.columnAt(drag.x1)], 1, 0);
      return;
    }
    const c = this.columnAt(e.offsetX);
    const target = e.offsetX < PAD.left ? null : bandAt(this.win, c, this.bytesAt(e.offsetY));
    this.events.onPick(target, this.win.at[c] ?? this.win.start);
  }

  private setHovered(id: number | null): void {
    if (id === this.hovered) return;
    this.hovered = id;
    this.draw();
  }

  draw(): void {
    const dpr = window.devicePixelRatio || 1;
    this.canvas.width = Math.round(this.width * dpr);
    this.canvas.height = Math.round(CHART_HEIGHT * dpr);
    this.canvas.style.width = `${this.width}px`;
    this.canvas.style.height = `${CHART_HEIGHT}px`;
    const g = this.canvas.getContext("2d");
    if (!g) return;
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, this.width, CHART_HEIGHT);
    const col = colours();
    this.drawAxes(g, col);
    if (!this.win || this.win.at.length === 0) return;
    this.drawBands(g);
    this.drawOther(g);
    this.drawReserved(g, col);
    this.drawMarks(g, col);
    if (this.drag) {
      g.fillStyle = "rgba(128, 128, 128, 0.2)";
      g.fillRect(Math.min(this.drag.x0, this.drag.x1), PAD.top, Math.abs(this.drag.x1 - this.drag.x0), CHART_HEIGHT - PAD.top - PAD.bottom);
    }
  }

  private drawAxes(g: CanvasRenderingContext2D, col: Colours): void {
    g.font = "11px sans-serif";
    g.fillStyle = col.muted;
    g.strokeStyle = col.grid;
    g.lineWidth = 1;
    g.textAlign = "right";
    g.textBaseline = "middle";
    for (const v of byteTicks(this.yMax())) {
      const y = Math.round(this.y(v)) + 0.5;
      g.beginPath();
      g.moveTo(PAD.left, y);
      g.lineTo(this.width - PAD.right, y);
      g.stroke();
      g.fillText(formatBytes(v), PAD.left - 6, y);
    }
    const w = this.win;
    if (!w || w.at.length === 0) return;
    g.textAlign = "center";
    g.textBaseline = "top";
    const n = w.at.length;
    for (let k = 0; k <= 4; k++) {
      const c = Math.min(n - 1, Math.round((k / 4) * (n - 1)));
      const label = momentLabel(w.at[c] ?? 0, w.time_us[c], this.marks.startUs);
      g.textAlign = k === 0 ? "left" : k === 4 ? "right" : "center";
      g.fillText(label, this.x(c + 0.5), CHART_HEIGHT - PAD.bottom + 6);
    }
  }

  private drawBands(g: CanvasRenderingContext2D): void {
    const w = this.win;
    if (!w) return;
    for (const b of w.bands) {
      const label = w.frames[b.frame]?.label ?? "";
      const highlighted = b.id === this.hovered || b.id === this.marks.pinned;
      g.fillStyle = frameColor(label);
      g.globalAlpha = highlighted ? 1 : 0.82;
      for (const [c0, c1, off] of bandRuns(b)) {
        const x0 = this.x(c0);
        const top = this.y(off + b.size);
        g.fillRect(x0, top, Math.max(1, this.x(c1) - x0), Math.max(1, this.y(off) - top));
      }
      if (highlighted) this.outline(g, b);
    }
    g.globalAlpha = 1;
  }

  private outline(g: CanvasRenderingContext2D, b: SnapshotBand): void {
    g.strokeStyle = b.id === this.marks.pinned ? "#000" : "#444";
    g.lineWidth = b.id === this.marks.pinned ? 2 : 1;
    for (const [c0, c1, off] of bandRuns(b)) {
      g.strokeRect(this.x(c0), this.y(off + b.size), this.x(c1) - this.x(c0), this.y(off) - this.y(off + b.size));
    }
  }

  private drawOther(g: CanvasRenderingContext2D): void {
    const w = this.win;
    if (!w) return;
    g.fillStyle = OTHER_COLOR;
    g.globalAlpha = 0.55;
    for (let c = 0; c < w.at.length; c++) {
      const other = w.other_bytes[c] ?? 0;
      if (other <= 0) continue;
      const top = this.y(w.live_bytes[c] ?? 0);
      g.fillRect(this.x(c), top, Math.max(1, this.x(c + 1) - this.x(c)), Math.max(0.5, this.y(drawnTop(w, c)) - top));
    }
    g.globalAlpha = 1;
  }

  private drawReserved(g: CanvasRenderingContext2D, col: Colours): void {
    const w = this.win;
    if (!w) return;
    g.strokeStyle = col.muted;
    g.setLineDash([4, 3]);
    g.beginPath();
    for (let c = 0; c < w.at.length; c++) {
      const y = this.y(w.reserved_bytes[c] ?? 0);
      if (c === 0) g.moveTo(this.x(c), y);
      else g.lineTo(this.x(c), y);
      g.lineTo(this.x(c + 1), y);
    }
    g.stroke();
    g.setLineDash([]);
  }

  private drawMarks(g: CanvasRenderingContext2D, col: Colours): void {
    const w = this.win;
    if (!w) return;
    const mark = (p: number | null, colour: string, label: string, dash: number[], row: number): void => {
      const c = p === null ? -1 : columnOfPosition(w, p);
      if (c < 0) return;
      const x = Math.round(this.x(c + 0.5)) + 0.5;
      g.strokeStyle = colour;
      g.lineWidth = 1.5;
      g.setLineDash(dash);
      g.beginPath();
      g.moveTo(x, PAD.top);
      g.lineTo(x, CHART_HEIGHT - PAD.bottom);
      g.stroke();
      g.setLineDash([]);
      if (label) {
        g.fillStyle = colour;
        g.font = "bold 11px sans-serif";
        g.textAlign = x > this.width - 140 ? "right" : "left";
        g.textBaseline = "top";
        g.fillText(label, x + (g.textAlign === "right" ? -4 : 4), 1 + 8 * row);
      }
    };
    mark(this.marks.peak, col.fg, "peak", [3, 3], 0);
    mark(this.marks.oom, col.error, "out of memory", [], 1);
    mark(this.marks.moment, col.accent, "", [], 0);
  }

  /** Where each band is drawn, in CSS pixels of the canvas (the browser tests hover them). */
  bandsOnScreen(): { id: number; frame: string; x: number; y: number; w: number; h: number }[] {
    const w = this.win;
    if (!w) return [];
    return w.bands.flatMap((b) => bandRuns(b).map(([c0, c1, off]) => ({
      id: b.id, frame: w.frames[b.frame]?.label ?? "", x: this.x(c0), w: this.x(c1) - this.x(c0),
      y: this.y(off + b.size), h: this.y(off) - this.y(off + b.size),
    })));
  }
}
