/**
 * Deep-link state kept in TensorBoard's top-level URL hash.
 *
 * TensorBoard stores plugin state as `#<active plugin>&p.<plugin>.<key>=<value>&...`
 * (keys and values encodeURIComponent'ed; plugin_lib's experimental.GetURLPluginData reads
 * exactly these keys). The plugin frame is same-origin and unsandboxed, so we read and write
 * the parent's hash directly with the History API (no hashchange, so TensorBoard's own router is
 * not disturbed and keeps the keys when it rewrites the hash). If the parent cannot be reached
 * (cross-origin embedding, standalone page), the frame's own hash is used instead.
 *
 * History: what the user does (a tab, a run/worker/span picker, a link to another view or a
 * drill-down) pushes an entry (pushUrlState), so the browser's Back and Forward walk through the
 * pages; what the shell fills in by itself and what a page keeps of its own state (a range, a
 * search) replaces the current entry. A link sets the keys of the page it opens (writeViewUrlState)
 * just before navigating: those writes, made in the same task as the push, go to the new entry
 * only, and the entry left behind keeps what it had, so Back returns to the page as it was.
 */

export const PLUGIN_NAME = "pytorch_profiler";
const PREFIX = `p.${PLUGIN_NAME}.`;

export const URL_KEYS = ["run", "worker", "span", "view"] as const;
export type UrlKey = (typeof URL_KEYS)[number];
export type UrlState = Partial<Record<UrlKey, string>>;

