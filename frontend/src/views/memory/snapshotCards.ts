/**
 * The cards of the Memory view's snapshot mode around its timeline: what the snapshot is (peak, live, reserved,
 * the out-of-memory and its verdict, findings), what is live at the chosen moment (grouped by the frame that made
 * it, by stack or by category), the pinned allocation with its stacks and neighbours, and the segments then.
 */
import { card, infoIcon } from "../../components";
import { type Child, h, replaceChildren } from "../../dom";
import { formatBytes, formatInt, formatPercent } from "../../format";
import { frameList } from "../common/callStack";
import type { Data, Figure, Layout } from "../common/charts";
import { bytesColumn } from "../common/columns";
import type { Frame, SourceFile, SourceIndex } from "../common/sourceFrames";
import { clampedName, type Column, DataTable } from "../common/table";
import {
  fragmentationText,
  frameColor,
  lifetimeText,
  momentLabel,
  oomSentence,
  type SnapshotAllocation,
  type SnapshotAllocationDetails,
  type SnapshotFinding,
  type SnapshotLive,
  type SnapshotSegments,
  type SnapshotStackFrame,
  type SnapshotSummary,
} from "./snapshotData";

export const SNAPSHOT_HELP = {
  live: "Requested bytes of the allocations live at that moment: allocated and not yet freed (free_completed), as torch's requested_bytes counts them.",
  reserved: "Bytes the caching allocator holds from the device (its segments), live or cached for reuse.",
  peak: "The most live bytes over the recorded history.",
  category: "Inferred from each allocation's stack: the optimizer's frames, backward (Tensor.backward or the autograd engine), module set-up, forward; and from its lifetime (docs/guide/memory.md gives the rules).",
  frame: "The frame that made the allocation: the innermost frame of your own code, else the innermost Python frame, else the autograd node (backward allocations run on the autograd engine's thread, without Python frames).",
  fragmentation: "1 − largest free block ÷ free bytes in the reserved segments: 0 when the free memory is one block, near 100 % when it is many small ones.",
};

/** A snapshot's stack as the plugin's frame list takes it: its frames, and which file is whose. */
export function stackFrames(stack: readonly SnapshotStackFrame[]): { frames: Frame[]; index: SourceIndex } {
  const index = new Map<string, SourceFile>();
  const frames = stack.map((f) => {
    const kind = f.kind === "cpp" ? "library" : f.kind;
    index.set(f.file, { path: f.file, kind, absolute: f.file.startsWith("/") ? f.file : null });
    return { raw: `${f.file}(${f.line}): ${f.name}`, path: f.file, line: f.line, func: f.name };
  });
  return { frames, index };
}

export function stackList(stack: readonly SnapshotStackFrame[], limit = 8): HTMLElement {
  if (stack.length === 0) return h("p", { class: "ptp-muted" }, "No stack was recorded for it (allocated before recording began, or recorded with context=None).");
  const { frames, index } = stackFrames(stack);
  return frameList(frames, limit, index);
}

function stat(label: string, value: string, help: string, testid: string, bytes?: number): HTMLElement {
  return h(
    "div",
    { class: "ptp-snap-stat", testid, dataset: bytes === undefined ? {} : { bytes: String(bytes) } },
    h("div", { class: "ptp-muted" }, label, " ", infoIcon(help)),
    h("div", { class: "ptp-snap-stat-value" }, value),
  );
}

/** The head card: the snapshot's figures, its out-of-memory verdict and its findings. */
export function summaryCard(s: SnapshotSummary, deviceSelect: HTMLElement | null, go: (position: number) => void): HTMLElement {
  const peakStep = s.peak.step !== null ? ` (step ${s.peak.step})` : "";
  const startUs = s.start_us;
  const button = (label: string, position: number, testid: string): HTMLElement =>
    h("button", { class: "ptp-button", testid, attrs: { type: "button" }, onClick: () => { go(position); } }, label);
  const oom = s.oom;
  return card(
    { testid: "card-snapshot" },
    h("div", { class: "ptp-card-head" }, h("h3", {}, "Allocator snapshot"), h("span", { class: "ptp-muted ptp-break" }, s.file),
      deviceSelect, h("span", { class: "ptp-toolbar-gap" }),
      oom ? button("Go to the out-of-memory", oom.position, "snapshot-go-oom") : null,
      button("Go to the peak", s.peak.position, "snapshot-go-peak")),
    h("div", { class: "ptp-snap-stats" },
      stat("Peak live", `${formatBytes(s.peak_live_bytes)}${peakStep}`, SNAPSHOT_HELP.peak, "snapshot-peak", s.peak_live_bytes),
      stat("Live at the end", formatBytes(s.live_bytes), SNAPSHOT_HELP.live, "snapshot-live", s.live_bytes),
      stat("Reserved at the end", formatBytes(s.reserved_bytes), SNAPSHOT_HELP.reserved, "snapshot-reserved", s.reserved_bytes),
      stat("History", `${formatInt(s.positions)} entries, ${formatInt(s.allocations)} allocations`,
        "The allocator's recorded actions on this device (alloc, free, segment changes, out-of-memory); each is a moment of the timeline.", "snapshot-entries")),
    oom ? h("div", { class: "ptp-snap-oom", testid: "snapshot-oom", dataset: { reason: oom.reason, position: String(oom.position) } },
      h("strong", {}, "Out of memory"), ` at ${momentLabel(oom.position, oom.time_us, startUs)}. `, oomSentence(oom)) : null,
    s.findings.length ? h("ul", { class: "ptp-snap-findings", testid: "snapshot-findings" }, s.findings.map((f) => findingItem(f, go))) : null,
    s.notes.length ? h("p", { class: "ptp-muted" }, s.notes.join(" ")) : null,
  );
}

