/**
 * The Trace view's selection and side panel: the selected event (its details from `./trace/event`, newest
 * request wins), its flow arrows, revealing an event (a search hit, a link of the details) by unfolding its
 * track, zooming until it can be seen and scrolling to its lane, and the keyboard help shown when nothing is.
 */
import type { Api } from "../../api";
import { flowEnds, locate, type EventBrief, type WindowData } from "./traceData";
import { detailsPanel, errorPanel, hintPanel, helpOpen, loadingPanel, rememberHelp, setPanel, type DetailsHooks } from "./traceDetails";
import type { TraceElements } from "./traceElements";
import type { FlowArrow } from "./traceRenderer";
import type { Selected, TraceActions, TraceState } from "./traceState";
import { plotWidth, type ViewRange } from "./traceViewport";

export interface SelectionHooks {
  api: Api;
  ids: { run: string; worker: string; span: string };
  signal: AbortSignal;
}

/** Flow arrows to and from the selected event: the window's flows, else the details' partners (each pair once). */
export function selectionArrows(sel: Selected | null, data: WindowData | null): FlowArrow[] {
  if (!sel) return [];
  const depthOf = (id: number): number | null => (data ? (locate(data, id)?.depth ?? null) : null);
  const out: FlowArrow[] = [];
  const seen = new Set<string>();
  const add = (src: number, srcTrack: number | null, srcT: number, dst: number, dstTrack: number | null, dstT: number): void => {
    const key = `${src}>${dst}`;
    if (seen.has(key) || srcTrack === null || dstTrack === null) return;
    seen.add(key);
    out.push({ from: { track: srcTrack, depth: src === sel.id ? sel.depth : depthOf(src), t: srcT },
               to: { track: dstTrack, depth: dst === sel.id ? sel.depth : depthOf(dst), t: dstT } });
  };
  if (data) {
    for (const flow of data.flows) {
      const f = flowEnds(flow);
      if (f.srcId === sel.id || f.dstId === sel.id) add(f.srcId, f.srcTrack, data.t0 + f.srcT, f.dstId, f.dstTrack, data.t0 + f.dstT);
    }
  }
  const d = sel.details;
  if (d) {
    if (d.launched_by) add(d.launched_by.id, d.launched_by.track, d.launched_by.start_us, d.id, d.track, d.start_us);
    for (const k of d.launched ?? []) add(d.id, d.track, d.start_us, k.id, k.track, k.start_us);
  }
  return out;
}

/**
 * The view that shows an event: zoomed in to 12 times its length (20 µs at least) when it would be under 4 px,
 * out when it fills 90 % of the view, centred when it is off screen; else the view itself (`view`, unchanged).
 */
export function revealTarget(brief: Pick<EventBrief, "start_us" | "dur_us">, view: ViewRange, plotW: number): ViewRange {
  const span = view.end - view.start;
  const pxPerUs = plotW / span;
  if (brief.dur_us * pxPerUs < 4) {
    const next = Math.max(brief.dur_us * 12, 20);
    const c = brief.start_us + brief.dur_us / 2;
    return { start: c - next / 2, end: c + next / 2 };
  }
  if (brief.dur_us > span * 0.9) return { start: brief.start_us - brief.dur_us * 0.1, end: brief.start_us + brief.dur_us * 1.1 };
  if (brief.start_us < view.start || brief.start_us + brief.dur_us > view.end) {
    const c = brief.start_us + brief.dur_us / 2;
    return { start: c - span / 2, end: c + span / 2 };
  }
  return view;
}

export class TraceSelection {
  private detailsToken = 0;
  /** a revealed event whose lane the window in hand lacks: scrolled to once a window has it */
  private pendingReveal: { id: number; track: number | null } | null = null;
  /** a search hit to reveal once the first window (and so the view) is known */
  private revealAfterLoad: EventBrief | null = null;
  private help = helpOpen();

  constructor(private readonly el: TraceElements, private readonly s: TraceState, private readonly act: TraceActions,
    private readonly hooks: SelectionHooks) {}

