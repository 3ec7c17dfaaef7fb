// The client against a real all-in-one server on loopback (one for this file): every
// service's calls, the error model, the builder's equivalence with the DSL text.
import { after, before, describe, test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protobuf from "protobufjs";

import {
  Client, ConflictError, InvalidInputError, Job, JobKind, MorphzError, NotFoundError, Tx, UnavailableError,
} from "../src";
import { PROTO_DIR, load } from "../src/protos";
import type { ProtoGrpcType as StorageProto } from "../src/generated/storage";
import { Server } from "./server";

let server: Server;
let mz: Client;
let counter = 0;
const fresh = (name: string) => `${name}-${++counter}`;

before(async () => {
  server = await Server.start({ storageListen: true });
  mz = new Client(server.address, { credentials: {} });
});

after(async () => {
  mz?.close();
  await server?.stop();
});

async function rejection(promise: Promise<unknown>): Promise<MorphzError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof MorphzError, `not a MorphzError: ${err}`);
    return err;
  }
  assert.fail("the call succeeded");
}

describe("contexts, events, activations, transactions and frames", () => {
  test("core_21_commit_returns_revision_and_structured_receipt", async () => {
    const ctx = fresh("core21");
    assert.equal((await mz.createContext(ctx, { window: 4 })).window, 4);
    const ev = await mz.appendEvent(ctx, { session: "main", kind: "tool-result", text: "report", actor: "npm test" });
    assert.equal(ev.ref, "@e1");
    const act = await mz.activate(ctx, { session: "main" });
    assert.deepEqual(act.claimed, ["@e1"]);
    const receipt = await mz.commit(ctx, new Tx(0, "digested")
      .derive("t", "(tests passed)", { sources: [ev.ref] })
      .create("r", "(stage packaging)")
      .relate("t", "supports", "r")
      .retire(ev.ref), { session: "main", activation: act.id });
    assert.equal(receipt.revision, 1);
    assert.deepEqual(receipt.results.map((r) => [r.op, r.target, r.outcome]),
      [["derive", "t", "derived"], ["create", "r", "created"], ["relate", "t supports r", "related"], ["retire", "@e1", "retired"]]);
    assert.deepEqual(receipt.capacity?.releasedNow, ["@e1"]);
    const frame = await mz.frame(ctx, "t");
    assert.deepEqual([frame.body, frame.sources, frame.relations.map((r) => r.object)], ["(tests passed)", ["@e1"], ["r"]]);
    assert.deepEqual((await mz.frames(ctx)).frames.map((f) => f.id), ["t", "r"]);
    const pages = [];
    for await (const p of mz.framePages(ctx, { maxBytes: 1 })) pages.push(p.frames.map((f) => f.id));
    assert.deepEqual(pages, [["t"], ["r"]]);  // a frame a page
    assert.equal((await mz.event(ctx, "@e1")).state, "retired");
    assert.equal((await mz.status(ctx)).revision, 1);
    assert.ok((await mz.audit(ctx)).match);
  });

  test("dur_04_same_request_id_replays_the_original_receipt", async () => {
    const ctx = fresh("dur04");
    await mz.createContext(ctx);
    const first = await mz.commit(ctx, "(context-tx (base-version 0) (create a (x)))", { requestId: "once" });
    const again = await mz.commit(ctx, "(context-tx (base-version 0) (create a (x)))", { requestId: "once" });
    assert.deepEqual([again.revision, again.replayed, first.replayed], [1, true, false]);
    const other = await rejection(mz.commit(ctx, "(context-tx (base-version 0) (create b (x)))", { requestId: "once" }));
    assert.equal(other.reason, "IDEMPOTENCY_MISMATCH");
    assert.equal((await mz.status(ctx)).revision, 1);
  });
});

