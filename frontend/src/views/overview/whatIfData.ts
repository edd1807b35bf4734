/**
 * The Overview's what-if panel, DOM-free: which findings can be toggled, the `/what_if` query for a selection,
 * and the two stacked bars (measured and predicted) as segments. Tested in frontend/test/whatIfData.test.ts.
 */
import type { Answer } from "../../types";
import { CATEGORIES, CATEGORY_COLORS } from "../common/stepCategories";

export type WhatIfAnswer = Answer<"what_if">;

/** A finding the panel can toggle: it has a fix the server replays (`what_if` set). */
export interface Toggle {
  id: string;
  title: string;
  label: string;
  /** the saving of this fix alone, µs per step */
  aloneUs: number;
}

interface FindingLike {
  id: string;
  title?: string;
  what_if?: { label: string; saving_us: number } | null;
}

/** The findings with a replayable fix, in the diagnosis's order. */
export function toggles(findings: readonly FindingLike[]): Toggle[] {
  return findings.flatMap((f) =>
    f.what_if ? [{ id: f.id, title: f.title ?? f.id, label: f.what_if.label, aloneUs: Math.max(f.what_if.saving_us, 0) }] : [],
  );
}

/** The `changes` parameter for a selection: ids in the panel's order, comma-separated ("" for none). */
export function changesParam(order: readonly Toggle[], selected: ReadonlySet<string>): string {
  return order.filter((t) => selected.has(t.id)).map((t) => t.id).join(",");
}

/** One coloured piece of a stacked bar: `share` of the bar's full width (the longer of the two steps). */
export interface Segment {
  category: string;
  us: number;
  share: number;
  color: string;
}

/** A breakdown (µs per category) as segments scaled to `fullUs` (the wider bar's total), empty categories left out. */
export function segments(breakdownUs: Readonly<Record<string, number>>, fullUs: number): Segment[] {
  const order = [...CATEGORIES, ...Object.keys(breakdownUs).filter((c) => !(CATEGORIES as readonly string[]).includes(c))];
  return order.flatMap((category) => {
    const us = breakdownUs[category];
    if (typeof us !== "number" || !Number.isFinite(us) || us <= 0 || !(fullUs > 0)) return [];
    return [{ category, us, share: us / fullUs, color: CATEGORY_COLORS[category] ?? "#9e9e9e" }];
  });
}

/** "−4.20 ms (−14.4 %)" parts of a prediction: the saving and its share of the baseline. */
export function savingShare(a: Pick<WhatIfAnswer, "baseline_step_us" | "saving_us">): number {
  return a.baseline_step_us > 0 ? a.saving_us / a.baseline_step_us : 0;
}

/** The selection the panel opens with: the verdict's finding when it can be replayed, else none. */
export function initialSelection(order: readonly Toggle[], verdictId: string | null | undefined): Set<string> {
  return new Set(order.some((t) => t.id === verdictId) && verdictId ? [verdictId] : []);
}
