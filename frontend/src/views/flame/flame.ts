/**
 * The Flame graph page (GET ./flamegraph): call stacks from Python frames down to operators and, for device time,
 * the kernels they launched. Metric, step, flame/icicle, merge-by-function, search with the matches' share,
 * click to zoom with a breadcrumb back, and the folded stacks (flamegraph.pl, speedscope) to copy or open.
 * An Operator-view row's "stacks" link opens it filtered to that operator (URL key `flame_op`).
 */
import { card, infoIcon } from "../../components";
import { h, replaceChildren } from "../../dom";
import { formatBytes, formatDuration, formatInt, formatPercent1 } from "../../format";
import { readViewUrlState, writeViewUrlState } from "../../urlState";
import { FlameCanvas, type DrawnFrame, type Orientation } from "./flameCanvas";
import {
  type FlameLayout,
  type FlameMetric,
  type FlameResponse,
  type FrameKindName,
  KIND_COLORS,
  KIND_LABELS,
  METRICS,
  ancestry,
  layoutFrames,
  searchFrames,
} from "./flameData";
import { copyText, fetchFor, left, loadErrorCard, showTextOverlay, showToast } from "../common/ui";
import type { ViewContext } from "../types";
import type { Answer } from "../../types";

/** GET ./flamegraph/search: the matches over every frame */
type FlameSearchResponse = Answer<"flamegraph/search">;

interface State {
  metric: FlameMetric;
  merge: boolean;
  orientation: Orientation;
  step: string;
  operator: string;
  query: string;
}

interface FlameDebugHook {
  framesOnScreen(): DrawnFrame[];
  zoomed(): string | null;
}

declare global {
  interface Window {
    __ptpFlame?: FlameDebugHook;
  }
}

export function formatWeight(value: number, unit: FlameResponse["unit"]): string {
  if (unit === "us") return formatDuration(value);
  if (unit === "bytes") return formatBytes(value);
  return `${formatInt(Math.round(value))} calls`;
}

/** 0.0005 → "0.05%": the pruning threshold with the digits it needs. */
function formatMinShare(share: number): string {
  return `${Number((share * 100).toPrecision(2))}%`;
}

function select<T extends string>(testid: string, label: string, options: { id: T; label: string }[], value: T, onChange: (v: T) => void): HTMLElement {
  const el = h(
    "select",
    { testid, attrs: { "aria-label": label }, onChange: () => { onChange(el.value as T); } },
    options.map((o) => h("option", { attrs: { value: o.id, selected: o.id === value } }, o.label)),
  );
  return h("label", { class: "ptp-picker" }, label, el);
}

function toggle(testid: string, label: string, title: string, on: () => boolean, flip: () => void): HTMLButtonElement {
  const button = h("button", {
    class: ["ptp-button", "ptp-button-small", on() && "ptp-button-on"],
    testid,
    title,
    attrs: { type: "button", "aria-pressed": on() },
    onClick: () => {
      flip();
      button.classList.toggle("ptp-button-on", on());
      button.setAttribute("aria-pressed", String(on()));
    },
  }, label);
  return button;
}

function legend(kinds: Set<FrameKindName>): HTMLElement {
  return h(
    "div",
    { class: "ptp-flame-legend", testid: "flame-legend" },
    [...kinds].map((k) =>
      h("span", { class: "ptp-flame-key", dataset: { kind: k } }, h("span", { class: "ptp-flame-swatch", style: { background: KIND_COLORS[k] } }), KIND_LABELS[k]),
    ),
  );
}

function noStacksNotice(): HTMLElement {
  return card(
    { class: "ptp-warn-card", testid: "flame-no-stacks", title: "No Python call stacks in this trace" },
    h("p", {}, "The graph below shows how operators nest, without the Python code that called them. To see your code, record with ",
      h("code", {}, "torch.profiler.profile(..., with_stack=True)"),
      " (PyTorch 2.x writes python_function events; 1.x a Call stack per operator)."),
  );
}

