/**
 * What the Trace view's controllers share: the state of one page (the view, the window in hand, the layout, the
 * selection, the range) and the actions each controller may ask of the view that owns them. The controllers
 * (traceInput, traceSelection, traceRange, traceToolbar, tracePainter) read and change the state; the view
 * (trace.ts) fetches windows, lays out the tracks and moves the view.
 */
import type { Category } from "../common/stepCategories";
import type { EventBrief, Step, TraceEventResponse, TrackMeta, WindowData } from "./traceData";
import type { Layout, Row } from "./traceLayout";
import type { Colours, FlowArrow, Hit, RangeMark, Scene } from "./traceRenderer";
import type { Glide, ViewRange } from "./traceViewport";

/** The selected event, with its details once `./trace/event` answered. */
export interface Selected {
  id: number;
  name: string;
  track: number | null;
  depth: number | null;
  start: number;
  dur: number;
  details: TraceEventResponse | null;
}

export class TraceState {
  view: ViewRange | null = null;
  bounds: [number, number] | null = null;
  data: WindowData | null = null;
  layout: Layout = { rows: [], height: 0, trackRows: new Map(), hiddenTracks: new Set() };
  tracksMeta: TrackMeta[] = [];
  /** lanes shown of each track that does not show all of them (1: collapsed) */
  readonly levels = new Map<number, number>();
  /** levels left out above a track's first lane (a spawn job's frames above its steps), see TraceView.adoptLevels */
  readonly skips = new Map<number, number>();
  /** processes folded to one row */
  readonly folded = new Set<string>();
  steps: Step[] = [];
  readonly counterScale = new Map<string, number>();
  selection: Selected | null = null;
  arrows: FlowArrow[] = [];
  hover: Hit | null = null;
  range: RangeMark | null = null;
  /** the tracks the committed range covers (null: all) */
  rangeTracks: number[] | null = null;
  /** what a plain drag does */
  mode: "pan" | "select" = "pan";
  allFlows = false;
  width = 0;
  height = 0;
  dpr = 1;
  anim: Glide | null = null;
  /** the step-breakdown category highlighted (URL key `cat`, from the Overview's breakdown); null: none */
  category: Category | null = null;

  constructor(public colours: Colours) {}

  /** The label column's width for the canvas width. */
  labelW(): number {
    return Math.round(Math.min(260, Math.max(150, this.width * 0.17)));
  }
}

/** What the controllers ask of the Trace view. */
export interface TraceActions {
  markDirty(): void;
  scene(): Scene | null;
  setView(v: ViewRange): void;
  animateTo(target: ViewRange): void;
  fit(): void;
  zoomAt(factor: number, x: number | null): void;
  panBy(dt: number): void;
  pxToUs(px: number): number;
  /** ask for the window of the view (unless the one in hand covers it, or `force`) */
  requestWindow(force: boolean): void;
  relayout(): void;
  resize(): void;
  scrollToLane(track: number, depth: number, rough?: boolean): void;
  /** select an event and bring it into view */
  reveal(brief: EventBrief): void;
  revealStep(name: string): void;
  select(brief: EventBrief, depth?: number | null): void;
  clearSelection(): void;
  zoomToSelected(): void;
  zoomToEvent(start: number, dur: number): void;
  clearRange(): void;
  commitRange(): void;
  zoomToRange(): void;
  toggleRow(row: Row): void;
  showAbove(track: number, lanes: number): void;
  showLevels(track: number, levels: "more" | "fewer"): void;
  runSearch(query: string): void;
  updateSide(): void;
  updateCursor(hit: Hit | null): void;
  hideTooltip(): void;
}