  select(brief: EventBrief, depth: number | null = null): void {
    const token = ++this.detailsToken;
    this.s.selection = { id: brief.id, name: brief.name, track: brief.track, depth, start: brief.start_us, dur: brief.dur_us, details: null };
    this.s.arrows = selectionArrows(this.s.selection, this.s.data);
    this.act.markDirty();
    setPanel(this.el.details, loadingPanel(brief.name));
    this.updateSide();
    const { signal } = this.hooks;
    this.hooks.api
      .get("trace/event", { ...this.hooks.ids, id: brief.id }, { signal })
      .then((ev) => {
        const sel = this.s.selection;
        if (token !== this.detailsToken || !sel) return;
        sel.details = ev;
        sel.track = ev.track;
        sel.start = ev.start_us;
        sel.dur = ev.dur_us;
        this.s.arrows = selectionArrows(sel, this.s.data);
        setPanel(this.el.details, detailsPanel(ev, this.detailsHooks()));
        this.act.markDirty();
      })
      .catch((err: unknown) => {
        if (token !== this.detailsToken || signal.aborted) return;
        setPanel(this.el.details, errorPanel(err instanceof Error ? err.message : String(err)));
      });
  }

  clear(): void {
    if (!this.s.selection) return;
    this.detailsToken++;
    this.s.selection = null;
    this.s.arrows = [];
    this.showHint();
    this.act.markDirty();
  }

  private detailsHooks(): DetailsHooks {
    return {
      traceStart: this.s.bounds?.[0] ?? 0,
      trackLabel: (id) => (id === null ? "—" : (this.s.tracksMeta.find((t) => t.id === id)?.label ?? `track ${id}`)),
      reveal: (b) => { this.reveal(b); },
      zoomToSelected: () => { this.zoomToSelected(); },
    };
  }

  /** Select an event and bring it into view (zooming in when it would be too thin to see). */
  reveal(brief: EventBrief): void {
    const { view, data } = this.s;
    if (!view || !data) {
      this.revealAfterLoad = brief;
      this.select(brief);
      return;
    }
    if (brief.track !== null) this.unfold(brief.track);
    const loc = locate(data, brief.id);
    this.select(brief, loc?.depth ?? null);
    this.pendingReveal = { id: brief.id, track: brief.track };
    const target = revealTarget(brief, view, plotWidth({ width: this.s.width, labelW: this.s.labelW() }));
    if (target !== view) this.act.animateTo(target);
    else this.act.requestWindow(false);
    if (brief.track !== null) this.act.scrollToLane(brief.track, loc?.depth ?? 0, loc === null);
    if (loc) this.pendingReveal = null;
  }

  /** Unfold a track's process and show all its lanes, so a revealed event on it can be seen. */
  private unfold(track: number): void {
    const meta = this.s.tracksMeta.find((t) => t.id === track);
    if (!meta) return;
    let changed = false;
    if (this.s.folded.has(meta.process)) {
      this.s.folded.delete(meta.process);
      changed = true;
    }
    if (this.s.levels.has(meta.id)) {
      this.s.levels.delete(meta.id);
      changed = true;
    }
    if (changed) this.act.relayout();
  }

  /** A new window: a reveal that waited for it, the selection's lane and arrows in it, a lane to scroll to. */
  onWindow(data: WindowData): void {
    if (this.revealAfterLoad) {
      const brief = this.revealAfterLoad;
      this.revealAfterLoad = null;
      this.reveal(brief);
    }
    const sel = this.s.selection;
    if (sel) {
      const loc = locate(data, sel.id);
      if (loc) sel.depth = loc.depth;
      this.s.arrows = selectionArrows(sel, data);
    }
    if (this.pendingReveal) {
      const loc = locate(data, this.pendingReveal.id);
      if (loc) {
        this.act.scrollToLane(loc.track, loc.depth);
        this.pendingReveal = null;
      }
    }
  }

  zoomToEvent(start: number, dur: number): void {
    const pad = Math.max(dur * 0.12, 0.05);
    this.act.animateTo({ start: start - pad, end: start + dur + pad });
  }

  zoomToSelected(): void {
    const sel = this.s.selection;
    if (sel) this.zoomToEvent(sel.start, sel.dur);
  }

  /** With nothing selected, the side shows the keyboard help, unless the user closed it. */
  showHint(): void {
    setPanel(this.el.details, this.help ? hintPanel(() => { this.setHelp(false); }) : null);
    this.el.helpButton.setAttribute("aria-pressed", String(this.help));
    this.updateSide();
  }

  toggleHelp(): void {
    this.setHelp(!this.help);
  }

  private setHelp(open: boolean): void {
    this.help = open;
    rememberHelp(open);
    if (this.s.selection) this.el.helpButton.setAttribute("aria-pressed", String(open));
    else this.showHint();
  }

  /** An empty side column is removed, so the timeline takes the width. */
  updateSide(): void {
    const empty = this.el.details.hidden && this.el.rangePanel.hidden;
    if (this.el.side.hidden === empty) return;
    this.el.side.hidden = empty;
    this.el.body.classList.toggle("ptp-trace-body-wide", empty);
    this.act.resize();
  }
}