function emptyNotice(data: FlameResponse): HTMLElement {
  const what = METRICS.find((m) => m.id === data.metric)?.label.toLowerCase() ?? data.metric;
  const hint = data.metric === "alloc_bytes" ? " Record with profile_memory=True to see allocations."
    : data.metric === "self_device_us" ? " No GPU work was recorded in this trace (or in this step)." : "";
  return h("p", { class: "ptp-muted ptp-flame-empty", testid: "flame-empty" },
    `Nothing to show: no ${what}${data.operator ? ` inside ${data.operator}` : ""}${data.step ? ` in step ${data.step}` : ""}.${hint}`);
}

/** "copy folded stacks" (clipboard, then an in-page text box) and a link that opens the text. */
function exportButtons(ctx: ViewContext, params: () => Record<string, string>): HTMLElement {
  const url = (): string => ctx.api.url("flamegraph", { run: ctx.run, worker: ctx.worker, span: ctx.span, ...params(), format: "folded" });
  const link = h("a", { class: "ptp-button ptp-button-small", testid: "flame-open-folded", attrs: { href: url(), target: "_blank", rel: "noopener" },
    title: "The folded stacks as text (flamegraph.pl, speedscope): one 'frame;frame;… weight' line per stack" }, "Open folded stacks");
  const copy = h("button", {
    class: "ptp-button ptp-button-small",
    testid: "flame-copy-folded",
    attrs: { type: "button" },
    title: "Copy the folded stacks, for flamegraph.pl or speedscope",
    onClick: () => {
      void fetch(url(), { signal: ctx.signal })
        .then(async (r) => {
          if (!r.ok) throw new Error(`HTTP ${r.status}`);
          const text = await r.text();
          if (await copyText(text)) showToast(`Copied ${formatInt(text.split("\n").length - 1)} folded stacks.`);
          else showTextOverlay({ title: "Folded stacks", message: "Copying is blocked here: select the text and copy it.", text, testid: "flame-folded-overlay" });
        })
        .catch((err: unknown) => {
          if (!left(ctx)) showToast(`Could not get the folded stacks: ${err instanceof Error ? err.message : String(err)}`, "error");
        });
    },
  }, "Copy folded stacks");
  return h("span", { class: "ptp-flame-export", onMouseover: () => { link.setAttribute("href", url()); }, onFocusin: () => { link.setAttribute("href", url()); } }, copy, link);
}