describe("the error model", () => {
  test("conc_02_conflict_rejects_with_the_changed_boundaries", async () => {
    const ctx = fresh("conc02");
    await mz.createContext(ctx);
    await mz.commit(ctx, new Tx(0).create("release", "(stage waiting-tests)"));
    await mz.commit(ctx, new Tx(1).revise("release", "(stage paused)"));
    const err = await rejection(mz.commit(ctx, new Tx(1).revise("release", "(stage packaging)")));
    assert.ok(err instanceof ConflictError);
    assert.deepEqual([err.reason, err.code, err.base, err.latest], ["TX_CONFLICT", "ABORTED", 1, 2]);
    assert.ok(err.boundaries.includes("frame:release"), JSON.stringify(err.details));
    assert.equal((await mz.frame(ctx, "release")).body, "(stage paused)");
  });

  test("core_21_rejections_carry_reason_code_and_details", async () => {
    const ctx = fresh("errors");
    await mz.createContext(ctx);
    const missing = await rejection(mz.frame(ctx, "nope"));
    assert.ok(missing instanceof NotFoundError);
    assert.deepEqual([missing.reason, missing.code], ["FRAME_NOT_FOUND", "NOT_FOUND"]);
    const parse = await rejection(mz.commit(ctx, "(context-tx (base-version 0) (create a"));
    assert.ok(parse instanceof InvalidInputError);
    assert.equal(parse.reason, "TX_PARSE_ERROR");
    const exists = await rejection(mz.createContext(ctx));
    assert.deepEqual([exists.reason, exists.code], ["CONTEXT_EXISTS", "ALREADY_EXISTS"]);
    assert.deepEqual(exists.toJSON().reason, "CONTEXT_EXISTS");
  });

  test("sec_03_bad_input_is_refused_before_sending", () => {
    assert.throws(() => new Tx(0).derive("t", "(x)", { sources: [] }),
      (e: unknown) => e instanceof InvalidInputError && e.reason === "CONTEXT_INPUT_INVALID" && e.details.field === "derive.sources");
    assert.throws(() => new Tx(-1), (e: unknown) => e instanceof MorphzError && e.details.field === "base_version");
    assert.throws(() => new Tx(0).place("a", {} as never), (e: unknown) => e instanceof MorphzError && e.details.field === "place.where");
    assert.throws(() => new Client(server.address, { retry: { attempts: 0 } }),
      (e: unknown) => e instanceof InvalidInputError && e.details.field === "attempts");
    assert.throws(() => new Client(server.address, { timeoutMs: 0 }),
      (e: unknown) => e instanceof InvalidInputError && e.details.field === "timeoutMs");
  });

  test("every_call_has_a_deadline", async () => {
    const tight = new Client(server.address, { credentials: {}, timeoutMs: 1, retry: { attempts: 1 } });
    try {
      const err = await rejection(tight.status("anything"));
      assert.ok(err instanceof UnavailableError);
      assert.equal(err.reason, "DEADLINE_EXCEEDED");
    } finally {
      tight.close();
    }
  });

  test("unreachable_server_is_unavailable_after_the_retries", async () => {
    const nowhere = new Client("127.0.0.1:1", { credentials: {}, retry: { attempts: 2, initialBackoffMs: 10 } });
    try {
      const err = await rejection(nowhere.status("anything"));
      assert.deepEqual([err.reason, err.code], ["UNAVAILABLE", "UNAVAILABLE"]);
    } finally {
      nowhere.close();
    }
  });
});

// The raw stored record of an event, with what must differ between contexts (id, time,
// context, and the previous event's hash, which holds them) set to placeholders.
async function eventBytes(context: string, ref: string): Promise<string> {
  // The internal storage API: served only on the all-in-one server's --storage-listen.
  const Storage = load<StorageProto>("morphz/api/storage/v1/storage.proto").morphz.api.storage.v1.StorageService;
  const storage = new Storage(server.storageAddress, grpc.credentials.createInsecure()) as grpc.Client & {
    Get(req: object, cb: (err: grpc.ServiceError | null, res: { found: boolean; value: Buffer }) => void): void;
  };
  try {
    const res = await new Promise<{ found: boolean; value: Buffer }>((resolve, reject) =>
      storage.Get({ context, table: "events", key: [{ number: Number(ref.slice(2)) }] }, (err, r) => (err ? reject(err) : resolve(r))));
    assert.ok(res.found, `${context} ${ref} not stored`);
    let raw = Buffer.from(res.value).toString("utf8");
    const record = JSON.parse(raw);
    for (const [key, value] of [["id", record.id], ["time", record.time], ["context", record.context], ["link", record.data.link]]) {
      const token = `"${key}":${JSON.stringify(value)}`;
      assert.equal(raw.split(token).length, 2, `${key} once in ${raw}`);
      raw = raw.replace(token, `"${key}":"-"`);
    }
    return raw;
  } finally {
    storage.close();
  }
}

