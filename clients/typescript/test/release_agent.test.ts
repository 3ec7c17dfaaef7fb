// The example agent loop (examples/release_agent.ts) run to completion against a real
// server: the final Mind of the release story, and the recall walk back to the raw test
// report.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";

import { Client } from "../src";
import { TOOL_OUTPUT, play, showMind } from "../examples/release_agent";
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

test("release_agent_loop_ends_in_the_release_story_mind_and_walks_back_to_the_tool_result", async () => {
  const printed: string[] = [];
  const story = await play(mz, "release-demo", (line) => printed.push(line));
  const ctx = story.context;

  // The concurrent pause: one side was refused naming the release, then merged.
  assert.ok(story.conflict.includes("frame:release"), story.conflict.join(", "));

  const frames = Object.fromEntries((await mz.frames(ctx)).frames.map((f) => [f.id, f]));
  const states = Object.fromEntries(Object.values(frames).map((f) => [f.id, f.state]));
  assert.deepEqual(states, {
    "release": "active", "test-result": "active", "release-procedure": "active",
    "release-case-a": "retired", "release-case-b": "retired",  // superseded: at once, no window
  });
  assert.equal(frames.release.body, "(goal ship-v1) (stage shipped)");
  assert.equal(frames["test-result"].body, "(tests passed)");
  assert.deepEqual(frames["test-result"].sources, [story.report]);
  assert.equal(frames["release-case-a"].sources[0], story.report);
  assert.deepEqual(frames["release-procedure"].sources, ["release-case-a", "release-case-b"]);
  const edges = new Set(Object.values(frames).flatMap((f) => f.relations.map((r) => `${r.subject} ${r.name} ${r.object}`)));
  assert.deepEqual([...edges].sort(), [
    "release-procedure supersedes release-case-a",
    "release-procedure supersedes release-case-b",
    "test-result supports release",
  ]);
  // The merge kept both wishes: the paused release that resumes at packaging.
  assert.equal((await mz.frame(ctx, "release", { atRevision: 3 })).body,
    "(goal ship-v1) (stage paused) (resume-at packaging)");

  // The raw report left the active context but reads back whole.
  const report = await mz.event(ctx, story.report);
  assert.deepEqual([report.kind, report.state, report.text], ["tool-result", "retired", TOOL_OUTPUT["npm test"]]);

  // The recall walk reached the original tool-result event.
  const leaf = story.walkNodes.find((n) => n.ref === story.report);
  assert.ok(leaf, "the walk did not reach the test report");
  assert.deepEqual([leaf.kind, leaf.eventKind, leaf.depth], ["event", "tool-result", 2]);
  assert.ok(story.walkEdges.some((e) => e.kind === "source" && e.from === "release-case-a" && e.to === story.report));
  assert.ok(story.answer.startsWith(`Yes: ${TOOL_OUTPUT["npm test"]} (${story.report}`), story.answer);
  // Each encoding and receipt was printed, and the final Mind shows.
  assert.ok(printed.filter((l) => / encoding enc-/.test(l)).length >= 10);
  assert.ok(printed.some((l) => l.includes("--- receipt\nrevision 1\n#0 create release -> created")));
  await showMind(mz, ctx, (line) => printed.push(line));
  assert.ok(printed.some((l) => l.startsWith("release-procedure r1 [active] (sources release-case-a release-case-b)")));
  assert.ok((await mz.audit(ctx)).match);
});