interface HashPart {
  key: string;
  /** null for a bare part (TensorBoard's active-tab id) */
  value: string | null;
  raw: string;
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

export function parseHash(hash: string): HashPart[] {
  const body = hash.startsWith("#") ? hash.slice(1) : hash;
  if (body === "") return [];
  return body.split("&").map((raw) => {
    const eq = raw.indexOf("=");
    if (eq < 0) return { key: safeDecode(raw), value: null, raw };
    return { key: safeDecode(raw.slice(0, eq)), value: safeDecode(raw.slice(eq + 1)), raw };
  });
}

/** Read our keys from a hash string. */
export function stateFromHash(hash: string): UrlState {
  const state: UrlState = {};
  for (const part of parseHash(hash)) {
    if (part.value === null || !part.key.startsWith(PREFIX)) continue;
    const key = part.key.slice(PREFIX.length);
    if ((URL_KEYS as readonly string[]).includes(key) && part.value !== "") state[key as UrlKey] = part.value;
  }
  return state;
}

/**
 * Keys owned by view pages rather than the shell (the Trace view's time range `start`/`end` in
 * absolute µs, `q`, an initial search, and the Diff view's experiment `exp_run`/`exp_worker`/
 * `exp_span`; the Flame graph's `flame_op`, an operator to filter by; the Distributed view's `rank` and the Memory
 * view's `device` + `start`/`end`, which the Overview's evidence links set; the Diff view's `step`/`exp_step` and
 * the GPU view's `card`; the Kernel view's `op`, an operator whose kernels to show, and the Memory view's `at`, a
 * time whose live allocations to show; the Trace view's `cat`, a step-breakdown category whose events to highlight). The shell's writes keep them untouched; a view reads and writes them with
 * readViewUrlState / writeViewUrlState (e.g. a table links to the Trace view with
 * `writeViewUrlState({ q: name })` followed by `ctx.navigate("Trace")`).
 */
export const VIEW_URL_KEYS = ["start", "end", "q", "exp_run", "exp_worker", "exp_span", "rank", "device", "flame_op", "step", "exp_step", "card", "op", "at", "cat", "drill"] as const;
export type ViewUrlKey = (typeof VIEW_URL_KEYS)[number];
export type ViewUrlState = Partial<Record<ViewUrlKey, string>>;

function isViewKey(key: string): boolean {
  return key.startsWith(PREFIX) && (VIEW_URL_KEYS as readonly string[]).includes(key.slice(PREFIX.length));
}

/** Return `hash` with our keys replaced by `state`; every other part (view keys included) is kept byte for byte. */
export function hashWithState(hash: string, state: UrlState): string {
  const kept = parseHash(hash)
    .filter((p) => !(p.value !== null && p.key.startsWith(PREFIX) && !isViewKey(p.key)))
    .map((p) => p.raw)
    .filter((raw) => raw !== "");
  for (const key of URL_KEYS) {
    const value = state[key];
    if (value !== undefined && value !== "") {
      kept.push(`${encodeURIComponent(PREFIX + key)}=${encodeURIComponent(value)}`);
    }
  }
  return kept.length ? "#" + kept.join("&") : "";
}

/** Read the view-owned keys (see VIEW_URL_KEYS) from a hash string. */
export function viewStateFromHash(hash: string): ViewUrlState {
  const state: ViewUrlState = {};
  for (const part of parseHash(hash)) {
    if (part.value === null || part.value === "" || !isViewKey(part.key)) continue;
    state[part.key.slice(PREFIX.length) as ViewUrlKey] = part.value;
  }
  return state;
}

/**
 * Return `hash` with the view-owned keys named in `change` set (a string) or removed (undefined or
 * ""); every other part is kept byte for byte.
 */
export function hashWithViewState(hash: string, change: Partial<Record<ViewUrlKey, string | undefined>>): string {
  const touched = new Set(Object.keys(change).filter((k) => (VIEW_URL_KEYS as readonly string[]).includes(k)));
  const kept = parseHash(hash)
    .filter((p) => !(p.value !== null && p.key.startsWith(PREFIX) && touched.has(p.key.slice(PREFIX.length))))
    .map((p) => p.raw)
    .filter((raw) => raw !== "");
  for (const key of VIEW_URL_KEYS) {
    const value = change[key];
    if (touched.has(key) && value !== undefined && value !== "") {
      kept.push(`${encodeURIComponent(PREFIX + key)}=${encodeURIComponent(value)}`);
    }
  }
  return kept.length ? "#" + kept.join("&") : "";
}

/** The window whose URL carries the state: TensorBoard's page when reachable, else this frame. */
function stateWindow(): Window {
  try {
    const parent = window.parent;
    if (parent !== window) {
      // Throws a SecurityError when the parent is cross-origin.
      const href = parent.location.href;
      if (href) return parent;
    }
  } catch {
    // fall through
  }
  return window;
}

export function readUrlState(): UrlState {
  try {
    return stateFromHash(stateWindow().location.hash);
  } catch {
    return {};
  }
}

export function writeUrlState(state: UrlState): void {
  replaceHash((current) => hashWithState(current, state));
}

/**
 * The view-owned keys of the current entry: the URL's, over those the link that opened this entry set (kept in the
 * entry's history state, so that Forward to it reopens the page as the link asked even after the page consumed and
 * cleared them from the URL).
 */
export function readViewUrlState(): ViewUrlState {
  try {
    const target = stateWindow();
    return { ...linkedViewState(target.history.state), ...viewStateFromHash(target.location.hash) };
  } catch {
    return {};
  }
}

const HISTORY_KEY = "pytorchProfilerLink";

/** The view keys a link set, from a history entry's state object (ours, or someone else's: then none). */
export function linkedViewState(state: unknown): ViewUrlState {
  if (typeof state !== "object" || state === null) return {};
  const linked = (state as Record<string, unknown>)[HISTORY_KEY];
  if (typeof linked !== "object" || linked === null) return {};
  const out: ViewUrlState = {};
  for (const key of VIEW_URL_KEYS) {
    const value = (linked as Record<string, unknown>)[key];
    if (typeof value === "string" && value !== "") out[key] = value;
  }
  return out;
}

/** The view keys set (not removed) from hash `before` to hash `after`: what a link wrote for the page it opens. */
export function viewKeysSet(before: string, after: string): ViewUrlState {
  const old = viewStateFromHash(before);
  const now = viewStateFromHash(after);
  const out: ViewUrlState = {};
  for (const key of VIEW_URL_KEYS) if (now[key] !== undefined && now[key] !== old[key]) out[key] = now[key];
  return out;
}

/** Set view-owned keys in a new history entry: a drill-down inside a page (the Diff view's) that Back undoes. */
export function pushViewUrlState(change: Partial<Record<ViewUrlKey, string | undefined>>): void {
  beforeLinkWrites = null;
  const current = currentHash();
  if (current !== null) writeHash((hash) => hashWithViewState(hash, change), current);
}

/**
 * Call `listener` when the user moves through the history (Back, Forward) or edits the URL, until the returned
 * function is called: a page whose own entries (pushViewUrlState) the shell does not re-render follows them here.
 */
export function onViewUrlChange(listener: (state: ViewUrlState) => void): () => void {
  const target = stateWindow();
  const handler = (): void => { listener(readViewUrlState()); };
  target.addEventListener("popstate", handler);
  return () => { target.removeEventListener("popstate", handler); };
}

/** Set the shell's keys in a new history entry (a user's navigation: Back returns to the entry left). */
export function pushUrlState(state: UrlState): void {
  const before = beforeLinkWrites;
  beforeLinkWrites = null;
  writeHash((current) => hashWithState(current, state), before);
}

/** Set (string) or remove (undefined / "") view-owned keys; the shell's keys and the rest stay. */
export function writeViewUrlState(change: Partial<Record<ViewUrlKey, string | undefined>>): void {
  const before = currentHash();
  replaceHash((current) => hashWithViewState(current, change));
  if (beforeLinkWrites === null && before !== null) {
    // Remember the entry as it was until this task ends: a navigation in the same task (a link) pushes these
    // writes into the new entry and gives the old one back its own keys.
    beforeLinkWrites = before;
    queueMicrotask(() => { beforeLinkWrites = null; });
  }
}

/** The hash of the current entry before the view-key writes of this task (null: none written). */
let beforeLinkWrites: string | null = null;

function currentHash(): string | null {
  for (const target of [stateWindow(), window]) {
    try {
      return target.location.hash;
    } catch {
      // try the frame's own URL
    }
  }
  return null;
}

function replaceHash(rewrite: (current: string) => string): void {
  writeHash(rewrite);
}

/**
 * Rewrite the URL's hash: in place, or (`pushFrom` given) as a new history entry, the entry left getting the hash
 * `pushFrom` back. A rewrite that changes nothing writes nothing (and pushes no entry).
 */
function writeHash(rewrite: (current: string) => string, pushFrom?: string | null): void {
  const push = pushFrom !== undefined;
  for (const target of [stateWindow(), window]) {
    try {
      const current = target.location.hash;
      const next = rewrite(current);
      const same = (a: string, b: string): boolean => a === b || (a === "" && b === "#") || (a === "#" && b === "");
      const left = pushFrom ?? current;
      if (same(next, current) && (!push || same(left, current))) return;
      const url = new URL(target.location.href);
      if (push && !same(next, left)) {
        url.hash = left;
        target.history.replaceState(target.history.state, "", url.toString());
        url.hash = next;
        target.history.pushState({ [HISTORY_KEY]: viewKeysSet(left, next) }, "", url.toString());
      } else {
        url.hash = next;
        target.history.replaceState(target.history.state, "", url.toString());
      }
      return;
    } catch {
      // Parent not writable: try the frame's own URL next.
    }
  }
}

/**
 * Call `listener` when the user navigates the URL (back/forward, edited hash). Our own
 * replaceState writes fire no event.
 */
export function onUrlStateChange(listener: (state: UrlState) => void): void {
  const target = stateWindow();
  const handler = (): void => {
    listener(readUrlState());
  };
  try {
    target.addEventListener("hashchange", handler);
    target.addEventListener("popstate", handler);
  } catch {
    window.addEventListener("hashchange", handler);
  }
}
