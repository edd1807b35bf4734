/**
 * The what-if panel of the Overview: the findings whose fix the server can replay, as toggles; for the selected
 * combination, the predicted step time and its breakdown beside the measured one, from ONE replay of all the
 * selected fixes (GET ./what_if, never a sum of the findings' savings). See docs/guide/overview.md, *What-if*.
 */
import { card, infoIcon } from "../../components";
import { h, replaceChildren } from "../../dom";
import { formatDuration, formatExactUs, formatPercent1 } from "../../format";
import type { ViewContext } from "../types";
import { changesParam, initialSelection, savingShare, segments, type Toggle, toggles, type WhatIfAnswer } from "./whatIfData";

const HELP =
  "Each toggle is a finding's fix as a change to the trace (drop these syncs, run these kernels on tensor cores, replay these launches as a CUDA graph, …). The selected fixes are replayed together over the trace's dependency graph (host threads, launches, streams, syncs, collectives): the step time is the cadence at which steps complete, so fixes that remove the same idle time, or that the next bottleneck caps, save less together than apart.";

interface FindingLike {
  id: string;
  title?: string;
  what_if?: { label: string; saving_us: number } | null;
}

function bar(which: "baseline" | "predicted", label: string, breakdown: Record<string, number>, totalUs: number, fullUs: number): HTMLElement {
  return h(
    "div",
    { class: "ptp-whatif-row", testid: "what-if-bar", dataset: { which, total: String(totalUs) } },
    h("span", { class: "ptp-whatif-label" }, label),
    h(
      "div",
      { class: "ptp-whatif-bar" },
      segments(breakdown, fullUs).map((s) =>
        h("span", {
          class: "ptp-whatif-seg",
          testid: "what-if-segment",
          dataset: { category: s.category, us: String(s.us) },
          title: `${s.category}: ${formatDuration(s.us)} per step (${formatPercent1(totalUs > 0 ? s.us / totalUs : 0)})`,
          style: { width: `${(100 * s.share).toFixed(3)}%`, background: s.color },
        }),
      ),
    ),
    h("span", { class: "ptp-whatif-total", title: formatExactUs(totalUs) }, formatDuration(totalUs)),
  );
}

function resultView(a: WhatIfAnswer): HTMLElement {
  const full = Math.max(a.baseline_step_us, a.predicted_step_us);
  const share = savingShare(a);
  return h(
    "div",
    { testid: "what-if-result" },
    h(
      "p",
      { class: "ptp-whatif-headline" },
      "Predicted step ",
      h("strong", { testid: "what-if-predicted", dataset: { value: String(a.predicted_step_us) }, title: formatExactUs(a.predicted_step_us) }, formatDuration(a.predicted_step_us)),
      " instead of ",
      h("span", { testid: "what-if-baseline", dataset: { value: String(a.baseline_step_us) } }, formatDuration(a.baseline_step_us)),
      a.ids.length
        ? h("span", { class: "ptp-whatif-saving", testid: "what-if-saving", dataset: { value: String(a.saving_us) } }, ` (−${formatDuration(a.saving_us)}, −${formatPercent1(share)})`)
        : " (select a fix)",
    ),
    bar("baseline", "Measured", a.baseline_breakdown_us, a.baseline_step_us, full),
    bar("predicted", "Predicted", a.predicted_breakdown_us, a.predicted_step_us, full),
  );
}

function toggleList(order: Toggle[], selected: Set<string>, changed: () => void): HTMLElement {
  return h(
    "ul",
    { class: "ptp-whatif-toggles" },
    order.map((t) => {
      const box = h("input", { testid: "what-if-toggle", dataset: { id: t.id }, attrs: { type: "checkbox" } });
      box.checked = selected.has(t.id);
      box.addEventListener("change", () => {
        if (box.checked) selected.add(t.id);
        else selected.delete(t.id);
        changed();
      });
      return h("li", {}, h("label", {}, box, ` ${t.title}: ${t.label} `, h("span", { class: "ptp-muted" }, `(−${formatDuration(t.aloneUs)} alone)`)));
    }),
  );
}

/** The panel, or null when no finding has a fix to replay. */
export function whatIfCard(ctx: ViewContext, findings: readonly FindingLike[], verdictId: string | null | undefined): HTMLElement | null {
  const order = toggles(findings);
  if (!order.length) return null;
  const selected = initialSelection(order, verdictId);
  const out = h("div", { class: "ptp-whatif-out", testid: "what-if-out", attrs: { "aria-live": "polite" } });
  let pending: AbortController | null = null;
  const refresh = (): void => {
    pending?.abort();
    const ctl = new AbortController();
    pending = ctl;
    out.dataset["state"] = "loading";
    const changes = changesParam(order, selected);
    ctx.api
      .get("what_if", { run: ctx.run, worker: ctx.worker, span: ctx.span, changes }, { signal: ctl.signal })
      .then((a) => {
        if (ctl.signal.aborted) return;
        replaceChildren(out, resultView(a));
        out.dataset["state"] = "ready";
        out.dataset["changes"] = changes;
      })
      .catch((err: unknown) => {
        if (ctl.signal.aborted) return;
        replaceChildren(out, h("p", { class: "ptp-muted", testid: "what-if-error" }, `The replay failed: ${err instanceof Error ? err.message : String(err)}`));
        out.dataset["state"] = "error";
      });
  };
  ctx.signal.addEventListener("abort", () => pending?.abort(), { once: true });
  refresh();
  return card(
    { title: "What if", testid: "card-what-if" },
    h("p", { class: "ptp-muted ptp-card-sub" }, "Toggle fixes to replay the trace with them, all at once ", infoIcon(HELP)),
    toggleList(order, selected, refresh),
    out,
  );
}
