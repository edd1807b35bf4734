/**
 * CSV export that works in TensorBoard and inside VS Code's sandboxed webview: a Blob URL behind an
 * <a download> link, and an in-page fallback (clipboard, then a textarea overlay). Failures are
 * always reported on the page, never swallowed.
 */
import { h } from "../../dom";
import { copyText, inVsCode, showTextOverlay, showToast } from "./ui";

export type CsvValue = string | number | boolean | null | undefined;

/**
 * What a spreadsheet would run as a formula: a text cell starting with `=`, `+`, `-`, `@`, a tab or a carriage
 * return (OWASP's CSV injection list). Trace names are anyone's text (`=HYPERLINK(...)` as an operator name).
 */
const FORMULA_START = /^[=+\-@\t\r]/;

function cell(v: CsvValue): string {
  if (v === null || v === undefined) return "";
  if (typeof v === "number") return Number.isFinite(v) ? String(v) : ""; // a number (-5 too) stays a number
  let s = String(v);
  if (FORMULA_START.test(s)) s = `'${s}`; // shown as the text it is, never evaluated (OWASP)
  return /[",\r\n]/.test(s) || s !== s.trim() ? `"${s.replace(/"/g, '""')}"` : s;
}

/** RFC 4180 text (CRLF line ends, quotes doubled); text that a spreadsheet would evaluate starts with `'`. */
export function toCsv(header: readonly string[], rows: readonly (readonly CsvValue[])[]): string {
  return [header, ...rows].map((r) => r.map(cell).join(",")).join("\r\n") + "\r\n";
}

/** A file name from parts, safe on every OS. */
export function csvFileName(...parts: string[]): string {
  const stem = parts
    .join("_")
    .replace(/[^A-Za-z0-9._-]+/g, "_")
    .replace(/_+/g, "_")
    .replace(/^_|_$/g, "");
  return `${stem.slice(0, 150) || "export"}.csv`;
}

/** Start a download through a Blob URL + <a download>; throws if the browser refuses. */
export function downloadText(filename: string, text: string, type = "text/csv;charset=utf-8"): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = h("a", { class: "ptp-offscreen", attrs: { href: url, download: filename } }, filename);
  document.body.appendChild(link);
  try {
    link.click();
  } finally {
    link.remove();
    window.setTimeout(() => {
      URL.revokeObjectURL(url);
    }, 60_000);
  }
}

function overlay(text: string, rows: number, why: string): void {
  showTextOverlay({
    title: `CSV (${rows} row${rows === 1 ? "" : "s"})`,
    message: why,
    text,
    testid: "csv-overlay",
  });
}

/** The "Download CSV" action: download, or the overlay when the download cannot start. */
export function exportCsvDownload(filename: string, text: string, rows: number): void {
  try {
    downloadText(filename, text);
  } catch (err) {
    const reason = err instanceof Error && err.message ? ` (${err.message})` : "";
    overlay(text, rows, `The download could not start here${reason}. Copy the CSV below instead.`);
    return;
  }
  if (inVsCode()) {
    // VS Code's webview drops downloads without telling the page: offer the text as well.
    overlay(text, rows, "Downloads may be blocked inside VS Code. If no file was saved, copy the CSV below.");
  }
}

/** The "Copy CSV" action: clipboard, or the overlay when copying is blocked. */
export async function exportCsvCopy(text: string, rows: number): Promise<void> {
  if (await copyText(text)) {
    showToast(`Copied ${rows} row${rows === 1 ? "" : "s"} as CSV`);
  } else {
    overlay(text, rows, "Copying to the clipboard is blocked here. Select the text below and copy it by hand.");
  }
}
