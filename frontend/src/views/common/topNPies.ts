/**
 * The "Time by …" card of the Operator and Kernel pages: a Top N input, a line about the items, and one
 * "top N + Other" pie per measure, all redrawn when N changes. Items keep their colour across the card's pies.
 */
import { card, infoIcon } from "../../components";
import { type Child, h } from "../../dom";
import { formatDuration } from "../../format";
import { type Charts, chartDiv, ColorMap } from "./charts";
import { type Item, pieLayout, pieTrace, topN, topNInput } from "./pie";

/** One pie of the card: the items it sums (µs) and how its legend names them. */
export interface TopNPie {
  /** the chart's test id is `pie-<key>` */
  key: string;
  title: string;
  help: string;
  items: () => Item[];
  /** hover line under the name ("total", "device self time") */
  what: string;
  labelMax: number;
  /** legend names for the slices' full names (e.g. short kernel names), given all of them at once */
  labels?: (names: string[]) => (name: string) => string;
}

export interface TopNPiesOptions {
  testid: string;
  heading: string;
  /** what the items are, plural: "kernels" */
  noun: string;
  /** the line beside the Top N input */
  note: HTMLElement;
  /** class of the pies' row, besides ptp-pies */
  pieClass?: string;
  pies: TopNPie[];
  /** more pies after the top-N ones (drawn by the caller) */
  extra?: Child;
  height: number;
}

export function topNPiesCard(opts: TopNPiesOptions): { el: HTMLElement; draw: (charts: Charts) => Promise<void> } {
  const divs = opts.pies.map((p) => ({ p, div: chartDiv(`pie-${p.key}`, opts.height) }));
  const colors = new ColorMap();
  let charts: Charts | null = null;
  const drawPies = async (): Promise<void> => {
    if (!charts) return;
    for (const { p, div } of divs) {
      const slices = topN(p.items(), top.value());
      colors.assign(slices.filter((s) => !s.other).map((s) => s.name));
      const label = p.labels?.(slices.map((s) => s.name));
      await charts.draw(div, () => ({
        data: [pieTrace(slices, { format: formatDuration, colors, what: p.what, labelMax: p.labelMax, label })],
        layout: pieLayout(),
      }));
    }
  };
  const top = topNInput(`${opts.noun[0]?.toUpperCase() ?? ""}${opts.noun.slice(1)} shown in the pie${divs.length > 1 ? "s" : ""}`, () => { void drawPies(); });
  const title = `The N largest ${opts.noun} get their own slice; all others are summed in "Other", so every share is of the whole.`;
  const el = card(
    { testid: opts.testid },
    h("div", { class: "ptp-card-head" }, h("h3", {}, opts.heading), h("label", { class: "ptp-picker", title }, "Top N", top.input), opts.note),
    h(
      "div",
      { class: opts.pieClass ? `ptp-pies ${opts.pieClass}` : "ptp-pies" },
      divs.map(({ p, div }) => h("div", {}, h("div", { class: "ptp-pie-title" }, p.title, infoIcon(p.help)), div)),
      opts.extra,
    ),
  );
  return {
    el,
    draw: async (c) => {
      charts = c;
      await drawPies();
    },
  };
}