test("core_04_ts_builder_and_dsl_text_commit_byte_identical_events", async () => {
  // Every kind of operation, in the builder and as hand-written DSL text.
  const built = [
    new Tx(0, "")
      .create("a", "(v 1)")
      .create("b", '(note "é \\"q\\"")')
      .derive("c", "(x)", { sources: ["a", "@e1"] })
      .relate("c", "supports", "a")
      .place("b", { first: true })
      .checkpoint("cp1"),
    new Tx(1, 'tidy "up"\n', { baseTick: 1 })
      .revise("a", "(v 2)", { sources: [] })
      .revise("c", "(y)", { sources: ["a"] })
      .revise("b", '(note "kept")')
      .protect("b")
      .unrelate("c", "supports", "a")
      .retire("@e1")
      .dropCheckpoint("cp1")
      .place("a", { after: "b" }),
    new Tx(2, "done").unprotect("b").retire("b").place("c", { before: "a" }).retireSession("side"),
    new Tx(3, "").restoreSession("side").restore("b"),
  ];
  const texts = [
    "(context-tx (base-version 0) (create a (v 1)) (create b (note \"é \\\"q\\\"\")) (derive c (from a @e1) (x)) " +
      "(relate c supports a) (place b first) (checkpoint cp1))",
    "(context-tx (base-version 1) (base-tick 1) (reason \"tidy \\\"up\\\"\\n\") (revise a (from) (v 2)) (revise c (from a) (y)) " +
      "(revise b (note \"kept\")) (protect b) (unrelate c supports a) (retire @e1) (drop-checkpoint cp1) (place a (after b)))",
    "(context-tx (base-version 2) (reason \"done\") (unprotect b) (retire b) (place c (before a)) (retire-session side))",
    "(context-tx (base-version 3) (restore-session side) (restore b))",
  ];
  const forms: Record<string, (i: number) => string | Tx> = {
    builder: (i) => built[i], text: (i) => texts[i], rendered: (i) => built[i].text(),
  };
  const contexts = Object.fromEntries(Object.keys(forms).map((form) => [form, fresh(`forms-${form}`)]));
  const refs: Record<string, string[]> = {};
  for (const [form, ctx] of Object.entries(contexts)) {
    await mz.createContext(ctx);
    await mz.appendEvent(ctx, { session: "main", kind: "tool-result", text: "input", requestId: "input" });
    await mz.appendEvent(ctx, { session: "side", kind: "user-message", text: "other", requestId: "other" });
    await mz.activate(ctx, { session: "main" });
    refs[form] = [];
    for (let i = 0; i < texts.length; i++) {
      const receipt = await mz.commit(ctx, forms[form](i), { requestId: `tx-${i}` });
      refs[form].push(receipt.eventRef);
    }
  }
  for (let i = 0; i < texts.length; i++) {
    const [builder, text, rendered] = await Promise.all(
      Object.keys(forms).map((form) => eventBytes(contexts[form], refs[form][i])));
    assert.equal(builder, text, `transaction ${i}: builder vs DSL text`);
    assert.equal(rendered, text, `transaction ${i}: the builder's text() vs DSL text`);
  }
  const listed = await Promise.all(Object.values(contexts).map((ctx) => mz.frames(ctx)));
  assert.deepEqual(listed[0], listed[1]);
});

// The cases both clients' builders are held to (tests/fixtures/client_transactions.json):
// builder calls in the Python client's names, the structured form they must make (proto3
// JSON), the DSL text, and the text the committed event must hold.
const FIXTURE = JSON.parse(fs.readFileSync(
  path.resolve(__dirname, "..", "..", "..", "..", "tests", "fixtures", "client_transactions.json"), "utf8"));