function findingItem(f: SnapshotFinding, go: (position: number) => void): HTMLElement {
  return h("li", { testid: "snapshot-finding", dataset: { kind: f.kind } },
    h("strong", {}, f.title), ": ", f.headline, " ", h("span", { class: "ptp-muted" }, f.advice), " ",
    h("button", { class: "ptp-link-button", attrs: { type: "button" }, onClick: () => { go(f.position); } }, "show"));
}

type Group = SnapshotLive["groups"][number];

function groupColumns(by: string): Column<Group>[] {
  const name: Column<Group> = {
    key: "label", label: by === "category" ? "Category" : by === "stack" ? "Stack (by its frame)" : "Frame", help: SNAPSHOT_HELP.frame,
    value: (g) => g.label, cls: "ptp-name-col",
    render: (g) => h("span", { class: "ptp-snap-swatch-row" }, by === "category" ? null : h("span", { class: "ptp-snap-swatch", style: { background: frameColor(g.label) } }), clampedName(g.label, "snapshot-group")),
  };
  return [
    name,
    bytesColumn<Group>("bytes", "Live", SNAPSHOT_HELP.live, (g) => g.bytes),
    { key: "share", label: "Share", numeric: true, value: (g) => g.share, text: (g) => formatPercent(g.share) },
    { key: "count", label: "Allocations", numeric: true, value: (g) => g.count, text: (g) => formatInt(g.count) },
    { key: "category", label: "Mostly", help: SNAPSHOT_HELP.category, value: (g) => g.category ?? "", text: (g) => g.category ?? "—" },
  ];
}

function allocationColumns(startUs: number | null): Column<SnapshotAllocation>[] {
  return [
    { key: "frame", label: "Made by", help: SNAPSHOT_HELP.frame, value: (a) => a.frame, cls: "ptp-name-col",
      render: (a) => h("span", { class: "ptp-snap-swatch-row" }, h("span", { class: "ptp-snap-swatch", style: { background: frameColor(a.frame) } }), clampedName(a.frame, "snapshot-alloc-frame")) },
    bytesColumn<SnapshotAllocation>("size", "Size", "Requested bytes.", (a) => a.size_bytes),
    { key: "category", label: "Category", help: SNAPSHOT_HELP.category, value: (a) => a.category },
    { key: "lifetime", label: "Lifetime", value: (a) => a.lifetime_us ?? null, numeric: true, text: (a) => lifetimeText(a, startUs) },
  ];
}

/** The live set at the chosen moment: grouped, by category, and its largest allocations (a click pins one). */
export class LiveCard {
  readonly el: HTMLElement;
  readonly groupSelect: HTMLSelectElement;
  private readonly head = h("p", { class: "ptp-muted ptp-card-sub", testid: "snapshot-live-head", attrs: { "aria-live": "polite" } });
  private readonly cats = h("div", { class: "ptp-snap-cats", testid: "snapshot-live-categories" });
  private readonly groups: DataTable<Group>;
  private readonly allocs: DataTable<SnapshotAllocation>;

