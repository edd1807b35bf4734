/** views/moduleData.ts: the Module page's answer made safe, its subtitle, the timeline's plan and hook means. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { hookMean, meanClock, moduleClass, moduleSubtitle, normalizeModules, timelinePlan, type ModuleOccurrence } from "../src/views/module/moduleData";

const call = (name: string, start: number, depth: number): ModuleOccurrence => ({ name, start_us: start, dur_us: 10, depth });

describe("normalizeModules", () => {
  it("turns a missing or malformed part into an empty one", () => {
    assert.deepEqual(normalizeModules(null), { framework: null, modules: [], lightning_modules: [], hooks: [] });
    const odd = normalizeModules({ framework: 3, modules: "x", hooks: [{ name: "on_step", calls: 2, host_total_us: 9 }] } as never);
    assert.equal(odd.framework, null);
    assert.deepEqual(odd.modules, []);
    assert.equal(odd.hooks.length, 1);
    assert.equal(normalizeModules({ framework: "pytorch-lightning" }).framework, "pytorch-lightning");
  });
});

describe("module names and clocks", () => {
  it("moduleClass drops the instance number only", () => {
    assert.equal(moduleClass("Linear_3"), "Linear");
    assert.equal(moduleClass("Conv2d"), "Conv2d");
    assert.equal(moduleClass("block_2_attn"), "block_2_attn");
  });

  it("meanClock: device where the module ran GPU work", () => {
    assert.equal(meanClock({ device_total_us: 0.5 }), "device");
    assert.equal(meanClock({ device_total_us: 0 }), "host");
    assert.equal(meanClock({ device_total_us: Number.NaN }), "host");
  });

  it("moduleSubtitle counts the modules and names Lightning", () => {
    assert.equal(moduleSubtitle(1234, false), "1,234 modules in the nn.Module hierarchy · times summed over every call");
    assert.equal(moduleSubtitle(2, true), "2 modules in the nn.Module hierarchy · times summed over every call · PyTorch Lightning");
    assert.equal(moduleSubtitle(0, true), "PyTorch Lightning run");
    assert.equal(moduleSubtitle(0, false), "");
  });
});

describe("timelinePlan", () => {
  it("keeps the first calls in time, sized by the deepest of them", () => {
    const plan = timelinePlan([call("c", 30, 5), call("a", 10, 0), call("b", 20, 2)], 2);
    assert.deepEqual(plan.rows.map((r) => r.name), ["a", "b"]);
    assert.equal(plan.heightPx, 60 + 3 * 34); // depth 2 deepest of the kept calls: 162 px
    assert.equal(plan.note, "The first 2 of 3 calls, by nesting depth. Drag to zoom, double-click to zoom out.");
  });

  it("a shallow timeline keeps its 160 px floor and says how many calls it shows", () => {
    const plan = timelinePlan([call("a", 0, 0), call("b", 5, 1)]);
    assert.equal(plan.heightPx, 160); // 60 + 2 * 34 = 128, below the floor
    assert.equal(plan.note, "2 calls by nesting depth. Drag to zoom, double-click to zoom out.");
  });
});

describe("hookMean", () => {
  it("divides host time by calls; none for a hook never called", () => {
    assert.equal(hookMean({ name: "training_step", calls: 4, host_total_us: 1000 }), 250);
    assert.equal(hookMean({ name: "setup", calls: 0, host_total_us: 7 }), null);
  });
});