export async function render(container: HTMLElement, ctx: ViewContext): Promise<() => void> {
  const linked = readViewUrlState().flame_op?.trim() ?? "";
  if (linked) writeViewUrlState({ flame_op: undefined });
  const state: State = { metric: "self_host_us", merge: false, orientation: "flame", step: "", operator: linked, query: "" };
  const canvas = new FlameCanvas();
  const graph = h("div", { class: "ptp-flame-graph", testid: "flame-graph" }, canvas.el);
  const tooltip = h("div", { class: "ptp-flame-tooltip", testid: "flame-tooltip", attrs: { hidden: true } });
  const crumbs = h("div", { class: "ptp-flame-crumbs", testid: "flame-breadcrumb" });
  const status = h("span", { class: "ptp-muted", testid: "flame-status", attrs: { "aria-live": "polite" } });
  const searchInfo = h("span", { class: "ptp-muted", testid: "flame-search-info", attrs: { "aria-live": "polite" } });
  const notices = h("div", {});
  const filterChip = h("span", { testid: "flame-operator-filter" });
  const stepPicker = h("span", {});
  const legendBox = h("div", {});
  let data: FlameResponse | null = null;
  let layout: FlameLayout | null = null;
  let width = 0;

  const params = (): Record<string, string> => {
    const p: Record<string, string> = { metric: state.metric, merge: state.merge ? "function" : "line" };
    if (state.step) p["step"] = state.step;
    if (state.operator) p["operator"] = state.operator;
    return p;
  };
  const redraw = (): void => {
    if (!data || !layout) return;
    width = graph.clientWidth || width || 1000;
    canvas.orientation = state.orientation;
    canvas.rootLabel = `all (${formatWeight(data.total, data.unit)})`;
    canvas.matched = state.query.trim() ? searchFrames(data, state.query).matched : null;
    canvas.draw(width, { match: "#c2185b" });
    renderCrumbs();
  };
  const zoomTo = (frame: number): void => {
    canvas.zoom = frame;
    redraw();
  };
  const renderCrumbs = (): void => {
    if (!data) return;
    const d = data;
    const path = ancestry(d, canvas.zoom);
    replaceChildren(crumbs,
      h("button", { class: "ptp-link-button", testid: "flame-crumb", attrs: { type: "button" }, onClick: () => { zoomTo(-1); } }, "all"),
      path.map((f) => [" › ", h("button", { class: "ptp-link-button", testid: "flame-crumb", attrs: { type: "button" }, onClick: () => { zoomTo(f); } }, d.strings[d.frames.name[f] ?? 0] ?? "")]),
    );
  };
  // The drawn tree leaves out frames too thin to draw: the matches' count and weight come from the server, which
  // searches every frame (the Operator view's and the folded export's figure); the highlight is drawn at once.
  let searchSeq = 0;
  let searchTimer: ReturnType<typeof setTimeout> | undefined;
  const countMatches = async (q: string, seq: number): Promise<void> => {
    let r: FlameSearchResponse;
    try {
      r = await fetchFor<FlameSearchResponse>(ctx, "flamegraph/search", { ...params(), q });
    } catch (err) {
      if (!left(ctx) && seq === searchSeq) searchInfo.textContent = `Search failed: ${err instanceof Error ? err.message : String(err)}`;
      return;
    }
    if (left(ctx) || seq !== searchSeq) return;
    const thin = r.count - r.drawn;
    searchInfo.textContent = r.count === 0 ? "No frame matches."
      : `${formatInt(r.count)} frame${r.count === 1 ? "" : "s"} match${thin > 0 ? ` (${formatInt(thin)} too thin to draw)` : ""}: ${formatWeight(r.value, r.unit)}, ${formatPercent1(r.total > 0 ? r.value / r.total : 0)} of the total`;
  };
  const updateSearch = (): void => {
    if (!data) return;
    const q = state.query.trim();
    const seq = ++searchSeq;
    clearTimeout(searchTimer);
    searchInfo.textContent = q ? "Searching…" : "";
    if (q) searchTimer = setTimeout(() => { void countMatches(q, seq); }, 150);
    redraw();
  };

  const load = async (): Promise<void> => {
    status.textContent = "Loading…";
    let resp: FlameResponse;
    try {
      resp = await fetchFor<FlameResponse>(ctx, "flamegraph", params());
    } catch (err) {
      if (left(ctx)) return;
      status.textContent = "";
      replaceChildren(notices, loadErrorCard(err, "the flame graph"));
      return;
    }
    if (left(ctx)) return;
    data = resp;
    layout = layoutFrames(resp);
    canvas.setData(resp, layout);
    const hidden = resp.frames_total - resp.frames.name.length;
    status.textContent = `${formatInt(resp.frames_total)} frames${hidden > 0 ? ` (${formatInt(hidden)} below ${formatMinShare(resp.min_share)} of the total not drawn)` : ""}`;
    replaceChildren(notices, resp.python_stacks ? null : noStacksNotice(), resp.total > 0 ? null : emptyNotice(resp));
    replaceChildren(filterChip, state.operator
      ? h("span", { class: "ptp-flame-chip" }, "Only stacks through ", h("b", {}, state.operator), " ",
        h("button", { class: "ptp-link-button", testid: "flame-clear-operator", attrs: { type: "button", "aria-label": "Show all stacks" }, onClick: () => { state.operator = ""; void load(); } }, "✕ show all"))
      : null);
    replaceChildren(stepPicker, resp.steps.length > 0
      ? select("flame-step", "Step", [{ id: "", label: "All steps" }, ...resp.steps.map((s) => ({ id: s, label: `Step ${s}` }))], state.step, (v) => { state.step = v; void load(); })
      : null);
    replaceChildren(legendBox, legend(new Set(resp.kinds)));
    updateSearch();
  };

  const search = h("input", {
    class: "ptp-search",
    testid: "flame-search",
    attrs: { type: "search", placeholder: "Search frames", "aria-label": "Search frames" },
    onInput: () => { state.query = search.value; updateSearch(); },
  });
  const metricHelp = METRICS.map((m) => `${m.label}: ${m.help}`).join("\n");
  const controls = h(
    "div",
    { class: "ptp-card-head ptp-flame-controls" },
    select("flame-metric", "Weight", METRICS, state.metric, (v) => { state.metric = v; void load(); }),
    infoIcon(metricHelp),
    stepPicker,
    toggle("flame-icicle", "Icicle", "Root at the top (icicle) instead of at the bottom (flame)", () => state.orientation === "icicle",
      () => { state.orientation = state.orientation === "flame" ? "icicle" : "flame"; redraw(); }),
    toggle("flame-merge", "Merge by function", "One frame per function: line numbers and object addresses dropped", () => state.merge,
      () => { state.merge = !state.merge; void load(); }),
    search,
    searchInfo,
    exportButtons(ctx, params),
  );
  hookPointer(canvas, graph, tooltip, () => data, zoomTo);
  replaceChildren(container, h("div", { class: "ptp-view ptp-flame", testid: "flame-view" },
    notices,
    card({ testid: "card-flame" }, controls, filterChip, crumbs, h("div", { class: "ptp-flame-wrap" }, graph, tooltip), h("div", { class: "ptp-card-sub" }, status), legendBox)));
  window.__ptpFlame = {
    framesOnScreen: () => canvas.framesOnScreen(),
    zoomed: () => (data && canvas.zoom >= 0 ? (data.strings[data.frames.name[canvas.zoom] ?? 0] ?? null) : null),
  };
  ctx.onResize(() => { redraw(); });
  await load();
  return () => {
    if (window.__ptpFlame) delete window.__ptpFlame;
  };
}

