/**
 * The Module page (GET ./modules and ./modules/timeline): the nn.Module hierarchy as a tree table,
 * an icicle chart of device (or host) time per module with click-to-zoom, and a timeline of the
 * module calls by nesting depth. PyTorch Lightning runs get the title "Lightning", a table of the
 * Lightning hooks and, when recorded, the tree of Lightning's own module annotations.
 */
import { card, infoIcon } from "../../components";
import { h, replaceChildren } from "../../dom";
import { DASH, formatDuration, formatExactUs, formatInt } from "../../format";
import { loadView } from "../common/loadView";
import type { Theme } from "../../theme";
import { type Charts, chartDiv, ColorMap, type Data, type Figure, plotlyText } from "../common/charts";
import { csvFileName } from "../common/csv";
import { clampedName, DataTable } from "../common/table";
import { loadSources, openFrame, parseFrame } from "../common/callStack";
import type { Frame } from "../common/sourceFrames";
import { rowLinkButton, traceLinker } from "../common/traceLink";
import { startCharts } from "../common/startCharts";
import { spanGet, left, loadErrorCard } from "../common/ui";
import {
  arr,
  hookMean,
  LIGHTNING,
  type LightningHook,
  type LightningModule,
  meanClock,
  moduleClass,
  type ModuleNode,
  type ModuleOccurrence,
  type ModulesResponse,
  moduleSubtitle,
  normalizeModules,
  orZero,
  timelinePlan,
} from "./moduleData";
import { type TreeColumn, type TreeItem, treeItems, TreeTable } from "./moduleTree";
import type { ViewContext } from "../types";

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

const ROOT_ID = "\u0000root";

type Metric = "device" | "host";

const MODULE_PREFIX = "nn.Module: ";

/** A module's source: its forward frame, opened in VS Code or copied like any call-stack frame. */
function sourceLink(f: Frame): HTMLElement {
  const where = `${f.path ?? ""}:${String(f.line ?? "")}`;
  const link = rowLinkButton({ label: "source", title: `The module's forward: ${where} (open in VS Code, else copy)`, testid: "module-source", onClick: () => { openFrame(f); } });
  link.dataset["path"] = f.path ?? "";
  link.dataset["line"] = String(f.line ?? "");
  return link;
}

function durCol<N>(key: string, label: string, help: string, get: (n: N) => number): TreeColumn<N> {
  return { key, label, help, numeric: true, value: get, text: (n) => formatDuration(get(n)), title: (n) => `${formatExactUs(get(n))}\n${help}` };
}

