/**
 * The Trace view's search box: a query's matches fetched a page at a time (`./trace/search`), the "3 of 120"
 * count, Enter / Shift+Enter and the ‹ › buttons stepping through them, each hit revealed in the timeline. A
 * newer query makes the answers of older ones stale (a token), so typing fast never shows an old query's count.
 */
import type { Api } from "../../api";
import { listen } from "../../dom";
import { writeViewUrlState } from "../../urlState";
import { parseTraceQuery, searchParams } from "../common/traceQuery";
import { showToast } from "../common/ui";
import type { EventBrief } from "./traceData";

export const SEARCH_PAGE = 100;
/** typing waits this long for the next key before it searches */
const TYPING_MS = 300;

interface SearchState {
  query: string;
  total: number;
  /** the hit shown, -1 before the first */
  index: number;
  pages: Map<number, EventBrief[]>;
  token: number;
}

export interface SearchElements {
  input: HTMLInputElement;
  count: HTMLElement;
  prev: HTMLButtonElement;
  next: HTMLButtonElement;
}

export interface SearchHooks {
  api: Api;
  ids: { run: string; worker: string; span: string };
  signal: AbortSignal;
  /** show a hit in the timeline */
  reveal(brief: EventBrief): void;
  /** Escape in the box: back to the timeline */
  leaveBox(): void;
}

export class SearchController {
  private state: SearchState = { query: "", total: 0, index: -1, pages: new Map(), token: 0 };
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly el: SearchElements, private readonly hooks: SearchHooks) {}

  /** Wire the box and the buttons (listeners removed with `cleanups`). */
  wire(cleanups: (() => void)[]): void {
    const { input } = this.el;
    cleanups.push(
      listen(input, "input", () => {
        clearTimeout(this.timer);
        this.timer = setTimeout(() => { void this.run(input.value, "none"); }, TYPING_MS);
      }),
      listen(input, "keydown", (e) => {
        if (e.key === "Enter") {
          e.preventDefault();
          clearTimeout(this.timer);
          const q = input.value.trim();
          if (q !== this.state.query) void this.run(q, e.shiftKey ? "last" : "first");
          else void this.step(e.shiftKey ? -1 : 1);
        } else if (e.key === "Escape") {
          input.blur();
          this.hooks.leaveBox();
        }
      }),
      listen(this.el.prev, "click", () => { void this.step(-1); }),
      listen(this.el.next, "click", () => { void this.step(1); }),
    );
    this.updateCount();
  }

  stop(): void {
    clearTimeout(this.timer);
  }

  /** Search `raw` (kept in the URL as `q`); `jump` reveals the first or last hit once the count is known. */
  async run(raw: string, jump: "none" | "first" | "last"): Promise<void> {
    const query = raw.trim();
    const token = ++this.state.token;
    this.state = { query, total: 0, index: -1, pages: new Map(), token };
    writeViewUrlState({ q: query || undefined });
    if (!parseTraceQuery(query).text) {
      this.updateCount();
      return;
    }
    this.el.count.textContent = "searching…";
    try {
      const items = await this.page(0, token);
      if (!items) return;
      this.updateCount();
      if (jump !== "none" && this.state.total > 0) await this.goto(jump === "first" ? 0 : this.state.total - 1);
    } catch (err) {
      if (token !== this.state.token || this.hooks.signal.aborted) return;
      this.el.count.textContent = "search failed";
      showToast(err instanceof Error ? err.message : String(err), "error");
    }
  }

  /** The next (1) or previous (-1) hit, wrapping; a changed box searches anew first. */
  async step(dir: 1 | -1): Promise<void> {
    const q = this.el.input.value.trim();
    if (q !== this.state.query) {
      await this.run(q, dir === 1 ? "first" : "last");
      return;
    }
    const s = this.state;
    if (s.total === 0) return;
    const next = s.index < 0 ? (dir === 1 ? 0 : s.total - 1) : (s.index + dir + s.total) % s.total;
    await this.goto(next);
  }

  private updateCount(): void {
    const s = this.state;
    const el = this.el.count;
    if (!s.query) el.textContent = "";
    else if (s.total === 0) el.textContent = "no matches";
    else if (s.index < 0) el.textContent = `${s.total.toLocaleString("en-US")} ${parseTraceQuery(s.query).exact ? "exact " : ""}matches`;
    else el.textContent = `${(s.index + 1).toLocaleString("en-US")} of ${s.total.toLocaleString("en-US")}`;
    this.el.prev.disabled = s.total === 0;
    this.el.next.disabled = s.total === 0;
  }

  /** The page of hits at `offset` (cached per query); null when a newer query made this one stale. */
  private async page(offset: number, token: number): Promise<EventBrief[] | null> {
    const cached = this.state.pages.get(offset);
    if (cached) return cached;
    const resp = await this.hooks.api.get(
      "trace/search", { ...this.hooks.ids, ...searchParams(parseTraceQuery(this.state.query)), offset, limit: SEARCH_PAGE },
      { signal: this.hooks.signal, timeoutMs: 120_000 });
    if (token !== this.state.token) return null;
    this.state.total = resp.total;
    const items = Array.isArray(resp.items) ? resp.items : [];
    this.state.pages.set(offset, items);
    return items;
  }

  private async goto(index: number): Promise<void> {
    const token = this.state.token;
    const offset = Math.floor(index / SEARCH_PAGE) * SEARCH_PAGE;
    const items = await this.page(offset, token);
    if (!items || token !== this.state.token) return;
    const brief = items[index - offset];
    if (!brief) return;
    this.state.index = index;
    this.updateCount();
    this.hooks.reveal(brief);
  }
}
