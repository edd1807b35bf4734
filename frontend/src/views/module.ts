/**
 * The Module page (GET ./modules and ./modules/timeline): the nn.Module hierarchy as a tree table,
 * an icicle chart of device (or host) time per module with click-to-zoom, and a timeline of the
 * module calls by nesting depth. PyTorch Lightning runs get the title "Lightning", a table of the
 * Lightning hooks and, when recorded, the tree of Lightning's own module annotations.
 */
import { card, infoIcon } from "../components";
import { h, replaceChildren } from "../dom";
import { formatDuration, formatExactUs, formatInt } from "../format";
import type { Theme } from "../theme";
import { Charts, chartDiv, ColorMap, type Data, type Figure, plotlyText } from "./common/charts";
import { csvFileName } from "./common/csv";
import { clampedName, DataTable } from "./common/table";
import { loadSources, openFrame, parseFrame } from "./common/callStack";
import type { Frame } from "./common/sourceFrames";
import { rowLinkButton, traceLinker } from "./common/traceLink";
import { fetchFor, left, loadErrorCard } from "./common/ui";
import { type TreeColumn, type TreeItem, treeItems, TreeTable } from "./moduleTree";
import type { ViewContext } from "./types";

export interface ModuleNode {
  name: string;
  id?: number;
  occurrences: number;
  operators: number;
  host_total_us: number;
  host_self_us: number;
  device_total_us: number;
  device_self_us: number;
  backward_host_us?: number;
  backward_device_us?: number;
  avg_us: number;
  /** the module's forward frame, `file(line): forward` */
  source?: string | null;
  children: ModuleNode[];
}

export interface LightningModule {
  name: string;
  occurrences: number;
  host_total_us: number;
  children: LightningModule[];
}

export interface LightningHook {
  name: string;
  calls: number;
  host_total_us: number;
}

export interface ModulesResponse {
  framework: string | null;
  modules: ModuleNode[];
  lightning_modules: LightningModule[];
  hooks: LightningHook[];
}

export interface ModuleOccurrence {
  name: string;
  start_us: number;
  dur_us: number;
  depth: number;
}

export const MODULE_HELP = {
  occurrences: "How many times the module's forward ran in this trace.",
  operators: "Operators called directly in the module (not inside its sub-modules), over all occurrences.",
  hostTotal: "Host (CPU) time of the module's forward calls, summed over occurrences, sub-modules included.",
  hostSelf: "Host total minus the sub-modules and the operators called directly in the module: the module's own Python overhead.",
  deviceTotal: "GPU time of the kernels launched inside the module, sub-modules included, summed over occurrences.",
  deviceSelf: "GPU time of the kernels launched by operators called directly in the module (not in its sub-modules).",
  backwardHost: "Host time of the backward pass of this module's operators (autograd roots joined through the trace's forward→backward flows), sub-modules included.",
  backwardDevice: "GPU time of that backward pass, sub-modules included.",
  mean: "Mean time per call, marked device or host: device total / occurrences when the module ran GPU work, else host total / occurrences.",
  containerOperators: "0: this module calls no operator itself (a container such as Sequential or an encoder); its operators are counted in its sub-modules.",
  hookCalls: "How many times Lightning ran the hook.",
  hookTotal: "Host time spent in the hook, summed over its calls.",
  hookMean: "Host total / calls.",
  plOccurrences: "How many times Lightning recorded the module.",
  plTotal: "Host time of the module's recorded calls, summed.",
};

const LIGHTNING = "pytorch-lightning";
const TIMELINE_MAX = 6000;
const ROOT_ID = "\u0000root";

type Metric = "device" | "host";

const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) ? v : 0);

/** The clock of a module's mean: "device" where it ran GPU work (the analysis divides device total), else "host". */
const meanClock = (n: ModuleNode): string => (num(n.device_total_us) > 0 ? "device" : "host");

const MODULE_PREFIX = "nn.Module: ";

/** A module's source: its forward frame, opened in VS Code or copied like any call-stack frame. */
function sourceLink(f: Frame): HTMLElement {
  const where = `${f.path ?? ""}:${String(f.line ?? "")}`;
  const link = rowLinkButton({ label: "source", title: `The module's forward: ${where} (open in VS Code, else copy)`, testid: "module-source", onClick: () => { openFrame(f); } });
  link.dataset["path"] = f.path ?? "";
  link.dataset["line"] = String(f.line ?? "");
  return link;
}