const camel = (name: string) => name.replace(/_(\w)/g, (_, c: string) => c.toUpperCase());
const camelKeys = (o: Record<string, unknown>) => Object.fromEntries(Object.entries(o).map(([k, v]) => [camel(k), v]));

interface Case {
  name: string; base_version: number; reason?: string; base_tick?: number;
  calls: [string, unknown[], Record<string, unknown>][]; text: string; structured: object; event_text: string;
}

function build(c: Case): Tx {
  const tx = new Tx(c.base_version, c.reason ?? "", { baseTick: c.base_tick });
  for (const [method, args, kwargs] of c.calls) {
    const fn = (tx as unknown as Record<string, (...a: unknown[]) => Tx>)[camel(method)];
    assert.equal(typeof fn, "function", `Tx has no ${camel(method)}`);
    fn.apply(tx, Object.keys(kwargs).length ? [...args, camelKeys(kwargs)] : args);
  }
  return tx;
}

describe("the builder against the shared fixture", () => {
  // Imports (common.proto) resolve from the protos' root, as proto-loader's includeDirs do.
  const root = new protobuf.Root();
  root.resolvePath = (_origin: string, target: string) =>
    path.isAbsolute(target) ? target : path.join(PROTO_DIR, target);
  const Transaction = root.loadSync("morphz/api/transaction/v1/transaction.proto")
    .lookupType("morphz.api.transaction.v1.Transaction");

  for (const c of FIXTURE.transactions as Case[]) {
    test(`core_04_builder_makes_the_fixtures_structured_form_${c.name}`, () => {
      const message = Transaction.fromObject(build(c).toProto());
      assert.deepEqual(Transaction.toObject(message, { longs: String }), c.structured);
    });
  }

  test("core_04_builder_and_dsl_text_commit_byte_identical_events_fixture", async () => {
    const pair = { builder: fresh("ts-forms-builder"), text: fresh("ts-forms-text") };
    for (const ctx of Object.values(pair)) {
      await mz.createContext(ctx);
      for (const step of FIXTURE.setup as Record<string, Record<string, unknown>>[]) {
        const [[method, kwargs]] = Object.entries(step);
        const { tx, ...options } = camelKeys(kwargs);
        const fn = (mz as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[camel(method)];
        await (tx === undefined ? fn.call(mz, ctx, options) : fn.call(mz, ctx, tx, options));
      }
    }
    for (const c of FIXTURE.transactions as Case[]) {
      // The same request id in both (the event records it), in contexts of their own.
      const byBuilder = await mz.commit(pair.builder, build(c), { session: FIXTURE.session, requestId: c.name });
      const byText = await mz.commit(pair.text, c.text, { session: FIXTURE.session, requestId: c.name });
      assert.deepEqual(byBuilder, byText);
      assert.equal(await eventBytes(pair.builder, byBuilder.eventRef), await eventBytes(pair.text, byText.eventRef));
      assert.equal((await mz.event(pair.builder, byBuilder.eventRef)).text, c.event_text);
    }
    assert.deepEqual(await mz.frames(pair.builder), await mz.frames(pair.text));
  });
});

describe("recall", () => {
  test("recall_04_05_search_read_and_traverse", async () => {
    const ctx = fresh("recall");
    await mz.createContext(ctx);
    const ev = await mz.appendEvent(ctx, { session: "main", kind: "tool-result", text: "regression suite: all green" });
    await mz.activate(ctx, { session: "main" });
    await mz.commit(ctx, new Tx(0).derive("t", "(tests passed)", { sources: [ev.ref] }).create("r", "(x)").relate("r", "needs", "t"));
    const page = await mz.read(ctx, ev.ref, { offset: 0, limit: 10 });
    assert.deepEqual([page.text, page.hasMore, page.totalChars], ["regression", true, 27]);
    const pages = [];
    for await (const p of mz.walk(ctx, "r", { depth: 2, direction: "ancestors", maxNodes: 1 })) pages.push(p);
    assert.deepEqual(pages.flatMap((p) => p.nodes.map((n) => n.ref || n.id)), ["r", "t", ev.ref]);
    // The index catches up in the background: wait for it to hold the commit.
    for (let i = 0; (await mz.inspectIndex(ctx)).lag > 0; i++) {
      assert.ok(i < 200, "the recall index did not catch up");
      await new Promise((r) => setTimeout(r, 50));
    }
    // Lexical: hybrid (the default) would also list the vector leg's nearest neighbours.
    const found = await mz.search(ctx, "regression", { mode: "lexical" });
    assert.deepEqual(found.results.map((h) => h.ref), [ev.ref]);
  });

  test("recall_11_occurred_time_travels_and_filters_time_range_search", async () => {
    const ctx = fresh("occurred");
    await mz.createContext(ctx);
    const old = await mz.appendEvent(ctx, { session: "main", kind: "user-message", text: "imported note", occurredAt: "2019-03-01T09:30:00+08:00" });
    const naive = await rejection(mz.appendEvent(ctx, { session: "main", kind: "user-message", text: "x", occurredAt: "2019-03-01T09:30:00" }));
    assert.deepEqual([naive.reason, naive.details.field], ["CONTEXT_INPUT_INVALID", "occurred_at"]);
    assert.equal((await mz.event(ctx, old.ref)).occurredAt, "2019-03-01T09:30:00.000000+08:00");
    for (let i = 0; (await mz.inspectIndex(ctx)).lag > 0; i++) {
      assert.ok(i < 200, "the recall index did not catch up");
      await new Promise((r) => setTimeout(r, 50));
    }
    const found = await mz.search(ctx, "", { since: "2019-03-01T01:00:00Z", until: "2019-03-01T02:00:00Z" });
    assert.deepEqual(found.results.map((h) => [h.ref, h.timeBasis, h.occurredAt]),
      [[old.ref, "occurred", "2019-03-01T09:30:00.000000+08:00"]]);
  });

  test("recall_11_append_events_commits_a_batch_once_with_its_occurred_times", async () => {
    const ctx = fresh("batch");
    await mz.createContext(ctx);
    const items = [
      { session: "main", kind: "user-message", text: "first imported", occurredAt: "2019-03-01T09:30:00+08:00", requestId: `${ctx}-1` },
      { session: "main", kind: "tool-result", text: "second imported", requestId: `${ctx}-2` },
      { session: "main", kind: "user-message", text: "third imported", requestId: `${ctx}-3` },
    ];
    const reply = await mz.appendEvents(ctx, items);
    assert.deepEqual(reply.events.map((e) => [e.ref, e.replayed]), [["@e1", false], ["@e2", false], ["@e3", false]]);
    const seq = reply.events[0].commitSeq;  // one commit for the whole batch
    assert.ok(reply.events.every((e) => e.commitSeq === seq) && seq > 0);
    assert.equal(mz.writePosition(ctx), seq);
    assert.equal((await mz.event(ctx, "@e1")).occurredAt, "2019-03-01T09:30:00.000000+08:00");
    assert.equal((await mz.event(ctx, "@e2")).occurredAt, "");
    // Sent again with the same request ids: replayed, nothing appended twice.
    const again = await mz.appendEvents(ctx, items);
    assert.deepEqual(again.events.map((e) => [e.ref, e.replayed]), [["@e1", true], ["@e2", true], ["@e3", true]]);
    // All or none: one bad item names its index and nothing of the batch is applied.
    const bad = await rejection(mz.appendEvents(ctx, [
      { session: "main", kind: "user-message", text: "fine" },
      { session: "main", kind: "user-message", text: "no offset", occurredAt: "2019-03-01T09:30:00" },
    ]));
    assert.deepEqual([bad.reason, bad.details.field, bad.details.index], ["CONTEXT_INPUT_INVALID", "occurred_at", 1]);
    assert.equal((await mz.status(ctx)).eventCount, 4);  // context-created and the three
  });

  test("recall_13_fifty_appends_then_a_search_finds_the_fiftieth", async () => {
    // The reproduction, no waiting: the client sends its last write's commitSeq.
    const ctx = fresh("recall13");
    await mz.createContext(ctx);
    let last;
    for (let i = 0; i < 50; i++) {
      last = await mz.appendEvent(ctx, { session: "s1", kind: "user-message", text: `note ${i} marker${i}` });
    }
    assert.ok(last!.commitSeq > 0);
    assert.equal(mz.writePosition(ctx), last!.commitSeq);
    const found = await mz.search(ctx, "marker49");  // the default mode (hybrid) finds more
    assert.ok(found.results.map((h) => h.ref).includes(last!.ref));
    assert.equal(found.unclosedLag, 0);
    const missed = [];
    for (let i = 0; i < 20; i++) {  // and each search right after its append
      const ev = await mz.appendEvent(ctx, { session: "s1", kind: "user-message", text: `item${i}` });
      const reply = await mz.search(ctx, `item${i}`);
      if (!reply.results.map((h) => h.ref).includes(ev.ref)) missed.push(i);
    }
    assert.deepEqual(missed, []);
  });

  test("recall_13_a_version_not_reached_in_time_answers_its_lag", async () => {
    const ctx = fresh("recall13b");
    await mz.createContext(ctx);
    const head = (await mz.status(ctx)).commitSeq;
    const short = new Client(server.address, { credentials: {}, timeoutMs: 2000 });
    try {
      const reply = await short.search(ctx, "anything", { minCommitSeq: head + 5 });
      assert.deepEqual([reply.unclosedLag, reply.indexPosition], [5, head]);
    } finally {
      short.close();
    }
  });
});

/** The job as first seen finished (queued and running are not), polled: the condition,
 * not a time, ends the wait (the bound only keeps a broken server from hanging the run). */
async function finished(id: string, boundMs = 120_000): Promise<Job> {
  const end = Date.now() + boundMs;
  for (;;) {
    const job = await mz.job(id);
    if (job.state !== "queued" && job.state !== "running") return job;
    assert.ok(Date.now() < end, `job ${id} still ${job.state} after ${boundMs} ms: ${JSON.stringify(job)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe("server-side jobs", () => {
  test("sec_07_an_audit_job_started_from_typescript_runs_to_its_report", async () => {
    const ctx = fresh("sec07");
    await mz.createContext(ctx);
    await mz.appendEvents(ctx, [1, 2, 3].map((i) => ({ session: "s", kind: "user-message", text: `event ${i}` })));
    const started = await mz.startJob(ctx, "audit");
    assert.ok(started.id.startsWith("tx-"), started.id);
    assert.deepEqual([started.kind, started.context], ["audit", ctx]);
    assert.ok(["queued", "running"].includes(started.state), started.state);
    const done = await finished(started.id);
    assert.equal(done.state, "succeeded", JSON.stringify(done));
    const report = JSON.parse(done.resultJson);
    assert.deepEqual([report.match, report.events_replayed], [true, 4]);  // and the creation
    assert.deepEqual([done.done, done.total, done.errorReason], [4, 4, ""]);
    // Cancelling a finished job changes nothing; both services' jobs are listed.
    assert.equal((await mz.cancelJob(started.id)).state, "succeeded");
    const index = await mz.startJob(ctx, "rebuild-index");
    assert.ok(index.id.startsWith("recall-"), index.id);
    assert.equal((await finished(index.id)).state, "succeeded");
    const listed = (await mz.jobs(ctx)).map((j) => j.id);
    assert.ok(listed.includes(started.id) && listed.includes(index.id), JSON.stringify(listed));
  });

  test("sec_07_job_calls_refuse_unknown_kinds_and_ids_and_carry_a_deadline", async () => {
    const kind = await rejection(mz.startJob("anything", "compact" as JobKind));
    assert.ok(kind instanceof InvalidInputError);
    assert.deepEqual([kind.reason, kind.details.field], ["CONTEXT_INPUT_INVALID", "kind"]);
    const missing = await rejection(mz.job("recall-0000000000000000"));
    assert.deepEqual([missing.reason, missing.code], ["JOB_NOT_FOUND", "NOT_FOUND"]);
    // A listener that accepts connections and never answers: only the call's own
    // deadline can end each call (without one it would wait forever).
    const held: net.Socket[] = [];
    const silent = net.createServer((socket) => held.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const address = `127.0.0.1:${(silent.address() as net.AddressInfo).port}`;
    const stuck = new Client(address, { credentials: {}, timeoutMs: 200, retry: { attempts: 1 } });
    try {
      for (const call of [() => stuck.startJob("anything", "audit"), () => stuck.job("tx-0000000000000000"),
        () => stuck.jobs(), () => stuck.cancelJob("recall-0000000000000000")]) {
        assert.equal((await rejection(call())).reason, "DEADLINE_EXCEEDED");
      }
    } finally {
      stuck.close();
      for (const socket of held) socket.destroy();
      silent.close();
    }
  });
});

describe("encoding and snapshots", () => {
  test("asm_03_04_compile_freezes_a_snapshot_that_replays", async () => {
    const ctx = fresh("enc");
    await mz.createContext(ctx);
    await mz.appendEvent(ctx, { session: "main", kind: "user-message", text: "Ship v1." });
    const enc = await mz.compile(ctx, { session: "main", model: "m", bindings: { cwd: "/srv" } });
    assert.ok(enc.text.startsWith("(protocol") && enc.text.includes("(observation @e1"));
    assert.deepEqual(enc.claimed, ["@e1"]);
    const record = await mz.showSnapshot(ctx, enc.snapshot);
    assert.equal(typeof record, "object");
    const replay = await mz.replaySnapshot(ctx, enc.snapshot);
    assert.deepEqual([replay.match, replay.hash], [true, enc.hash]);
    assert.ok((await mz.checkSnapshot(ctx, enc.snapshot)).current);
    assert.equal((await mz.readSnapshot(ctx, enc.snapshot, "@e1")).text, "Ship v1.");
    assert.deepEqual((await mz.searchSnapshot(ctx, enc.snapshot, "ship")).hits.map((h) => h.key), ["@e1"]);
  });

  test("asm_06_snapshots_listed_newest_first_and_an_evaluation_by_reference", async () => {
    const ctx = fresh("steps");
    await mz.createContext(ctx);
    const compiled = [];
    for (const text of ["Ship v1.", "The tests passed.", "Package it."]) {
      await mz.appendEvent(ctx, { session: "main", kind: "user-message", text });
      compiled.push(await mz.compile(ctx, { session: "main" }));
    }
    const first = compiled[0];
    const receipt = await mz.commit(ctx, new Tx(first.revision).create("release", "(goal ship-v1)"),
      { session: "main", activation: first.activation });
    const listed = [];
    for await (const page of mz.snapshotPages(ctx, { session: "main", limit: 2 })) listed.push(...page.snapshots);
    assert.deepEqual(listed.map((e) => [e.snapshot, e.hash, e.activation]),
      [...compiled].reverse().map((c) => [c.snapshot, c.hash, c.activation]));
    assert.ok(listed.every((e) => e.bytes > 0 && e.limitBytes >= e.bytes && e.level === "normal"));
    const err = await rejection(mz.listSnapshots(ctx, { limit: 101 }));
    assert.equal(err.reason, "CONTEXT_INPUT_INVALID");
    const step = await mz.evaluation(ctx, first.activation);
    assert.deepEqual([step.session, step.next, step.previous], ["main", compiled[1].activation, ""]);
    assert.deepEqual(step.transactions.map((t) => [t.ref, t.revision]), [[receipt.eventRef, receipt.revision]]);
    assert.deepEqual(step.mind?.changes.map((c) => [c.key, c.change]), [["release", "created"]]);
  });
});

describe("privacy", () => {
  test("priv_01_ts_erase_dry_run_then_erasure_says_who_why_and_when", async () => {
    const ctx = fresh("priv01");
    await mz.createContext(ctx);
    const gone = (await mz.appendEvent(ctx, { session: "alice", kind: "user-message", text: "alice lives at 12 Elm Row" })).ref;
    const kept = (await mz.appendEvent(ctx, { session: "bob", kind: "user-message", text: "bob likes tea" })).ref;
    await mz.commit(ctx, new Tx(0).derive("address", "(street elm)", { sources: [gone] }));
    const dry = await mz.erase(ctx, { session: "alice", dryRun: true });
    assert.ok(dry.dryRun);
    assert.deepEqual([dry.events, dry.frames], [[gone], ["address"]]);
    assert.equal((await mz.event(ctx, gone)).text, "alice lives at 12 Elm Row");
    assert.equal((await rejection(mz.erase(ctx, { session: "alice" }))).reason, "ERASE_REASON_REQUIRED");
    const done = await mz.erase(ctx, { session: "alice", reason: "right to erasure" });
    assert.deepEqual(done.events, [gone]);
    const erasure = done.erasures[0];
    const ev = await mz.event(ctx, gone, { revealSecrets: true });
    assert.equal(ev.text, `[erased ${erasure}]`);
    assert.equal(ev.erased?.erasure, erasure);
    assert.equal(ev.erased?.reason, "right to erasure");
    assert.ok(ev.erased?.at);
    assert.equal((await mz.frame(ctx, "address")).body, `[erased ${erasure}]`);
    assert.equal((await mz.event(ctx, kept)).text, "bob likes tea");
    const report = await mz.audit(ctx);
    assert.ok(report.match);
    assert.equal(Number(report.chain?.erased), 2);  // the event, and the transaction's body
  });

  test("priv_04_ts_sets_reads_and_clears_a_retention_policy", async () => {
    const ctx = fresh("priv04");
    await mz.createContext(ctx);
    const set = await mz.setRetention(ctx, "(retention (days 30) (kinds external tool-result))");
    assert.deepEqual([[...(set.retention?.kinds ?? [])].sort(), set.retention?.days], [["external", "tool-result"], 30]);
    assert.equal(set.retention?.setAt, set.eventRef);
    assert.equal((await mz.policy(ctx)).retention?.policy, set.retention?.policy);
    assert.equal((await mz.status(ctx)).retention?.policy, set.retention?.policy);
    assert.equal((await rejection(mz.setRetention(ctx, "(retention (kinds user-message) (days 0))"))).reason, "CONTEXT_INPUT_INVALID");
    assert.equal((await mz.setRetention(ctx, "none")).retention, null);
  });

  test("priv_05_ts_export_streams_the_events_with_erased_ones_as_placeholders", async () => {
    const ctx = fresh("priv05x");
    await mz.createContext(ctx);
    const gone = (await mz.appendEvent(ctx, { session: "a", kind: "user-message", text: "my number is 555-0101" })).ref;
    await mz.appendEvent(ctx, { session: "a", kind: "tool-result", text: "weather: rain" });
    await mz.erase(ctx, { refs: [gone], reason: "asked to forget" });
    const pages = [];
    for await (const page of mz.export(ctx)) pages.push(page);
    const events = pages.flatMap((p) => p.events);
    const last = pages[pages.length - 1];
    assert.equal(Number(last.done), Number(last.total));
    const byRef = new Map(events.map((e) => [e.ref, e]));
    assert.ok(byRef.get(gone)?.erased);
    assert.ok(!events.some((e) => e.text.includes("555-0101")));
    assert.ok(events.some((e) => e.kind === "tool-result" && e.text === "weather: rain"));
    assert.equal((await rejection((async () => { for await (const p of mz.export("no-such-ctx")) void p; })())).reason,
      "CONTEXT_NOT_FOUND");
  });

  test("priv_05_ts_delete_context_frees_its_name", async () => {
    const ctx = fresh("priv05");
    await mz.createContext(ctx);
    await mz.appendEvent(ctx, { session: "s", kind: "user-message", text: "short-lived" });
    const done = await mz.deleteContext(ctx, { reason: "a test context" });
    assert.equal(done.context, ctx);
    assert.equal(Number(done.eventCount), 2);
    assert.equal((await rejection(mz.status(ctx))).reason, "CONTEXT_NOT_FOUND");
    assert.equal(Number((await mz.createContext(ctx)).eventCount), 1);
  });
});
