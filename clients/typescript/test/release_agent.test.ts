// The example agent loop (examples/release_agent.ts) run to completion against a real
// server: the final Mind of seed 002's release story, and the recall walk back to the
// raw test report.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";

import { Client } from "../src";
import { REPORT, runReleaseStory } from "../examples/release_agent";
import { Server } from "./server";

let server: Server;
let mz: Client;

before(async () => {
  server = await Server.start();
  mz = new Client(server.address, { credentials: {} });
});

after(async () => {
  mz?.close();
  await server?.stop();
});

test("release_agent_loop_ends_in_the_seed_002_mind_and_walks_back_to_the_tool_result", async () => {
  const printed: string[] = [];
  const result = await runReleaseStory(mz, "release-demo", (line) => printed.push(line));
  const ctx = result.context;

  // The concurrent pause: one side was rejected naming the release, then merged.
  assert.equal(result.conflict.reason, "TX_CONFLICT");
  assert.ok(result.conflict.boundaries.includes("frame:release"), JSON.stringify(result.conflict.details));

  const frames = Object.fromEntries((await mz.frames(ctx)).frames.map((f) => [f.id, f]));
  assert.deepEqual(Object.keys(frames).sort(),
    ["release", "release-case-a", "release-case-b", "release-procedure", "test-result"]);
  const states = Object.fromEntries(Object.values(frames).map((f) => [f.id, f.state]));
  assert.deepEqual(states, {
    "release": "active", "test-result": "active", "release-procedure": "active",
    "release-case-a": "retired", "release-case-b": "retired",  // superseded: at once, no window
  });
  assert.equal(frames.release.body, "(goal ship-v1) (stage shipped)");
  assert.equal(frames["test-result"].body, "(tests passed)");
  assert.deepEqual(frames["test-result"].sources, [result.reportRef]);
  assert.deepEqual(frames["release-procedure"].sources, ["release-case-a", "release-case-b"]);
  const edges = new Set(Object.values(frames).flatMap((f) => f.relations.map((r) => `${r.subject} ${r.name} ${r.object}`)));
  assert.deepEqual([...edges].sort(), [
    "release-procedure supersedes release-case-a",
    "release-procedure supersedes release-case-b",
    "test-result supports release",
  ]);
  // The merge kept both wishes in the history: the paused, tests-passed release.
  const merged = await mz.frame(ctx, "release", { atRevision: 3 });
  assert.equal(merged.body, "(goal ship-v1) (stage paused) (tests passed) (resume-at packaging)");

  // The raw report left the active context but reads back whole.
  const report = await mz.event(ctx, result.reportRef);
  assert.deepEqual([report.kind, report.state, report.text], ["tool-result", "retired", REPORT]);

  // The recall walk reached the original tool-result event, three hops from the procedure.
  const leaf = result.walk.flatMap((p) => p.nodes).find((n) => n.ref === result.reportRef);
  assert.ok(leaf, "the walk did not reach the test report");
  assert.deepEqual([leaf.kind, leaf.eventKind, leaf.depth], ["event", "tool-result", 3]);
  assert.ok(result.answer.includes(REPORT));
  // Each encoding and receipt was printed.
  assert.ok(printed.filter((l) => l.startsWith("\n== encoding for")).length >= 8);
  assert.ok(printed.some((l) => l.startsWith("\n== receipt\nrevision 6")));
  assert.ok((await mz.audit(ctx)).match);
});
