/**
 * Follow TensorBoard's light/dark theme. TensorBoard 2.x toggles the class `dark-mode` on its
 * own document's <body> (for "browser default" it derives it from prefers-color-scheme itself),
 * so when the parent document is reachable that class is the truth; a MutationObserver keeps
 * us in sync. Otherwise (standalone, cross-origin parent) fall back to prefers-color-scheme.
 * The theme is published as `data-theme` on <html>; colours are CSS variables in styles.css.
 */

export type Theme = "light" | "dark";
type Listener = (theme: Theme) => void;

export interface ThemeSource {
  readonly current: Theme;
  /** subscribe; returns an unsubscribe function */
  subscribe(listener: Listener): () => void;
}

function parentBody(): HTMLElement | null {
  try {
    if (window.parent === window) return null;
    return window.parent.document.body;
  } catch {
    return null;
  }
}

export function watchTheme(root: HTMLElement = document.documentElement): ThemeSource {
  const listeners = new Set<Listener>();
  const media = window.matchMedia("(prefers-color-scheme: dark)");
  let current: Theme = "light";

  const compute = (): Theme => {
    const body = parentBody();
    if (body) return body.classList.contains("dark-mode") ? "dark" : "light";
    return media.matches ? "dark" : "light";
  };

  const apply = (): void => {
    const next = compute();
    const changed = next !== current || root.dataset["theme"] !== next;
    current = next;
    root.dataset["theme"] = next;
    root.style.colorScheme = next;
    if (changed) for (const l of listeners) l(next);
  };

  apply();
  const body = parentBody();
  if (body) {
    try {
      new MutationObserver(apply).observe(body, { attributes: true, attributeFilter: ["class"] });
    } catch {
      // MutationObserver across frames failed: the media query below still applies.
    }
  }
  media.addEventListener("change", apply);

  return {
    get current() {
      return current;
    },
    subscribe(listener: Listener) {
      listeners.add(listener);
      return () => {
        listeners.delete(listener);
      };
    },
  };
}
