/**
 * The Overview's step-breakdown categories (tb_plugin/analysis/steps.py CATEGORIES) and their colours, shared by
 * the Overview (bars, table, pie) and the Trace view, which highlights one category's events when a link from the
 * breakdown carries it in the URL (`cat`).
 */

export const CATEGORIES = ["Kernel", "Memcpy", "Memset", "Communication", "Runtime", "DataLoader", "CPU Exec", "Other"] as const;

export const CATEGORY_COLORS: Record<string, string> = {
  Kernel: "#4e79a7",
  Memcpy: "#e15759",
  Memset: "#edc948",
  Communication: "#59a14f",
  Runtime: "#b07aa1",
  DataLoader: "#f28e2b",
  "CPU Exec": "#76b7b2",
  Other: "#9e9e9e",
};

/** `value` when it names a category, else null (a hand-edited URL must not reach the server as a 400). */
export type Category = (typeof CATEGORIES)[number];

export function highlightCategory(value: string | undefined): Category | null {
  return CATEGORIES.find((c) => c === value) ?? null;
}

/** The Trace view chip's words for a highlighted category. */
export function highlightText(category: string): string {
  return category === "Other"
    ? "Highlighting Other: time no event covers, so every event is dimmed"
    : `Highlighting ${category}: the events the step breakdown counts in it, the rest dimmed`;
}

/**
 * The category of a stacked step bar at height `ms` (bars stack `categories` in order, each `breakdown_us[c]`
 * tall): the segment a click landed on. Null above the bar or below zero.
 */
export function segmentAt(breakdownUs: Readonly<Record<string, number | null | undefined>>, categories: readonly string[], ms: number): string | null {
  if (!(ms >= 0)) return null;
  let top = 0;
  for (const c of categories) {
    const v = breakdownUs[c];
    const h = typeof v === "number" && Number.isFinite(v) && v > 0 ? v / 1000 : 0;
    if (h > 0 && ms < top + h) return c;
    top += h;
  }
  return null;
}

/** The step (index) in which `category` took the most time: where a link from the category's row opens. */
export function busiestStep(steps: readonly { breakdown_us: Readonly<Record<string, number | null | undefined>> }[], category: string): number | null {
  let best: number | null = null;
  let most = 0;
  for (const [i, s] of steps.entries()) {
    const v = s.breakdown_us[category];
    if (typeof v === "number" && Number.isFinite(v) && v > most) {
      most = v;
      best = i;
    }
  }
  return best;
}
