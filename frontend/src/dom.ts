/**
 * Tiny typed DOM helpers. Strings always become text nodes (never parsed as HTML), so
 * trace-derived data (file names, kernel names, error sentences) is safe to pass anywhere.
 */

export type Child = Node | string | number | null | undefined | false | readonly Child[];

type EventHandlers = {
  [K in keyof HTMLElementEventMap as `on${Capitalize<K>}`]?: (event: HTMLElementEventMap[K]) => void;
};

export interface Attrs extends EventHandlers {
  class?: string | readonly (string | false | null | undefined)[];
  /** data-testid, used by the browser tests */
  testid?: string | undefined;
  dataset?: Record<string, string>;
  style?: Record<string, string | undefined>;
  /** any other attribute; null/undefined/false omit it, true sets it empty */
  attrs?: Record<string, string | number | boolean | null | undefined>;
  title?: string;
  id?: string;
  role?: string;
}

function appendChildren(parent: Node, children: readonly Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (typeof child === "string" || typeof child === "number") {
      parent.appendChild(document.createTextNode(String(child)));
    } else if (child instanceof Node) {
      parent.appendChild(child);
    } else {
      appendChildren(parent, child);
    }
  }
}

/** Create an element: h("div", { class: "card" }, "text", h("b", {}, name)). */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  const { class: cls, testid, dataset, style, attrs, title, id, role, ...handlers } = props;
  if (cls !== undefined) {
    const name = typeof cls === "string" ? cls : cls.filter(Boolean).join(" ");
    if (name) el.className = name;
  }
  if (testid !== undefined) el.dataset["testid"] = testid;
  if (dataset) Object.assign(el.dataset, dataset);
  if (style) {
    for (const [prop, v] of Object.entries(style)) if (v !== undefined) el.style.setProperty(prop, v);
  }
  if (attrs) {
    for (const [name, v] of Object.entries(attrs)) {
      if (v === null || v === undefined || v === false) continue;
      el.setAttribute(name, v === true ? "" : String(v));
    }
  }
  if (title !== undefined) el.title = title;
  if (id !== undefined) el.id = id;
  if (role !== undefined) el.setAttribute("role", role);
  for (const [key, handler] of Object.entries(handlers) as [string, EventListener | undefined][]) {
    if (key.startsWith("on") && typeof handler === "function") el.addEventListener(key.slice(2).toLowerCase(), handler);
  }
  appendChildren(el, children);
  return el;
}

/** Replace all children of `parent` with `children`. */
export function replaceChildren(parent: Element, ...children: Child[]): void {
  parent.replaceChildren();
  appendChildren(parent, children);
}

/** Add an event listener; returns the function that removes it (for a page's cleanups). */
export function listen<K extends keyof HTMLElementEventMap>(target: HTMLElement, type: K,
  fn: (e: HTMLElementEventMap[K]) => void, opts?: AddEventListenerOptions): () => void {
  target.addEventListener(type, fn, opts);
  return () => { target.removeEventListener(type, fn, opts); };
}