  constructor(csvName: (what: string) => () => string, onGroup: (by: string) => void, private readonly onPin: (a: SnapshotAllocation) => void) {
    this.groupSelect = h("select", { testid: "snapshot-group-by", attrs: { "aria-label": "Group by" }, onChange: () => { onGroup(this.groupSelect.value); } },
      [["frame", "Frame that made it"], ["stack", "Whole stack"], ["category", "Category"]].map(([v, l]) => h("option", { attrs: { value: v } }, l)));
    this.groups = new DataTable<Group>({ testid: "snapshot-groups", csvName: csvName("snapshot_live_groups"), controls: h("label", { class: "ptp-picker" }, "Group by", this.groupSelect), pageSize: 15 });
    this.allocs = new DataTable<SnapshotAllocation>({ testid: "snapshot-allocations", csvName: csvName("snapshot_live_allocations"), pageSize: 10 });
    this.allocs.el.addEventListener("click", (e) => { this.onRowClick(e); });
    this.el = card({ testid: "card-snapshot-live" },
      h("div", { class: "ptp-card-head" }, h("h3", {}, "Live at the moment"), infoIcon(SNAPSHOT_HELP.live)),
      this.head, this.cats, this.groups.el,
      h("h4", { class: "ptp-section-title" }, "Largest allocations (click one to pin it)"), this.allocs.el);
  }

  set(live: SnapshotLive, label: string, startUs: number | null): void {
    this.el.dataset["position"] = String(live.position);
    this.el.dataset["bytes"] = String(live.live_bytes);
    this.head.textContent = `${label}: ${formatInt(live.count)} allocations hold ${formatBytes(live.live_bytes)} of the ${formatBytes(live.reserved_bytes)} reserved.`;
    replaceChildren(this.cats, live.categories.map((c) => h("span", { class: "ptp-tag", testid: "snapshot-live-category", dataset: { category: c.category, bytes: String(c.bytes) } },
      `${c.category.replace("_", " ")} ${formatBytes(c.bytes)}`)));
    this.groupSelect.value = live.group_by;
    this.groups.setData({
      columns: groupColumns(live.group_by), rows: live.groups, sort: { key: "bytes", dir: "desc" }, rowKey: (g) => `${g.label}\u0000${g.bytes}`,
      expand: live.group_by === "category" ? null : { can: (g) => (g.stack?.length ?? 0) > 0, render: (g) => h("div", { class: "ptp-stacks" }, stackList(g.stack ?? [])), label: "Show the stack" },
    }, false);
    this.allocs.setData({ columns: allocationColumns(startUs), rows: live.allocations, sort: { key: "size", dir: "desc" }, rowKey: (a) => String(a.id) }, false);
  }

  private onRowClick(e: MouseEvent): void {
    const tr = e.target instanceof Element ? e.target.closest("tr") : null;
    const body = tr?.parentElement;
    if (!tr || !body || body.tagName !== "TBODY" || tr.dataset["testid"] !== "row") return;
    const index = [...body.children].filter((c) => c instanceof HTMLElement && c.dataset["testid"] === "row").indexOf(tr);
    const row = this.allocs.visibleRows()[index];
    if (row) this.onPin(row);
  }
}

function neighbourItem(a: SnapshotAllocation | null | undefined, what: string, startUs: number | null, pin: (a: SnapshotAllocation) => void): Child {
  if (!a) return null;
  return h("li", { testid: "snapshot-neighbour", dataset: { id: String(a.id) } }, `${what}: `,
    h("button", { class: "ptp-link-button", attrs: { type: "button" }, onClick: () => { pin(a); } }, `${formatBytes(a.size_bytes)} by ${a.frame}`),
    h("span", { class: "ptp-muted" }, ` (${a.category}; ${lifetimeText(a, startUs)})`));
}

/** The pinned allocation: its numbers, both stacks, and what lay around it at the moment. */
export function allocationCard(a: SnapshotAllocationDetails, startUs: number | null, pin: (a: SnapshotAllocation) => void, unpin: () => void): HTMLElement {
  const mem = a.memory;
  const around = [
    ...a.below.map((b) => neighbourItem(b, "below", startUs, pin)),
    ...a.above.map((b) => neighbourItem(b, "above", startUs, pin)),
  ];
  return card({ testid: "card-snapshot-allocation" },
    h("div", { class: "ptp-card-head" }, h("h3", {}, `Pinned: ${formatBytes(a.size_bytes)} by ${a.frame}`), h("span", { class: "ptp-toolbar-gap" }),
      h("button", { class: "ptp-button", testid: "snapshot-unpin", attrs: { type: "button" }, onClick: unpin }, "Unpin")),
    h("p", { class: "ptp-muted ptp-break", testid: "snapshot-pinned-summary", dataset: { id: String(a.id) } },
      `${a.category}; ${lifetimeText(a, startUs)}; ${a.block_bytes !== null ? `block ${formatBytes(a.block_bytes)}, ` : ""}stream ${a.stream}.`,
      a.stack_is_free ? " Allocated before recording began: the stack below is where it was freed." : ""),
    h("div", { class: "ptp-stacks", testid: "snapshot-pinned-stack" }, stackList(a.stack, 12)),
    a.free_stack.length ? h("details", {}, h("summary", {}, "Where it was freed"), stackList(a.free_stack, 8)) : null,
    h("h4", { class: "ptp-section-title" }, `Its neighbours at ${momentLabel(a.position, null, null)}`),
    mem ? h("p", { class: "ptp-muted", testid: "snapshot-pinned-memory" },
      `In a segment of ${formatBytes(mem.segment_bytes)} at offset ${formatBytes(mem.offset)}, its block ${formatBytes(mem.block_bytes)}; the segment has ${formatBytes(mem.segment_free_bytes)} free, its largest free block ${formatBytes(mem.segment_largest_free_bytes)}.`) : null,
    h("ul", { class: "ptp-snap-neighbours" }, neighbourItem(mem?.previous, "before it in memory", startUs, pin), neighbourItem(mem?.next, "after it in memory", startUs, pin), around),
  );
}

