/** common/traceQuery.ts and common/stepCategories.ts: what a Trace search means, and which step-bar segment a click hit. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CATEGORIES, busiestStep, highlightCategory, segmentAt } from "../src/views/common/stepCategories";
import { exactQuery, nameMatches, parseTraceQuery, searchParams } from "../src/views/common/traceQuery";
import { hashWithViewState, viewStateFromHash } from "../src/urlState";

const NAMES = ["nn.Module: Linear_1", "nn.Module: Linear_10", "nn.Module: Linear_11", "aten::linear", "Linear_1"];

describe("parseTraceQuery / nameMatches", () => {
  it("matches a substring, in any case, by default", () => {
    const q = parseTraceQuery("  linear_1 ");
    assert.deepEqual(q, { text: "linear_1", exact: false });
    assert.deepEqual(NAMES.filter((n) => nameMatches(n, q)),
                     ["nn.Module: Linear_1", "nn.Module: Linear_10", "nn.Module: Linear_11", "Linear_1"]);
  });

  it("matches the whole name, case and all, when quoted: Linear_1 is not Linear_10", () => {
    const q = parseTraceQuery('"nn.Module: Linear_1"');
    assert.deepEqual(q, { text: "nn.Module: Linear_1", exact: true });
    assert.deepEqual(NAMES.filter((n) => nameMatches(n, q)), ["nn.Module: Linear_1"]);
    assert.deepEqual(NAMES.filter((n) => nameMatches(n, parseTraceQuery('"linear_1"'))), []);
    assert.deepEqual(NAMES.filter((n) => nameMatches(n, parseTraceQuery('"Linear_1"'))), ["Linear_1"]);
  });

  it("reads a lone quote or an empty pair as text, and matches nothing for an empty query", () => {
    assert.deepEqual(parseTraceQuery('"'), { text: '"', exact: false });
    assert.deepEqual(parseTraceQuery('""'), { text: '""', exact: false });
    assert.deepEqual(parseTraceQuery('"x'), { text: '"x', exact: false });
    assert.equal(nameMatches("anything", parseTraceQuery("   ")), false);
  });

  it("sends the server the text without quotes and how to match it", () => {
    assert.deepEqual(searchParams(parseTraceQuery('"aten::mm"')), { q: "aten::mm", match: "exact" });
    assert.deepEqual(searchParams(parseTraceQuery("aten::mm")), { q: "aten::mm", match: "substring" });
    assert.deepEqual(parseTraceQuery(exactQuery("nn.Module: Linear_1")), { text: "nn.Module: Linear_1", exact: true });
  });
});

describe("step categories", () => {
  const breakdown = { Kernel: 3000, Memcpy: 0, Memset: 500, Runtime: 1000, "CPU Exec": 2000, Other: 500 };

  it("finds the segment of a stacked bar under a height in ms (stacked in CATEGORIES order)", () => {
    assert.equal(segmentAt(breakdown, CATEGORIES, 0), "Kernel");
    assert.equal(segmentAt(breakdown, CATEGORIES, 2.999), "Kernel");
    assert.equal(segmentAt(breakdown, CATEGORIES, 3.0), "Memset"); // Memcpy is empty: no segment
    assert.equal(segmentAt(breakdown, CATEGORIES, 3.6), "Runtime");
    assert.equal(segmentAt(breakdown, CATEGORIES, 6.7), "Other");
    assert.equal(segmentAt(breakdown, CATEGORIES, 7.0), null); // above the 7 ms bar
    assert.equal(segmentAt(breakdown, CATEGORIES, -0.1), null);
  });

  it("opens a category's row on the step where it took the most time", () => {
    const steps = [{ breakdown_us: { Kernel: 10, DataLoader: 0 } }, { breakdown_us: { Kernel: 30, DataLoader: 5 } }, { breakdown_us: { Kernel: 20 } }];
    assert.equal(busiestStep(steps, "Kernel"), 1);
    assert.equal(busiestStep(steps, "DataLoader"), 1);
    assert.equal(busiestStep(steps, "Memcpy"), null);
  });

  it("takes only a known category from the URL, which keeps it as the view key cat", () => {
    assert.equal(highlightCategory("CPU Exec"), "CPU Exec");
    assert.equal(highlightCategory("kernel"), null);
    assert.equal(highlightCategory(undefined), null);
    const hash = hashWithViewState("#pytorch_profiler", { cat: "CPU Exec" });
    assert.equal(hash, "#pytorch_profiler&p.pytorch_profiler.cat=CPU%20Exec");
    assert.equal(viewStateFromHash(hash).cat, "CPU Exec");
  });
});
