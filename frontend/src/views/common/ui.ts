/**
 * Page-level helpers shared by the views: loading a route with a readable error card, the clipboard
 * (with a fallback for sandboxed frames), a toast, and a text overlay for when nothing else works.
 * Everything here renders text as text nodes.
 */
import { ApiError } from "../../api";
import { card, errorCard } from "../../components";
import { h } from "../../dom";
import type { Answer, GroupedRoute, Grouping, Query, SpanExtra, SpanRoute } from "../../types";
import type { ViewContext } from "../types";
import { vsCodeWebviewOrigin } from "./sourceFrames";

/** GET a route for the selected run/worker/span (plus `extra` params). */
export function spanGet<R extends SpanRoute>(ctx: ViewContext, route: R, extra?: SpanExtra<R>): Promise<Answer<R>> {
  const query = { ...extra, run: ctx.run, worker: ctx.worker, span: ctx.span } as unknown as Query<R>;
  return ctx.api.get(route, query, { signal: ctx.signal });
}

/** True once the user left the page (checked after every await). */
export function left(ctx: ViewContext): boolean {
  return ctx.signal.aborted;
}

/** The card shown instead of a page (or a part of one) whose data could not be loaded. */
export function loadErrorCard(err: unknown, what: string): HTMLElement {
  if (err instanceof ApiError && err.status === 409) {
    return card({ class: "ptp-warn-card", testid: "still-loading", title: "Still loading" }, h("p", {}, err.message));
  }
  const message = err instanceof Error ? err.message : String(err);
  return errorCard(`Could not load ${what}`, message);
}

/** The origin of VS Code's webview above TensorBoard, or null (Jupyter, Colab, a portal, no frame at all). */
export function vsCodeOrigin(): string | null {
  try {
    // Firefox has no ancestorOrigins, whatever lib.dom says: the referrer decides there.
    const list = (window.location as { ancestorOrigins?: DOMStringList }).ancestorOrigins;
    const ancestors = list ? Array.from(list) : [];
    let referrer = "";
    try {
      referrer = window.parent.document.referrer;
    } catch {
      // TensorBoard's page not readable: the ancestors alone decide
    }
    return vsCodeWebviewOrigin(ancestors, referrer);
  } catch {
    return null;
  }
}

/**
 * True inside VS Code's webview (its documented origins, see sourceFrames.ts), not merely in some frame:
 * Jupyter's and Colab's `%tensorboard` frame TensorBoard too, and there downloads and the clipboard work.
 */
export function inVsCode(): boolean {
  return vsCodeOrigin() !== null;
}

/**
 * Copy text to the clipboard: the async Clipboard API first, then the legacy copy command (works
 * in frames without the clipboard permission). Resolves false when both failed; never throws.
 */
export async function copyText(text: string): Promise<boolean> {
  try {
    // undefined outside secure contexts, whatever lib.dom says
    const clipboard = (navigator as { clipboard?: Clipboard }).clipboard;
    if (clipboard && typeof clipboard.writeText === "function") {
      await clipboard.writeText(text);
      return true;
    }
  } catch {
    // fall through to the legacy path
  }
  const area = h("textarea", { class: "ptp-offscreen", attrs: { readonly: true, "aria-hidden": "true" } });
  area.value = text;
  document.body.appendChild(area);
  try {
    area.select();
    // eslint-disable-next-line @typescript-eslint/no-deprecated -- the only copy path left without the Clipboard API
    return document.execCommand("copy");
  } catch {
    return false;
  } finally {
    area.remove();
  }
}

let toastTimer: number | undefined;

/** A short message at the bottom of the page (role=status); errors stay longer. */
export function showToast(message: string, kind: "ok" | "error" = "ok"): HTMLElement {
  let el = document.querySelector<HTMLElement>(".ptp-toast");
  if (!el) {
    el = h("div", { class: "ptp-toast", role: "status", testid: "toast", attrs: { "aria-live": "polite" } });
    document.body.appendChild(el);
  }
  el.textContent = message;
  el.dataset["kind"] = kind;
  el.classList.add("ptp-toast-shown");
  window.clearTimeout(toastTimer);
  const shown = el;
  toastTimer = window.setTimeout(() => {
    shown.classList.remove("ptp-toast-shown");
  }, kind === "error" ? 8000 : 2500);
  return el;
}

/**
 * A modal overlay with the text in a selected textarea, a Copy button and Close (also Escape and
 * a click outside). The last resort when neither a download nor the clipboard works.
 */
export function showTextOverlay(opts: { title: string; message: string; text: string; testid?: string }): HTMLElement {
  document.querySelector(".ptp-overlay")?.remove();
  const area = h("textarea", {
    class: "ptp-overlay-text ptp-mono",
    testid: "overlay-text",
    attrs: { readonly: true, spellcheck: "false", "aria-label": opts.title },
  });
  area.value = opts.text;
  const status = h("span", { class: "ptp-muted", testid: "overlay-status", attrs: { "aria-live": "polite" } });
  const close = (): void => {
    overlay.remove();
    document.removeEventListener("keydown", onKey);
  };
  const onKey = (e: KeyboardEvent): void => {
    if (e.key === "Escape") close();
  };
  const overlay = h(
    "div",
    {
      class: "ptp-overlay",
      testid: opts.testid ?? "text-overlay",
      onClick: (e) => {
        if (e.target === overlay) close();
      },
    },
    h(
      "div",
      { class: "ptp-card ptp-overlay-box", role: "dialog", attrs: { "aria-modal": "true", "aria-label": opts.title } },
      h("h3", {}, opts.title),
      h("p", { class: "ptp-muted" }, opts.message),
      area,
      h(
        "div",
        { class: "ptp-overlay-actions" },
        status,
        h(
          "button",
          {
            class: "ptp-button",
            testid: "overlay-copy",
            attrs: { type: "button" },
            onClick: () => {
              area.select();
              void copyText(opts.text).then((ok) => {
                status.textContent = ok ? "Copied." : "Copying is blocked here: select the text and press Ctrl+C (⌘C).";
                area.select();
              });
            },
          },
          "Copy",
        ),
        h("button", { class: "ptp-button", testid: "overlay-close", attrs: { type: "button" }, onClick: close }, "Close"),
      ),
    ),
  );
  document.addEventListener("keydown", onKey);
  document.body.appendChild(overlay);
  area.focus();
  area.select();
  return overlay;
}

/**
 * The group-by switch of a table page: loads each grouping once (kept in `cache`), shows "Loading…" or the error in
 * `status`, disables `select` meanwhile, and shows only the grouping chosen last.
 */
export function groupingSwitch<R extends GroupedRoute, G extends Grouping<R> = Grouping<R>>(
  ctx: ViewContext,
  route: R,
  cache: Map<G, Answer<R>>,
  select: HTMLSelectElement,
  status: HTMLElement,
  show: (grouping: G, resp: Answer<R>) => void,
): (grouping: G) => Promise<void> {
  let wanted: G | null = null;
  return async (g) => {
    wanted = g;
    let resp = cache.get(g);
    if (!resp) {
      select.disabled = true;
      status.textContent = "Loading…";
      try {
        resp = await spanGet(ctx, route, { group_by: g } as unknown as SpanExtra<R>);
        cache.set(g, resp);
        status.textContent = "";
      } catch (err) {
        if (left(ctx)) return;
        status.textContent = `Could not load this grouping: ${err instanceof Error ? err.message : String(err)}`;
        return;
      } finally {
        select.disabled = false;
      }
    }
    if (wanted === g && !left(ctx)) show(g, resp);
  };
}
