/**
 * The Memory page's curve as a plotly figure: allocated (and reserved) bytes of one device over time as step
 * lines, its peak marked and labelled, and the allocation the user clicked as a band from its allocation to its
 * release. A pure function of what is shown, so a theme change or a new mark simply builds it again.
 */
import { formatBytes, formatMs, isNum } from "../../format";
import type { Theme } from "../../theme";
import { type Data, type Figure, type Layout, plotlyText, shorten } from "../common/charts";
import { axisUnit, type CurveDevice, type MemoryEvent, peakLabel, peakOf } from "./memoryData";

const COLOR_ALLOC = "#4e79a7";
const COLOR_RESERVED = "#f28e2b";
const COLOR_PEAK = "#e15759";
const COLOR_MARK = "#59a14f";

export interface CurveInput {
  dev: CurveDevice;
  /** absolute µs of the page's time origin: x is ms from it */
  origin: number;
  /** the selected range (absolute µs), null for the whole trace */
  range: readonly [number, number] | null;
  /** the allocation marked on this device, if any */
  marked: MemoryEvent | null;
}

/** The step lines of allocated and (where any was reserved) reserved bytes, in `unitBytes`. */
function curveLines(dev: CurveDevice, x: number[], unitBytes: number, maxReserved: number): Data[] {
  const pts = dev.points;
  const data: Data[] = [
    {
      type: "scatter",
      mode: "lines",
      name: "Allocated",
      x,
      y: pts.map((p) => p[1] / unitBytes),
      customdata: pts.map((p) => formatBytes(p[1])),
      line: { shape: "hv", color: COLOR_ALLOC, width: 1.6 },
      fill: "tozeroy",
      fillcolor: "rgba(78,121,167,0.16)",
      hovertemplate: "Allocated %{customdata}<extra></extra>",
    },
  ];
  if (maxReserved > 0) {
    data.push({
      type: "scatter",
      mode: "lines",
      name: "Reserved",
      x,
      y: pts.map((p) => p[2] / unitBytes),
      customdata: pts.map((p) => formatBytes(p[2])),
      line: { shape: "hv", color: COLOR_RESERVED, width: 1.4, dash: "dot" },
      hovertemplate: "Reserved %{customdata}<extra></extra>",
    });
  }
  return data;
}

/** The marked allocation: a band with solid (allocated) and dashed (released) edges and one label beside it. */
function markShapes(m: MemoryEvent, origin: number, xMin: number, xMax: number, theme: Theme): { shapes: NonNullable<Layout["shapes"]>; label: NonNullable<Layout["annotations"]>[number] } {
  const xa = isNum(m.alloc_us) ? (m.alloc_us - origin) / 1000 : xMin;
  const xf = isNum(m.free_us) ? (m.free_us - origin) / 1000 : xMax;
  const shapes: NonNullable<Layout["shapes"]> = [
    { type: "rect", xref: "x", yref: "paper", x0: xa, x1: xf, y0: 0, y1: 1, fillcolor: "rgba(89,161,79,0.14)", line: { width: 0 }, layer: "below" },
  ];
  const edge = (xv: number, dash: "solid" | "dash"): void => {
    shapes.push({ type: "line", xref: "x", yref: "paper", x0: xv, x1: xv, y0: 0, y1: 1, line: { color: COLOR_MARK, width: 2, dash } });
  };
  if (isNum(m.alloc_us)) edge(xa, "solid");
  if (isNum(m.free_us)) edge(xf, "dash");
  // One label for the pair, beside the band on the side with more room.
  const from = isNum(m.alloc_us) ? `alloc ${formatMs(m.alloc_us - origin)}` : "allocated before the trace";
  const to = isNum(m.free_us) ? `free ${formatMs(m.free_us - origin)}` : "not freed in the trace";
  const right = (xa + xf) / 2 > xMin + (xMax - xMin) / 2;
  const label = {
    x: right ? xa : xf,
    y: 0.02,
    xref: "x" as const,
    yref: "paper" as const,
    text: plotlyText(` ${shorten(m.name, 48)} · ${formatBytes(m.size_bytes)} · ${from} → ${to} `),
    showarrow: false,
    xanchor: right ? ("right" as const) : ("left" as const),
    yanchor: "bottom" as const,
    font: { color: COLOR_MARK, size: 11 },
    bgcolor: theme === "dark" ? "rgba(43,44,47,0.85)" : "rgba(255,255,255,0.85)",
  };
  return { shapes, label };
}

export function memoryFigure(input: CurveInput, theme: Theme): Figure {
  const { dev, origin, range, marked } = input;
  const pts = dev.points;
  const peak = peakOf(dev);
  const maxReserved = pts.reduce((m, p) => Math.max(m, p[2]), 0);
  const unit = axisUnit(Math.max(peak.bytes, maxReserved, dev.peak_reserved_bytes ?? 0));
  const x = pts.map((p) => (p[0] - origin) / 1000);
  const xMin = x[0] ?? 0;
  const xMax = x[x.length - 1] ?? 0;
  const data = curveLines(dev, x, unit.bytes, maxReserved);
  const px = (peak.t - origin) / 1000;
  const py = peak.bytes / unit.bytes;
  const label = plotlyText(peakLabel(dev, origin));
  data.push({
    type: "scatter",
    mode: "markers",
    name: "Peak",
    x: [px],
    y: [py],
    marker: { color: COLOR_PEAK, size: 10, symbol: "diamond", line: { width: 1, color: "#ffffff" } },
    hovertemplate: `${label}<extra></extra>`,
    showlegend: false,
  });
  const rightHalf = px > xMin + (xMax - xMin) / 2;
  const annotations: NonNullable<Layout["annotations"]> = [
    {
      x: px,
      y: py,
      xref: "x",
      yref: "y",
      text: `<b>${label}</b>`,
      showarrow: true,
      arrowhead: 0,
      arrowwidth: 1,
      arrowcolor: COLOR_PEAK,
      ax: rightHalf ? -36 : 36,
      ay: -22,
      xanchor: rightHalf ? "right" : "left",
      font: { color: COLOR_PEAK, size: 12 },
      bgcolor: theme === "dark" ? "rgba(43,44,47,0.8)" : "rgba(255,255,255,0.8)",
    },
  ];
  let shapes: NonNullable<Layout["shapes"]> = [];
  if (marked) {
    const mark = markShapes(marked, origin, xMin, xMax, theme);
    shapes = mark.shapes;
    annotations.push(mark.label);
  }
  return {
    data,
    layout: {
      xaxis: range
        ? { title: { text: "Time (ms)" }, range: [(range[0] - origin) / 1000, (range[1] - origin) / 1000], autorange: false, zeroline: false }
        : { title: { text: "Time (ms)" }, autorange: true, zeroline: false },
      yaxis: { title: { text: `Memory (${unit.label})` }, fixedrange: true, rangemode: "tozero", zeroline: false },
      hovermode: "x unified",
      dragmode: "zoom",
      showlegend: true,
      legend: { orientation: "h", x: 1, xanchor: "right", y: 1.02, yanchor: "bottom" },
      margin: { l: 64, r: 20, t: 32, b: 48 },
      annotations,
      shapes,
    },
  };
}