/** "Linear_3" → "Linear": one colour per module class. */
export function moduleClass(name: string): string {
  return name.replace(/_\d+$/, "");
}

function arr<T>(v: unknown): T[] {
  return Array.isArray(v) ? (v as T[]) : [];
}

function durCol<N>(key: string, label: string, help: string, get: (n: N) => number): TreeColumn<N> {
  return { key, label, help, numeric: true, value: get, text: (n) => formatDuration(get(n)), title: (n) => `${formatExactUs(get(n))}\n${help}` };
}

function moduleColumns(hasDevice: boolean): TreeColumn<ModuleNode>[] {
  const cols: TreeColumn<ModuleNode>[] = [
    { key: "occurrences", label: "Occurrences", help: MODULE_HELP.occurrences, numeric: true, value: (n) => num(n.occurrences), text: (n) => formatInt(n.occurrences) },
    {
      key: "operators",
      label: "Operators",
      help: MODULE_HELP.operators,
      numeric: true,
      value: (n) => num(n.operators),
      // a container (Sequential, an encoder) calls no operator itself: all its work is in its sub-modules
      text: (n) => (num(n.operators) === 0 && arr(n.children).length ? "0 (in sub-modules)" : formatInt(n.operators)),
      title: (n) => (num(n.operators) === 0 && arr(n.children).length ? MODULE_HELP.containerOperators : MODULE_HELP.operators),
    },
    durCol("host_total", "Host total", MODULE_HELP.hostTotal, (n) => num(n.host_total_us)),
    durCol("host_self", "Host self", MODULE_HELP.hostSelf, (n) => num(n.host_self_us)),
  ];
  if (hasDevice) {
    cols.push(
      durCol("device_total", "Device total", MODULE_HELP.deviceTotal, (n) => num(n.device_total_us)),
      durCol("device_self", "Device self", MODULE_HELP.deviceSelf, (n) => num(n.device_self_us)),
    );
  }
  cols.push(durCol("backward_host", "Backward host", MODULE_HELP.backwardHost, (n) => num(n.backward_host_us ?? 0)));
  if (hasDevice) {
    cols.push(durCol("backward_device", "Backward device", MODULE_HELP.backwardDevice, (n) => num(n.backward_device_us ?? 0)));
  }
  cols.push({
    key: "mean",
    label: "Mean per call",
    help: MODULE_HELP.mean,
    numeric: true,
    value: (n) => num(n.avg_us),
    // which clock the mean is on, per row: device time where the module ran GPU work, else host time
    text: (n) => `${formatDuration(num(n.avg_us))} ${meanClock(n)}`,
    title: (n) => `${formatExactUs(num(n.avg_us))} of ${meanClock(n)} time per call\n${MODULE_HELP.mean}`,
  });
  return cols;
}

function walkItems<N>(items: readonly TreeItem<N>[], visit: (it: TreeItem<N>) => void): void {
  for (const it of items) {
    visit(it);
    walkItems(it.children, visit);
  }
}

/** Icicle of the module tree; sizes are the metric's totals (a node's area = its total time). */
export function icicleFigure(roots: readonly TreeItem<ModuleNode>[], metric: Metric, colors: ColorMap, theme: Theme): Figure {
  const total = (n: ModuleNode): number => (metric === "device" ? num(n.device_total_us) : num(n.host_total_us));
  const all = roots.reduce((s, r) => s + total(r.node), 0);
  // Several top-level modules (model, loss, …) hang under one "All modules" bar; a single one is the root.
  const single = roots.length === 1;
  const ids: string[] = single ? [] : [ROOT_ID];
  const labels: string[] = single ? [] : ["All modules"];
  const parents: string[] = single ? [] : [""];
  const values: number[] = single ? [] : [0];
  const fill: string[] = single ? [] : [theme === "dark" ? "#5f6368" : "#bdbdbd"];
  const custom: string[][] = single ? [] : [[formatDuration(all), formatDuration(0), "", "All modules"]];
  walkItems(roots, (it) => {
    const t = total(it.node);
    const inKids = it.children.reduce((s, c) => s + total(c.node), 0);
    const own = Math.max(0, t - inKids);
    ids.push(it.key);
    parents.push(it.parent ? it.parent.key : single ? "" : ROOT_ID);
    labels.push(plotlyText(it.node.name));
    values.push(own);
    fill.push(colors.get(moduleClass(it.node.name)));
    custom.push([formatDuration(t), formatDuration(own), formatInt(it.node.occurrences), plotlyText(it.node.name)]);
  });
  const what = metric === "device" ? "device" : "host";
  const trace = {
    type: "icicle",
    ids,
    labels,
    parents,
    values,
    branchvalues: "remainder",
    customdata: custom,
    marker: { colors: fill, line: { width: 1, color: theme === "dark" ? "#2b2c2f" : "#ffffff" } },
    texttemplate: "%{label}<br>%{customdata[0]}",
    hovertemplate: `<b>%{customdata[3]}</b><br>${what} total %{customdata[0]} · %{percentRoot:.1%} of all<br>not in sub-modules %{customdata[1]}<br>%{customdata[2]} occurrences<extra></extra>`,
    tiling: { orientation: "v", pad: 0 },
    pathbar: { visible: true, side: "top", thickness: 22 },
    maxdepth: 6,
    insidetextfont: { size: 12 },
  };
  return { data: [trace as unknown as Data], layout: { margin: { l: 4, r: 4, t: 4, b: 4 } } };
}

