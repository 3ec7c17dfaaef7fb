// The retry-with-request-id path across a server killed mid-call: the server commits,
// is SIGKILLed before it answers (MORPHZ_FAULT), and comes back on the same port; the
// client's retry is answered with the original receipt, and nothing happened twice.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";

import { Client, MorphzError, Tx } from "../src";
import { Server } from "./server";

let server: Server;

before(async () => {
  // The 3rd commit (creating the context is the 1st) kills it after it is durable, before the reply.
  server = await Server.start({ env: { MORPHZ_FAULT: "after-commit-before-reply:3" } });
});

after(async () => {
  await server?.stop();
});

test("dur_04_retry_after_the_server_dies_mid_commit_returns_the_original_receipt", async () => {
  // Retries wide enough (about a minute) to span a restart of the server on a loaded machine.
  const mz = new Client(server.address, { credentials: {}, timeoutMs: 10_000,
    retry: { attempts: 120, initialBackoffMs: 100, maxBackoffMs: 500 } });
  try {
    await mz.createContext("dur");
    await mz.commit("dur", new Tx(0).create("a", "(x)"));
    // Bring the server back (without the fault) as soon as it dies.
    const revived = server.exit().then(() => server.restart());
    const receipt = await mz.commit("dur", new Tx(1).revise("a", "(y)"), { requestId: "retry-me" });
    await revived;
    assert.deepEqual([receipt.revision, receipt.replayed], [2, true]);  // the first try's commit
    assert.equal((await mz.frame("dur", "a")).body, "(y)");
    const status = await mz.status("dur");
    assert.equal(status.revision, 2);
    assert.equal(status.eventCount, 3);  // the context's creation and two transactions: none twice
    assert.ok((await mz.audit("dur")).match);
  } finally {
    mz.close();
  }
});

test("a_write_without_a_request_id_is_not_retried_a_read_is", async () => {
  await server.kill();
  const mz = new Client(server.address, { credentials: {}, retry: { attempts: 120, initialBackoffMs: 100, maxBackoffMs: 500 } });
  try {
    // Both sent while the server is down and retried (if at all) until it is back: the
    // read gets through, the append without a request id fails on its first try.
    const append = mz.appendEvent("dur", { session: "s", kind: "tool-result", text: "x", requestId: "" })
      .then(() => undefined, (e: unknown) => e);
    const read = mz.status("dur");
    await server.restart();
    const [err, status] = await Promise.all([append, read]);
    assert.ok(err instanceof MorphzError && err.reason === "UNAVAILABLE", String(err));
    assert.equal(status.eventCount, 3);  // nothing appended
  } finally {
    mz.close();
  }
});
