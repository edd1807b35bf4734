/**
 * Loading the Distributed page: ./distributed for its first answer, and while some ranks still load (409)
 * their progress, asking again every 2 s.
 */
import { ApiError } from "../../api";
import { card, progressBar } from "../../components";
import { h, replaceChildren } from "../../dom";
import { formatInt } from "../../format";
import { loadErrorCard, left } from "../common/ui";
import { type DistributedResponse, normalize } from "./distributedData";
import type { ViewContext } from "../types";

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = window.setTimeout(resolve, ms);
    signal.addEventListener("abort", () => { window.clearTimeout(t); resolve(); }, { once: true });
  });
}

/** The load state of this span over the run's workers, from ./runs (null when it cannot be had). */
async function spanProgress(ctx: ViewContext): Promise<{ done: number; total: number; fraction: number } | null> {
  try {
    // a page of no runs but this one: small whatever the logdir holds
    const runs = await ctx.api.get("runs", { limit: 0, run: ctx.run }, { signal: ctx.signal, timeoutMs: 10_000 });
    const run = (Array.isArray(runs.runs) ? runs.runs : []).find((r) => r.name === ctx.run);
    const spans = (run?.workers ?? []).flatMap((w) => w.spans.filter((s) => s.span === ctx.span));
    if (!spans.length) return null;
    const done = spans.filter((s) => s.state === "ready" || s.state === "failed").length;
    const fraction = spans.reduce((sum, s) => sum + (s.state === "ready" || s.state === "failed" ? 1 : Math.min(1, Math.max(0, s.progress || 0))), 0) / spans.length;
    return { done, total: spans.length, fraction };
  } catch {
    return null;
  }
}

function waitingCard(message: string, progress: { done: number; total: number; fraction: number } | null): HTMLElement {
  return card(
    { class: "ptp-warn-card", testid: "dist-loading", title: "Waiting for every rank to load" },
    h("p", { testid: "dist-loading-message" }, message),
    progress
      ? h(
          "div",
          { class: "ptp-dist-progress" },
          progressBar(progress.fraction, "Ranks loaded"),
          h("span", { class: "ptp-muted" }, `${formatInt(progress.done)} of ${formatInt(progress.total)} ranks ready`),
        )
      : null,
    h("p", { class: "ptp-muted" }, "The comparison needs all ranks of this span; the page fills in by itself."),
  );
}

/**
 * The first answer (the server's default page: every rank up to 256, else the first page in rank order), asking
 * again while ranks load (409, their progress shown in `container`); null when the page was left or the answer
 * failed (then an error card is shown in `container`). The rank table asks for the other pages itself.
 */
export async function load(container: HTMLElement, ctx: ViewContext): Promise<DistributedResponse | null> {
  for (;;) {
    try {
      const raw = await ctx.api.get(
        "distributed", { run: ctx.run, span: ctx.span }, { signal: ctx.signal, timeoutMs: 300_000 });
      return normalize(raw);
    } catch (err) {
      if (left(ctx)) return null;
      if (err instanceof ApiError && err.status === 409) {
        const progress = await spanProgress(ctx);
        if (left(ctx)) return null;
        replaceChildren(container, waitingCard(err.message, progress));
        await sleep(2000, ctx.signal);
        if (left(ctx)) return null;
        continue;
      }
      replaceChildren(container, loadErrorCard(err, "the distributed view"));
      return null;
    }
  }
}