/** Module calls as horizontal bars per nesting depth; x in ms from the first call. */
export function timelineFigure(occurrences: readonly ModuleOccurrence[], colors: ColorMap): Figure {
  const t0 = occurrences.reduce((m, o) => Math.min(m, o.start_us), Infinity);
  const depths = [...new Set(occurrences.map((o) => o.depth))].sort((a, b) => a - b);
  const trace = {
    type: "bar",
    orientation: "h",
    y: occurrences.map((o) => o.depth),
    x: occurrences.map((o) => o.dur_us / 1000),
    base: occurrences.map((o) => (o.start_us - t0) / 1000),
    width: 0.84,
    text: occurrences.map((o) => plotlyText(o.name)),
    textposition: "inside",
    insidetextanchor: "start",
    textfont: { size: 11 },
    textangle: 0,
    constraintext: "both",
    cliponaxis: true,
    customdata: occurrences.map((o) => [plotlyText(o.name), `${((o.start_us - t0) / 1000).toFixed(3)} ms`, formatDuration(o.dur_us)]),
    hovertemplate: "<b>%{customdata[0]}</b><br>start %{customdata[1]}<br>duration %{customdata[2]}<extra></extra>",
    marker: { color: occurrences.map((o) => colors.get(moduleClass(o.name))), line: { width: 0.5, color: "rgba(0,0,0,0.25)" } },
  };
  return {
    data: [trace as unknown as Data],
    layout: {
      barmode: "overlay",
      bargap: 0,
      showlegend: false,
      hovermode: "closest",
      uniformtext: { mode: "hide", minsize: 9 },
      xaxis: { title: { text: "Time (ms from the first module call)" }, zeroline: false },
      yaxis: { autorange: "reversed", tickvals: depths, ticktext: depths.map((d) => `Depth ${d}`), fixedrange: true, zeroline: false, showgrid: false },
      margin: { l: 72, r: 16, t: 8, b: 44 },
    },
  };
}

function emptyCard(lightning: boolean): HTMLElement {
  return card(
    { class: "ptp-empty", testid: "module-empty", title: "No module hierarchy in this trace" },
    h(
      "p",
      {},
      lightning
        ? "Lightning's hooks were recorded (below), but no nn.Module calls. "
        : "The trace has no nn.Module calls. ",
      "Record with ",
      h("code", {}, "with_stack=True"),
      " or ",
      h("code", {}, "with_modules=True"),
      " so that the profiler keeps the Python frames of each module's forward:",
    ),
    h("pre", { class: "ptp-code" }, h("code", {}, "torch.profiler.profile(..., with_stack=True)  # or with_modules=True")),
  );
}

