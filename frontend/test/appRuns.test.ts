/** app/runs.ts: which run, worker and span a picker level opens on, and how a span is named on the page. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { pick, where } from "../src/app/runs";

interface Item { name: string; alias?: string; score: number; mtime: number }
const items: Item[] = [
  { name: "a", score: 1, mtime: 5 },
  { name: "b", alias: "key-b", score: 2, mtime: 1 },
  { name: "c", score: 2, mtime: 9 },
  { name: "d", score: 0, mtime: 99 },
];
const names = (i: Item): string[] => (i.alias ? [i.name, i.alias] : [i.name]);
const score = (i: Item): number => i.score;
const recency = (i: Item): number => i.mtime;

describe("pick", () => {
  it("takes the wished item whatever its state, by its name or another key", () => {
    assert.equal(pick(items, names, "d", "a", score, recency)?.name, "d");
    assert.equal(pick(items, names, "key-b", undefined, score, recency)?.name, "b");
  });
  it("keeps the one shown before unless it failed, so defaults do not jump while files load", () => {
    assert.equal(pick(items, names, undefined, "a", score, recency)?.name, "a");
    assert.equal(pick(items, names, "gone", "a", score, recency)?.name, "a");
    assert.equal(pick(items, names, undefined, "d", score, recency)?.name, "c"); // d failed: the best instead
  });
  it("else opens the best score, the newest of a tie, the first without recency", () => {
    assert.equal(pick(items, names, undefined, undefined, score, recency)?.name, "c");
    assert.equal(pick(items, names, undefined, undefined, score)?.name, "b");
    assert.equal(pick([], names, "a", "a", score), undefined);
  });
});

describe("where", () => {
  it("names a trace's span by run, worker and span, an allocator snapshot by its file", () => {
    assert.equal(where("run1", "vm_9", "2"), "run1 · vm_9 · span 2");
    assert.equal(where("run1", "oom.pickle", "snapshot"), "run1 · snapshot oom.pickle");
  });
});
