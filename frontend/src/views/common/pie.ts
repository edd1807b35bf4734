/**
 * "Top N + Other" pies: the N largest items get their own slice, the rest one "Other" slice, so the
 * shares stay true (a slice is its share of the whole, not of the top N).
 */
import { h } from "../../dom";
import { type ColorMap, type Data, type Layout, OTHER_COLOR, plotlyText, shorten } from "./charts";

export const OTHER = "Other";

export interface Item {
  name: string;
  value: number;
}

export interface Slice extends Item {
  /** true for the "Other" slice */
  other: boolean;
  /** items folded into "Other" (0 otherwise) */
  count: number;
}

/** How every share-of-a-whole pie is drawn: a donut, percentages inside and level, slices in the given order. */
export const DONUT = {
  texttemplate: "%{percent:.1%}",
  textposition: "inside",
  insidetextorientation: "horizontal",
  sort: false,
  direction: "clockwise",
  hole: 0.45,
} as const;

/** The `n` largest positive items, then "Other" with the rest (if positive). */
export function topN(items: readonly Item[], n: number): Slice[] {
  const positive = items.filter((i) => Number.isFinite(i.value) && i.value > 0);
  positive.sort((a, b) => b.value - a.value || a.name.localeCompare(b.name));
  const keep = Math.max(1, Math.floor(n));
  const head: Slice[] = positive.slice(0, keep).map((i) => ({ ...i, other: false, count: 0 }));
  const rest = positive.slice(keep);
  const otherValue = rest.reduce((s, i) => s + i.value, 0);
  if (rest.length > 0 && otherValue > 0) head.push({ name: OTHER, value: otherValue, other: true, count: rest.length });
  return head;
}

export interface PieOptions {
  /** formats a value for the hover ("1.23 ms") */
  format: (value: number) => string;
  colors?: ColorMap;
  /** legend labels are cut to this many characters (full names in the hover) */
  labelMax?: number;
  /** the legend's name of an item (e.g. a kernel's short name); the hover keeps the full name */
  label?: (name: string) => string;
  /** hover line under the name, e.g. "device self time" */
  what?: string;
  hole?: number;
}

/** A plotly pie trace for the slices; labels are made unique after shortening. */
export function pieTrace(slices: readonly Slice[], opts: PieOptions): Data {
  const max = opts.labelMax ?? 38;
  const seen = new Set<string>();
  const labels: string[] = [];
  for (const s of slices) {
    const name = opts.label ? opts.label(s.name) : s.name;
    let label = s.other ? `${OTHER} (${s.count})` : shorten(name, max);
    for (let i = 2; seen.has(label); i++) label = `${shorten(name, max - 4)} #${i}`;
    seen.add(label);
    labels.push(label);
  }
  const total = slices.reduce((sum, s) => sum + s.value, 0);
  const hover = slices.map((s) => {
    const title = s.other ? `${OTHER}: ${s.count} more` : s.name;
    const share = total > 0 ? `${((100 * s.value) / total).toFixed(1)}%` : "";
    return `${hoverName(title)}<br>${plotlyText(opts.format(s.value))}${opts.what ? ` ${plotlyText(opts.what)}` : ""} · ${share}`;
  });
  return {
    type: "pie",
    labels: labels.map(plotlyText),
    values: slices.map((s) => s.value),
    text: hover,
    hovertemplate: "%{text}<extra></extra>",
    ...DONUT,
    hole: opts.hole ?? DONUT.hole,
    marker: {
      colors: slices.map((s) => (s.other ? OTHER_COLOR : (opts.colors?.get(s.name) ?? OTHER_COLOR))),
      line: { width: 1, color: "rgba(128,128,128,0.35)" },
    },
  };
}

/** Escaped for plotly, very long names (kernel signatures) wrapped over at most 6 lines. */
export function hoverName(s: string, width = 90, lines = 6): string {
  const parts: string[] = [];
  for (let i = 0; i < s.length && parts.length < lines; i += width) parts.push(plotlyText(s.slice(i, i + width)));
  return parts.join("<br>") + (s.length > width * lines ? "…" : "");
}

/** Layout of a pie with its legend on the right (or below on narrow screens). */
export function pieLayout(extra: Layout = {}): Layout {
  return {
    showlegend: true,
    legend: { orientation: "v", x: 1, xanchor: "left", y: 0.5, yanchor: "middle", font: { size: 11 }, itemclick: false, itemdoubleclick: false },
    margin: { l: 8, r: 8, t: 8, b: 8 },
    uniformtext: { minsize: 9, mode: "hide" },
    ...extra,
  };
}

/**
 * The "Top N" number input of a pie card: 1..50 (10 by default); `onChange` gets the clamped value.
 * Returns the input and a getter for the current N.
 */
export function topNInput(label: string, onChange: (n: number) => void): { input: HTMLInputElement; value: () => number } {
  let current = 10;
  const input = h("input", {
    testid: "top-n",
    attrs: { type: "number", min: 1, max: 50, value: current, "aria-label": label },
    onChange: () => {
      const n = Math.round(Number(input.value));
      current = Number.isFinite(n) ? Math.min(50, Math.max(1, n)) : 10;
      input.value = String(current);
      onChange(current);
    },
  });
  return { input, value: () => current };
}