export async function render(container: HTMLElement, ctx: ViewContext): Promise<(() => void) | undefined> {
  replaceChildren(container, h("p", { class: "ptp-muted" }, "Loading modules…"));
  let data: ModulesResponse;
  try {
    const [raw] = await Promise.all([fetchFor<Partial<ModulesResponse> | null>(ctx, "modules"), loadSources(ctx)]);
    data = {
      framework: typeof raw?.framework === "string" ? raw.framework : null,
      modules: arr<ModuleNode>(raw?.modules),
      lightning_modules: arr<LightningModule>(raw?.lightning_modules),
      hooks: arr<LightningHook>(raw?.hooks),
    };
  } catch (err) {
    if (!left(ctx)) replaceChildren(container, loadErrorCard(err, "the modules"));
    return undefined;
  }
  if (left(ctx)) return undefined;

  const lightning = data.framework === LIGHTNING;
  const items = treeItems(data.modules, (n) => arr<ModuleNode>(n.children));
  const flat: TreeItem<ModuleNode>[] = [];
  walkItems(items, (it) => flat.push(it));
  const count = flat.length;
  const hasDevice = flat.some((it) => num(it.node.device_total_us) > 0);
  let metric: Metric = hasDevice ? "device" : "host";

  const title = h(
    "div",
    { class: "ptp-page-head" },
    h("h2", { testid: "module-title" }, lightning ? "Lightning" : "Modules"),
    h(
      "span",
      { class: "ptp-muted", testid: "module-subtitle" },
      count
        ? `${formatInt(count)} modules in the nn.Module hierarchy · times summed over every call${lightning ? " · PyTorch Lightning" : ""}`
        : lightning
          ? "PyTorch Lightning run"
          : "",
    ),
  );

  const sections: (HTMLElement | null)[] = [title];
  const colors = new ColorMap();
  let icicleDiv: HTMLElement | null = null;
  let timelineDiv: HTMLElement | null = null;
  let timelineCard: HTMLElement | null = null;

  if (count === 0) {
    sections.push(emptyCard(lightning));
  } else {
    const moduleLink = traceLinker(ctx);
    const tree = new TreeTable<ModuleNode>({
      testid: "module-tree",
      nameLabel: "Module",
      name: (n) => n.name,
      children: (n) => arr<ModuleNode>(n.children),
      columns: moduleColumns(hasDevice),
      openDepth: 1,
      noun: "modules",
      // the module's calls: its "nn.Module: <name>" frames, found and stepped through in the Trace view
      nameExtra: (n) => [moduleLink(`${MODULE_PREFIX}${n.name}`), n.source ? sourceLink(parseFrame(n.source)) : null],
    });
    tree.setRoots(data.modules);
    sections.push(
      card(
        { testid: "card-module-tree" },
        h("div", { class: "ptp-card-head" }, h("h3", {}, "Module tree"), infoIcon("Modules are nn.Module forward calls, nested as they ran; a module's numbers sum all its calls.")),
        tree.el,
      ),
    );

    icicleDiv = chartDiv("module-icicle", 420);
    const metricSelect = h(
      "select",
      {
        testid: "module-metric",
        attrs: { "aria-label": "Time shown in the chart" },
        onChange: () => {
          metric = metricSelect.value === "host" ? "host" : "device";
          drawIcicle();
        },
      },
      h("option", { attrs: { value: "device", selected: metric === "device", disabled: !hasDevice } }, "Device time"),
      h("option", { attrs: { value: "host", selected: metric === "host" } }, "Host time"),
    );
    sections.push(
      card(
        { testid: "card-module-icicle" },
        h(
          "div",
          { class: "ptp-card-head" },
          h("h3", {}, "Time by module"),
          h("label", { class: "ptp-picker", title: hasDevice ? "GPU time of the kernels each module launched, or its host (CPU) time" : "This trace has no GPU time" }, "Show", metricSelect),
          h("span", { class: "ptp-muted" }, "Click a module to zoom into it; click the bar above to zoom out."),
        ),
        icicleDiv,
      ),
    );

    timelineDiv = chartDiv("module-timeline", 200);
    timelineCard = card(
      { testid: "card-module-timeline" },
      h("div", { class: "ptp-card-head" }, h("h3", {}, "Module calls over time"), h("span", { class: "ptp-muted", testid: "module-timeline-note" }, "Loading…")),
      timelineDiv,
    );
    sections.push(timelineCard);
  }

  if (lightning) {
    const hooks = new DataTable<LightningHook>({
      testid: "lightning-hooks-table",
      csvName: () => csvFileName("lightning_hooks", ctx.run, ctx.worker, `span${ctx.span}`),
      emptyText: "No Lightning hook was recorded.",
    });
    hooks.setData({
      columns: [
        { key: "name", label: "Hook", value: (r) => r.name, render: (r) => clampedName(r.name, "hook-name"), title: (r) => r.name, cls: "ptp-name-col" },
        { key: "calls", label: "Calls", help: MODULE_HELP.hookCalls, numeric: true, value: (r) => num(r.calls), text: (r) => formatInt(r.calls) },
        { key: "total", label: "Host total", help: MODULE_HELP.hookTotal, numeric: true, value: (r) => num(r.host_total_us), text: (r) => formatDuration(r.host_total_us), exact: (r) => formatExactUs(r.host_total_us), csvHeader: "Host total (us)" },
        {
          key: "mean",
          label: "Mean",
          help: MODULE_HELP.hookMean,
          numeric: true,
          value: (r) => (num(r.calls) > 0 ? num(r.host_total_us) / r.calls : null),
          text: (r) => (num(r.calls) > 0 ? formatDuration(num(r.host_total_us) / r.calls) : "—"),
          csvHeader: "Mean (us)",
        },
      ],
      rows: data.hooks,
      searches: [{ key: "name", label: "Search hooks", placeholder: "Search hook names", text: (r) => r.name }],
      sort: { key: "total", dir: "desc" },
      rowKey: (r) => r.name,
    });
    const plCards: HTMLElement[] = [
      card(
        { testid: "card-lightning-hooks" },
        h("div", { class: "ptp-card-head" }, h("h3", {}, "Lightning hooks"), infoIcon("Lightning's [pl][profile] annotations: the training loop's hooks and strategy calls, by name.")),
        hooks.el,
      ),
    ];
    if (data.lightning_modules.length) {
      const plTree = new TreeTable<LightningModule>({
        testid: "lightning-module-tree",
        nameLabel: "Lightning module",
        name: (n) => n.name,
        children: (n) => arr<LightningModule>(n.children),
        columns: [
          { key: "occurrences", label: "Occurrences", help: MODULE_HELP.plOccurrences, numeric: true, value: (n) => num(n.occurrences), text: (n) => formatInt(n.occurrences) },
          durCol("host_total", "Host total", MODULE_HELP.plTotal, (n) => num(n.host_total_us)),
        ],
        openDepth: 1,
        noun: "modules",
      });
      plTree.setRoots(data.lightning_modules);
      plCards.push(
        card(
          { testid: "card-lightning-modules" },
          h("div", { class: "ptp-card-head" }, h("h3", {}, "Lightning modules"), infoIcon("Lightning's [pl][module] annotations, nested by their dotted names.")),
          plTree.el,
        ),
      );
    }
    sections.push(h("div", { class: "ptp-grid ptp-module-pl" }, plCards));
  }

  const root = h("div", { class: "ptp-view ptp-module", testid: "module-view", dataset: { metric } }, sections);
  replaceChildren(container, root);

  if (count === 0) return undefined;

  let charts: Charts | null = null;
  const drawIcicle = (): void => {
    root.dataset["metric"] = metric;
    if (charts && icicleDiv) void charts.draw(icicleDiv, (theme) => icicleFigure(items, metric, colors, theme));
  };

  const timelinePromise = fetchFor<{ occurrences?: unknown }>(ctx, "modules/timeline").then(
    (r) => ({ ok: true as const, rows: arr<ModuleOccurrence>(r.occurrences) }),
    (err: unknown) => ({ ok: false as const, err }),
  );

  try {
    const Plotly = await ctx.loadPlotly();
    if (left(ctx)) return undefined;
    charts = new Charts(Plotly, ctx);
    drawIcicle();
  } catch (err) {
    if (left(ctx)) return undefined;
    if (icicleDiv) replaceChildren(icicleDiv, h("p", { class: "ptp-muted", testid: "chart-error" }, `The chart could not be drawn: ${err instanceof Error ? err.message : String(err)}`));
  }

  const tl = await timelinePromise;
  if (left(ctx)) return undefined;
  const note = timelineCard?.querySelector<HTMLElement>("[data-testid=module-timeline-note]");
  if (timelineCard && timelineDiv) {
    if (!tl.ok) {
      replaceChildren(timelineCard, loadErrorCard(tl.err, "the module timeline"));
    } else if (tl.rows.length === 0) {
      if (note) note.textContent = "No module call was recorded.";
      timelineDiv.hidden = true;
    } else {
      const rows = [...tl.rows].sort((a, b) => a.start_us - b.start_us).slice(0, TIMELINE_MAX);
      const maxDepth = rows.reduce((m, o) => Math.max(m, o.depth), 0);
      timelineDiv.style.height = `${Math.max(160, 60 + (maxDepth + 1) * 34)}px`;
      if (note) {
        note.textContent =
          tl.rows.length > rows.length
            ? `The first ${formatInt(rows.length)} of ${formatInt(tl.rows.length)} calls, by nesting depth. Drag to zoom, double-click to zoom out.`
            : `${formatInt(rows.length)} calls by nesting depth. Drag to zoom, double-click to zoom out.`;
      }
      if (charts) void charts.draw(timelineDiv, () => timelineFigure(rows, colors));
    }
  }

  const c = charts;
  return () => c?.dispose();
}
