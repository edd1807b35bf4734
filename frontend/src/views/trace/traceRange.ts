/**
 * The Trace view's range selection: a box drawn with Shift+drag (or in the select mode) becomes a time range over
 * the tracks it spans (all of them when it spans none or every one); the side panel then shows `./trace/range`'s
 * summary of it (newest request wins), with zoom, clear and search-a-name actions.
 */
import type { Api } from "../../api";
import type { Query } from "../../types";
import { errorPanel, rangeLoading, rangePanel, setPanel, type RangeHooks } from "./traceDetails";
import type { TraceElements } from "./traceElements";
import type { Row } from "./traceLayout";
import type { RangeMark } from "./traceRenderer";
import type { TraceActions, TraceState } from "./traceState";

export interface RangeControllerHooks {
  api: Api;
  ids: { run: string; worker: string; span: string };
  signal: AbortSignal;
}

/**
 * The tracks a box from y0 to y1 (rows' coordinates) spans, sorted; a folded process counts as its tracks. Null
 * (every track) when the box has no vertical extent, spans no track, or spans all `trackCount` of them.
 */
export function rangeTracks(rows: readonly Row[], r: Pick<RangeMark, "y0" | "y1">, trackCount: number): number[] | null {
  if (r.y0 === null || r.y1 === null) return null;
  const tracks = new Set<number>();
  for (const row of rows) {
    if (row.y + row.h <= r.y0 || row.y >= r.y1) continue;
    if (row.kind === "track") tracks.add(row.track.id);
    else if (row.kind === "process" && row.folded) for (const id of row.trackIds) tracks.add(id);
  }
  if (tracks.size === 0 || tracks.size >= trackCount) return null;
  return [...tracks].sort((a, b) => a - b);
}

export class TraceRange {
  private token = 0;

  constructor(private readonly el: TraceElements, private readonly s: TraceState, private readonly act: TraceActions,
    private readonly hooks: RangeControllerHooks) {}

  /** The range drawn is done: which tracks it covers, then its summary in the side panel. */
  commit(): void {
    const r = this.s.range;
    if (!r) return;
    const tracks = rangeTracks(this.s.layout.rows, r, this.s.tracksMeta.length);
    if (tracks === null) this.s.range = { ...r, y0: null, y1: null };
    this.s.rangeTracks = tracks;
    this.el.zoomSelection.disabled = false;
    const token = ++this.token;
    const scope = tracks === null ? "all tracks" : `${tracks.length} track${tracks.length === 1 ? "" : "s"}`;
    const hooks: RangeHooks = {
      traceStart: this.s.bounds?.[0] ?? 0,
      zoom: () => { this.zoomTo(); },
      clear: () => { this.clear(); },
      search: (name) => { this.act.runSearch(name); },
      scope,
    };
    setPanel(this.el.rangePanel, rangeLoading(r.start, r.end, hooks));
    this.act.updateSide();
    const params: Query<"trace/range"> = { ...this.hooks.ids, start_us: Number(r.start.toFixed(3)), end_us: Number(r.end.toFixed(3)) };
    if (tracks) params.tracks = tracks.join(",");
    const { signal } = this.hooks;
    this.hooks.api
      .get("trace/range", params, { signal, timeoutMs: 120_000 })
      .then((resp) => {
        if (token === this.token) setPanel(this.el.rangePanel, rangePanel(resp, hooks));
      })
      .catch((err: unknown) => {
        if (token !== this.token || signal.aborted) return;
        setPanel(this.el.rangePanel, errorPanel(err instanceof Error ? err.message : String(err)));
      });
    this.act.markDirty();
  }

  clear(): void {
    this.token++;
    this.s.range = null;
    this.s.rangeTracks = null;
    this.el.zoomSelection.disabled = true;
    setPanel(this.el.rangePanel, null);
    this.act.updateSide();
    this.act.markDirty();
  }

  zoomTo(): void {
    const r = this.s.range;
    if (!r) return;
    const pad = (r.end - r.start) * 0.03;
    this.act.animateTo({ start: r.start - pad, end: r.end + pad });
  }
}