/** Hover shows a frame's name, value and share; a click zooms into it (the root bar zooms out). */
function hookPointer(canvas: FlameCanvas, graph: HTMLElement, tooltip: HTMLElement, data: () => FlameResponse | null, zoomTo: (f: number) => void): void {
  const at = (e: MouseEvent): DrawnFrame | null => {
    const rect = canvas.el.getBoundingClientRect();
    return canvas.hit(e.clientX - rect.left, e.clientY - rect.top);
  };
  canvas.el.addEventListener("mousemove", (e) => {
    const d = data();
    const f = at(e);
    if (!d || !f) {
      tooltip.hidden = true;
      return;
    }
    const self = f.frame >= 0 ? (d.frames.self[f.frame] ?? 0) : 0;
    replaceChildren(tooltip,
      h("div", { class: "ptp-flame-tip-name" }, f.name),
      h("div", {}, `${formatWeight(f.value, d.unit)} · ${formatPercent1(d.total > 0 ? f.value / d.total : 0)} of the total`),
      f.frame >= 0 ? h("div", { class: "ptp-muted" }, `self ${formatWeight(self, d.unit)} · ${KIND_LABELS[f.kind as FrameKindName]}`) : null,
      h("div", { class: "ptp-muted" }, f.frame >= 0 ? "Click to zoom in" : "Click to zoom out"));
    const rect = graph.getBoundingClientRect();
    tooltip.style.left = `${Math.min(e.clientX - rect.left + 12, Math.max(rect.width - 320, 0))}px`;
    tooltip.style.top = `${e.clientY - rect.top + 14}px`;
    tooltip.hidden = false;
  });
  canvas.el.addEventListener("mouseleave", () => { tooltip.hidden = true; });
  canvas.el.addEventListener("click", (e) => {
    const f = at(e);
    if (f) zoomTo(f.frame);
  });
}