function moduleColumns(hasDevice: boolean): TreeColumn<ModuleNode>[] {
  const cols: TreeColumn<ModuleNode>[] = [
    { key: "occurrences", label: "Occurrences", help: MODULE_HELP.occurrences, numeric: true, value: (n) => orZero(n.occurrences), text: (n) => formatInt(n.occurrences) },
    {
      key: "operators",
      label: "Operators",
      help: MODULE_HELP.operators,
      numeric: true,
      value: (n) => orZero(n.operators),
      // a container (Sequential, an encoder) calls no operator itself: all its work is in its sub-modules
      text: (n) => (orZero(n.operators) === 0 && arr(n.children).length ? "0 (in sub-modules)" : formatInt(n.operators)),
      title: (n) => (orZero(n.operators) === 0 && arr(n.children).length ? MODULE_HELP.containerOperators : MODULE_HELP.operators),
    },
    durCol("host_total", "Host total", MODULE_HELP.hostTotal, (n) => orZero(n.host_total_us)),
    durCol("host_self", "Host self", MODULE_HELP.hostSelf, (n) => orZero(n.host_self_us)),
  ];
  if (hasDevice) {
    cols.push(
      durCol("device_total", "Device total", MODULE_HELP.deviceTotal, (n) => orZero(n.device_total_us)),
      durCol("device_self", "Device self", MODULE_HELP.deviceSelf, (n) => orZero(n.device_self_us)),
    );
  }
  cols.push(durCol("backward_host", "Backward host", MODULE_HELP.backwardHost, (n) => orZero(n.backward_host_us)));
  if (hasDevice) {
    cols.push(durCol("backward_device", "Backward device", MODULE_HELP.backwardDevice, (n) => orZero(n.backward_device_us)));
  }
  cols.push({
    key: "mean",
    label: "Mean per call",
    help: MODULE_HELP.mean,
    numeric: true,
    value: (n) => orZero(n.avg_us),
    // which clock the mean is on, per row: device time where the module ran GPU work, else host time
    text: (n) => `${formatDuration(orZero(n.avg_us))} ${meanClock(n)}`,
    title: (n) => `${formatExactUs(orZero(n.avg_us))} of ${meanClock(n)} time per call\n${MODULE_HELP.mean}`,
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
  const total = (n: ModuleNode): number => (metric === "device" ? orZero(n.device_total_us) : orZero(n.host_total_us));
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

function titleHead(count: number, lightning: boolean): HTMLElement {
  return h(
    "div",
    { class: "ptp-page-head" },
    h("h2", { testid: "module-title" }, lightning ? "Lightning" : "Modules"),
    h("span", { class: "ptp-muted", testid: "module-subtitle" }, moduleSubtitle(count, lightning)),
  );
}

function moduleTreeCard(ctx: ViewContext, modules: ModuleNode[], hasDevice: boolean): HTMLElement {
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
  tree.setRoots(modules);
  return card(
    { testid: "card-module-tree" },
    h("div", { class: "ptp-card-head" }, h("h3", {}, "Module tree"), infoIcon("Modules are nn.Module forward calls, nested as they ran; a module's numbers sum all its calls.")),
    tree.el,
  );
}

/** The icicle card with its device/host picker; `onMetric` redraws. */
function icicleCard(metric: Metric, hasDevice: boolean, onMetric: (m: Metric) => void): { el: HTMLElement; div: HTMLElement } {
  const div = chartDiv("module-icicle", 420);
  const metricSelect = h(
    "select",
    {
      testid: "module-metric",
      attrs: { "aria-label": "Time shown in the chart" },
      onChange: () => { onMetric(metricSelect.value === "host" ? "host" : "device"); },
    },
    h("option", { attrs: { value: "device", selected: metric === "device", disabled: !hasDevice } }, "Device time"),
    h("option", { attrs: { value: "host", selected: metric === "host" } }, "Host time"),
  );
  const el = card(
    { testid: "card-module-icicle" },
    h(
      "div",
      { class: "ptp-card-head" },
      h("h3", {}, "Time by module"),
      h("label", { class: "ptp-picker", title: hasDevice ? "GPU time of the kernels each module launched, or its host (CPU) time" : "This trace has no GPU time" }, "Show", metricSelect),
      h("span", { class: "ptp-muted" }, "Click a module to zoom into it; click the bar above to zoom out."),
    ),
    div,
  );
  return { el, div };
}

/** The timeline card, "Loading…" until its calls come (`show`). */
function timelineCard(): { el: HTMLElement; show: (charts: Charts | null, colors: ColorMap, answer: TimelineAnswer) => void } {
  const div = chartDiv("module-timeline", 200);
  const note = h("span", { class: "ptp-muted", testid: "module-timeline-note" }, "Loading…");
  const el = card({ testid: "card-module-timeline" }, h("div", { class: "ptp-card-head" }, h("h3", {}, "Module calls over time"), note), div);
  const show = (charts: Charts | null, colors: ColorMap, answer: TimelineAnswer): void => {
    if (!answer.ok) {
      replaceChildren(el, loadErrorCard(answer.err, "the module timeline"));
    } else if (answer.rows.length === 0) {
      note.textContent = "No module call was recorded.";
      div.hidden = true;
    } else {
      const plan = timelinePlan(answer.rows);
      div.style.height = `${plan.heightPx}px`;
      note.textContent = plan.note;
      if (charts) void charts.draw(div, () => timelineFigure(plan.rows, colors));
    }
  };
  return { el, show };
}

type TimelineAnswer = { ok: true; rows: ModuleOccurrence[] } | { ok: false; err: unknown };

function hooksTable(ctx: ViewContext, hooks: LightningHook[]): DataTable<LightningHook> {
  const table = new DataTable<LightningHook>({
    testid: "lightning-hooks-table",
    csvName: () => csvFileName("lightning_hooks", ctx.run, ctx.worker, `span${ctx.span}`),
    emptyText: "No Lightning hook was recorded.",
  });
  table.setData({
    columns: [
      { key: "name", label: "Hook", value: (r) => r.name, render: (r) => clampedName(r.name, "hook-name"), title: (r) => r.name, cls: "ptp-name-col" },
      { key: "calls", label: "Calls", help: MODULE_HELP.hookCalls, numeric: true, value: (r) => orZero(r.calls), text: (r) => formatInt(r.calls) },
      { key: "total", label: "Host total", help: MODULE_HELP.hookTotal, numeric: true, value: (r) => orZero(r.host_total_us), text: (r) => formatDuration(r.host_total_us), exact: (r) => formatExactUs(r.host_total_us), csvHeader: "Host total (us)" },
      {
        key: "mean",
        label: "Mean",
        help: MODULE_HELP.hookMean,
        numeric: true,
        value: hookMean,
        text: (r) => {
          const mean = hookMean(r);
          return mean === null ? DASH : formatDuration(mean);
        },
        csvHeader: "Mean (us)",
      },
    ],
    rows: hooks,
    searches: [{ key: "name", label: "Search hooks", placeholder: "Search hook names", text: (r) => r.name }],
    sort: { key: "total", dir: "desc" },
    rowKey: (r) => r.name,
  });
  return table;
}

/** Lightning's hooks and, when recorded, its own module annotations as a tree. */
function lightningSection(ctx: ViewContext, data: ModulesResponse): HTMLElement {
  const plCards: HTMLElement[] = [
    card(
      { testid: "card-lightning-hooks" },
      h("div", { class: "ptp-card-head" }, h("h3", {}, "Lightning hooks"), infoIcon("Lightning's [pl][profile] annotations: the training loop's hooks and strategy calls, by name.")),
      hooksTable(ctx, data.hooks).el,
    ),
  ];
  if (data.lightning_modules.length) {
    const plTree = new TreeTable<LightningModule>({
      testid: "lightning-module-tree",
      nameLabel: "Lightning module",
      name: (n) => n.name,
      children: (n) => arr<LightningModule>(n.children),
      columns: [
        { key: "occurrences", label: "Occurrences", help: MODULE_HELP.plOccurrences, numeric: true, value: (n) => orZero(n.occurrences), text: (n) => formatInt(n.occurrences) },
        durCol("host_total", "Host total", MODULE_HELP.plTotal, (n) => orZero(n.host_total_us)),
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
  return h("div", { class: "ptp-grid ptp-module-pl" }, plCards);
}

export async function render(container: HTMLElement, ctx: ViewContext): Promise<(() => void) | undefined> {
  const loaded = await loadView(ctx, container, {
    raw: () => spanGet(ctx, "modules"),
    sources: () => loadSources(ctx),
  }, { what: "the modules" });
  if (!loaded) return undefined;
  const data = normalizeModules(loaded.raw);
  const lightning = data.framework === LIGHTNING;
  const items = treeItems(data.modules, (n) => arr<ModuleNode>(n.children));
  const flat: TreeItem<ModuleNode>[] = [];
  walkItems(items, (it) => flat.push(it));
  const hasDevice = flat.some((it) => orZero(it.node.device_total_us) > 0);
  let metric: Metric = hasDevice ? "device" : "host";
  const colors = new ColorMap();
  let charts: Charts | null = null;
  const drawIcicle = (): void => {
    root.dataset["metric"] = metric;
    if (charts) void charts.draw(icicle.div, (theme) => icicleFigure(items, metric, colors, theme));
  };
  const icicle = icicleCard(metric, hasDevice, (m) => {
    metric = m;
    drawIcicle();
  });
  const timeline = timelineCard();
  const sections: (HTMLElement | null)[] = flat.length === 0
    ? [titleHead(0, lightning), emptyCard(lightning)]
    : [titleHead(flat.length, lightning), moduleTreeCard(ctx, data.modules, hasDevice), icicle.el, timeline.el];
  if (lightning) sections.push(lightningSection(ctx, data));
  const root = h("div", { class: "ptp-view ptp-module", testid: "module-view", dataset: { metric } }, sections);
  replaceChildren(container, root);
  if (flat.length === 0) return undefined;

  const timelineAnswer = spanGet(ctx, "modules/timeline").then(
    (r): TimelineAnswer => ({ ok: true, rows: arr<ModuleOccurrence>(r.occurrences) }),
    (err: unknown): TimelineAnswer => ({ ok: false, err }),
  );
  charts = await startCharts(ctx, icicle.div, (c) => {
    charts = c;
    drawIcicle();
  }, "The chart");
  if (left(ctx)) return undefined;
  const answer = await timelineAnswer;
  if (left(ctx)) return undefined;
  timeline.show(charts, colors, answer);
  const c = charts;
  return () => c?.dispose();
}
