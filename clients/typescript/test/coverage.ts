// The TypeScript half of the clients' RPC coverage walk (tests/integration/
// test_client_coverage.py runs it): every public method of Client, one step at a time,
// against the server at argv[2] (a recording proxy in front of a real `morphz serve`).
// It prints its steps' names as JSON first; then, for each line naming a step on stdin,
// runs that step and prints "ok NAME" or "error NAME REASON", so the harness can tell
// which RPCs each method sent. Not a *.test.ts file: `npm test` does not run it.
import * as readline from "node:readline";

import { Client, MorphzError, Tx } from "../src";

const mz = new Client(process.argv[2], { credentials: {}, recall: process.argv[3], encoding: process.argv[4] });
const ctx = `cov-ts-${process.pid}`;
const state: Record<string, string> = {};

const steps: Record<string, () => Promise<unknown>> = {
  createContext: () => mz.createContext(ctx),
  status: () => mz.status(ctx),
  appendEvent: async () => {
    state.secret = (await mz.appendEvent(ctx, { session: "main", kind: "user-message", text: "ship v1 (key sk-cov)", secret: true })).ref;
  },
  appendEvents: () => mz.appendEvents(ctx, [{ session: "main", kind: "tool-result", text: "tests passed" },
    { session: "side", kind: "user-message", text: "hello from side" }]),
  sendMessage: () => mz.sendMessage(ctx, { session: "main", to: "side", text: "release soon" }),
  activate: async () => { state.act = (await mz.activate(ctx, { session: "main" })).id; },
  recordAction: async () => {
    state.call = (await mz.recordAction(ctx, { session: "main", activation: state.act, text: "run: npm test" })).ref;
  },
  toolResult: () => mz.toolResult(ctx, { call: state.call, text: "npm test: ok" }),
  event: () => mz.event(ctx, state.secret, { revealSecrets: true }),
  commit: () => mz.commit(ctx, new Tx(0).create("release", "(goal ship-v1)"), { session: "main", activation: state.act }),
  frame: () => mz.frame(ctx, "release"),
  frames: () => mz.frames(ctx),
  framePages: async () => { for await (const page of mz.framePages(ctx)) void page; },
  deliver: () => mz.deliver(ctx, state.act),
  grant: () => mz.grant(ctx, "dave", ["read"]),
  revoke: () => mz.revoke(ctx, "dave", ["read"]),
  policy: () => mz.policy(ctx),
  setRetention: () => mz.setRetention(ctx, "(retention (kinds tool-result) (days 30))"),
  contexts: () => mz.contexts(),
  search: () => mz.search(ctx, "release"),
  read: () => mz.read(ctx, "release"),
  traverse: () => mz.traverse(ctx, "release"),
  walk: async () => { for await (const page of mz.walk(ctx, "release")) void page; },
  inspectIndex: () => mz.inspectIndex(ctx),
  rebuildIndex: () => mz.rebuildIndex(ctx),
  compile: async () => {
    const enc = await mz.compile(ctx, { session: "main" });
    state.snapshot = enc.snapshot;
    state.evaluation = enc.activation;
  },
  showSnapshot: () => mz.showSnapshot(ctx, state.snapshot),
  replaySnapshot: () => mz.replaySnapshot(ctx, state.snapshot),
  checkSnapshot: () => mz.checkSnapshot(ctx, state.snapshot),
  readSnapshot: () => mz.readSnapshot(ctx, state.snapshot, "release"),
  searchSnapshot: () => mz.searchSnapshot(ctx, state.snapshot, "release"),
  listSnapshots: () => mz.listSnapshots(ctx, { session: "main" }),
  snapshotPages: async () => { for await (const page of mz.snapshotPages(ctx, { limit: 1 })) void page; },
  evaluation: () => mz.evaluation(ctx, state.evaluation),
  audit: () => mz.audit(ctx),
  rebuildProjections: () => mz.rebuildProjections(ctx),
  startJob: async () => {
    state.txJob = (await mz.startJob(ctx, "audit")).id;
    state.recallJob = (await mz.startJob(ctx, "rebuild-index")).id;
  },
  job: async () => { await mz.job(state.txJob); await mz.job(state.recallJob); },
  jobs: () => mz.jobs(ctx),
  cancelJob: async () => { await mz.cancelJob(state.txJob); await mz.cancelJob(state.recallJob); },
  writePosition: async () => mz.writePosition(ctx),
  export: async () => { for await (const page of mz.export(ctx)) void page; },
  erase: () => mz.erase(ctx, { refs: [state.secret], reason: "coverage walk" }),
  deleteContext: () => mz.deleteContext(ctx, { reason: "coverage walk" }),
  close: async () => mz.close(),
};

process.stdout.write(JSON.stringify(Object.keys(steps)) + "\n");
const lines = readline.createInterface({ input: process.stdin });
let queue = Promise.resolve();
lines.on("line", (name) => {
  queue = queue.then(async () => {
    const step = steps[name];
    try {
      if (!step) throw new Error(`no step ${name}`);
      await step();
      process.stdout.write(`ok ${name}\n`);
    } catch (err) {
      const reason = err instanceof MorphzError ? err.reason : String(err).replace(/\s+/g, " ");
      process.stdout.write(`error ${name} ${reason}\n`);
    }
  });
});
lines.on("close", () => { void queue.then(() => process.exit(0)); });