/** The segments at the moment: each a bar of its live blocks (coloured by frame) and free ranges. */
export function segmentsBody(s: SnapshotSegments, limit = 40): HTMLElement {
  const head = h("p", { class: "ptp-muted", testid: "snapshot-segments-head", dataset: { free: String(s.free_bytes), largest: String(s.largest_free_bytes) } },
    `${formatInt(s.segment_count)} segments reserve ${formatBytes(s.reserved_bytes)}: ${formatBytes(s.live_bytes)} live, ${formatBytes(s.free_bytes)} free, the largest free block ${formatBytes(s.largest_free_bytes)} (fragmentation ${fragmentationText(s.free_bytes, s.largest_free_bytes)}).`,
    s.exact ? "" : " Blocks before the end are replayed from the history: free space is counted to the allocator's 512-byte rounding.");
  const bars = s.segments.slice(0, limit).map((seg) => h("div", { class: "ptp-snap-seg", testid: "snapshot-segment", dataset: { bytes: String(seg.bytes), largest: String(seg.largest_free_bytes) } },
    h("div", { class: "ptp-snap-seg-label ptp-muted" }, `${formatBytes(seg.bytes)}${seg.expandable ? " (expandable)" : ""} · free ${formatBytes(seg.free_bytes)}, largest ${formatBytes(seg.largest_free_bytes)}`),
    h("div", { class: "ptp-snap-seg-bar" }, seg.blocks.map((b) => h("span", {
      class: b.state === "free" ? "ptp-snap-block ptp-snap-free" : "ptp-snap-block",
      title: b.state === "free" ? `free ${formatBytes(b.bytes)}` : `${formatBytes(b.size_bytes ?? b.bytes)} by ${b.frame ?? "?"} (${b.category ?? "?"})`,
      style: { width: `${(100 * b.bytes) / Math.max(1, seg.bytes)}%`, background: b.state === "free" ? undefined : frameColor(b.frame ?? "") },
    })))));
  const more = s.segments.length > limit ? h("p", { class: "ptp-muted" }, `${s.segments.length - limit} smaller segments not drawn.`) : null;
  return h("div", {}, head, bars, more);
}

/** Free bytes in the reserved segments and their largest free block over the history, the moment marked. */
export function fragmentationFigure(s: SnapshotSummary, moment: number | null): Figure {
  const f = s.fragmentation;
  const mib = 2 ** 20;
  const data: Data[] = [
    { type: "scatter", mode: "lines", name: "Free in reserved", x: f.position, y: f.free_bytes.map((b) => b / mib),
      line: { color: "#f28e2b", width: 1.5 }, hovertemplate: "free %{y:.1f} MiB at entry %{x}<extra></extra>" },
    { type: "scatter", mode: "lines", name: "Largest free block", x: f.position, y: f.largest_free_bytes.map((b) => b / mib),
      line: { color: "#4e79a7", width: 1.5 }, hovertemplate: "largest free block %{y:.1f} MiB at entry %{x}<extra></extra>" },
    { type: "scatter", mode: "lines", name: "Fragmentation", x: f.position, y: f.fragmentation.map((v) => 100 * v), yaxis: "y2",
      line: { color: "#e15759", width: 1, dash: "dot" }, hovertemplate: "fragmentation %{y:.0f} %<extra></extra>" },
  ];
  const layout: Layout = {
    height: 220, margin: { l: 60, r: 50, t: 10, b: 36 }, showlegend: true, legend: { orientation: "h", y: -0.25 },
    xaxis: { title: { text: "history entry" } }, yaxis: { title: { text: "MiB" }, rangemode: "tozero" },
    yaxis2: { overlaying: "y", side: "right", range: [0, 100], ticksuffix: " %", showgrid: false },
    shapes: moment === null ? [] : [{ type: "line", x0: moment, x1: moment, yref: "paper", y0: 0, y1: 1, line: { color: "#f57c00", width: 1.5 } }],
  };
  return { data, layout };
}
