/**
 * A DOM for the tests that render (linkedom): imported first, so that the modules under test find `document`
 * and `Node` as globals, as they do in the browser.
 */
import { parseHTML } from "linkedom";

const { window } = parseHTML("<!doctype html><html><head></head><body></body></html>");
const globals = globalThis as unknown as Record<string, unknown>;
const source = window as unknown as Record<string, unknown>;
for (const name of ["document", "Node", "Element", "HTMLElement", "Text"]) globals[name] = source[name];

/** A fresh element to render into. */
export function container(): HTMLElement {
  const el = window.document.createElement("div");
  window.document.body.appendChild(el);
  return el;
}

/** The data-testid values in `el`, in document order. */
export function testids(el: Element): string[] {
  return [...el.querySelectorAll("[data-testid]")].map((e) => e.getAttribute("data-testid") ?? "");
}
