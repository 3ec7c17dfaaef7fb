// Client: the Morphz public services (transaction, recall, encoding) over gRPC, the
// Python client's surface with camelCase names and promises.
//
//   const mz = new Client("127.0.0.1:7070");
//   await mz.createContext("demo");
//   await mz.appendEvent("demo", { session: "main", kind: "user-message", text: "Ship v1." });
//   const enc = await mz.compile("demo", { session: "main" });   // what the model sees
//   const receipt = await mz.commit("demo", new Tx(enc.revision).create("release", "(goal ship-v1)"),
//                                   { session: "main", activation: enc.activation });
//
// Every call carries a deadline (`timeoutMs`, per attempt). Reads, and writes carrying a
// request id, are retried after transient failures (`retry`); appends and commits get a
// fresh request id unless given one, so a retry is answered with the original receipt.
// Failures reject with MorphzError subclasses (errors.ts).
import * as grpc from "@grpc/grpc-js";

import {
  Call, DEFAULT_TIMEOUT_MS, MAX_REDIRECTS, REBUILD_TIMEOUT_MS, RetryPolicy, Safety, UnaryMethod,
  backoffs, newRequestId, once, redirect, retryPolicy, retryable, sleep,
} from "./call";
import { MorphzError, fromServiceError, inputError } from "./errors";
import { CHANNEL_OPTIONS, Credentials, channelCredentials, credentialsFromEnv, targetFor } from "./options";
import { services } from "./protos";
import { Tx } from "./tx";
import type * as T from "./types";

type Service = "transaction" | "recall" | "encoding";
type Stub = grpc.Client & Record<string, UnaryMethod<object, unknown>>;

export interface ClientOptions {
  /** recall/encoding: those services' addresses when they run apart (default
   * $MORPHZ_RECALL/$MORPHZ_ENCODING, else the target). */
  recall?: string;
  encoding?: string;
  /** Default: from $MORPHZ_TLS_CA, $MORPHZ_TLS_CERT, $MORPHZ_TLS_KEY, $MORPHZ_TOKEN. */
  credentials?: Credentials;
  /** The deadline of every call (each attempt). */
  timeoutMs?: number;
  retry?: Partial<RetryPolicy>;
}

/** A recall made for an evaluation: its reply is also recorded as a `recall` observation
 * of `session` (so such a call is never retried). */
export interface Evaluation {
  session: string;
  activation: string;
}

export type TxInput = string | Tx | T.Transaction;

export interface AppendEventOptions {
  session: string;
  /** user-message | tool-result | approval | external | message | action */
  kind: string;
  text: string;
  actor?: string;
  causalRefs?: string[];
  activation?: string;
  targetSession?: string;
  /** The text is shown as [secret @eN] unless a read asks to reveal it (and may). */
  secret?: boolean;
  /** undefined: a fresh one (the call is then retried safely); "": none. */
  requestId?: string;
  /** When it happened at its source: ISO 8601 with a UTC offset (else when recorded);
   * time-range search filters on it. A time without an offset is CONTEXT_INPUT_INVALID. */
  occurredAt?: string;
}

/** Rights a policy grants: read, write, recall, encode, reveal, admin, erase (docs/privacy.md). */
export type Right = "read" | "write" | "recall" | "encode" | "reveal" | "admin" | "erase";

/** Which events an erasure takes: every criterion given holds (at least refs, a session,
 * an actor or a phrase; kinds only with `until`). */
export interface EraseOptions {
  refs?: string[];
  session?: string;
  actor?: string;
  /** Text the event holds (case and width folded); never recorded by the erasure. */
  phrase?: string;
  kinds?: string[];
  /** Occurred time (recorded where none was given), ISO 8601 with an offset: since
   * inclusive, until exclusive. */
  since?: string;
  until?: string;
  /** Why: required, unless dryRun. */
  reason?: string;
  /** What it would take; nothing changed. */
  dryRun?: boolean;
}

export interface SearchOptions {
  since?: string;
  until?: string;
  limit?: number;
  kinds?: string[];
  states?: string[];
  sessions?: string[];
  cursor?: string;
  /** "hybrid" (the server's default), "lexical" or "vector"; hits carry lexicalRank and vectorRank. */
  mode?: "lexical" | "vector" | "hybrid";
  evaluation?: Evaluation;
  /** Read your writes: the context version (commitSeq) the index must reach first;
   * undefined: this client's last write's in the context, 0: the index as it is. The
   * reply's unclosedLag is what the server's bounded wait could not close. */
  minCommitSeq?: number;
}

export interface FramesOptions {
  revealSecrets?: boolean;
  /** Page size in bytes (whole frames); 0: every frame in one reply. */
  maxBytes?: number;
  cursor?: string;
}

/** A page of frames when listing them in pages. */
export const FRAME_PAGE_BYTES = 4 << 20;

/** pageAt(cursor) from the first page (cursor "") on, each nextCursor in turn, until a page has none. */
async function* following<P extends { nextCursor: string }>(pageAt: (cursor: string) => Promise<P>): AsyncGenerator<P> {
  let cursor = "";
  for (;;) {
    const page = await pageAt(cursor);
    yield page;
    if (!page.nextCursor) return;
    cursor = page.nextCursor;
  }
}

export interface TraverseOptions {
  depth?: number;
  direction?: "" | "ancestors" | "descendants" | "both";
  includeBodies?: boolean;
  includeEvents?: boolean;
  maxNodes?: number;
  maxBytes?: number;
  cursor?: string;
  evaluation?: Evaluation;
}

export interface CompileOptions {
  session: string;
  /** Empty: claim the session's pending inputs (a new activation). */
  activation?: string;
  budgetBytes?: number;
  budgetTokens?: number;
  previewBytes?: number;
  mustRead?: string[];
  /** revealSecrets: render secrets as stored (needs the reveal right). */
  scope?: { sessions?: string[]; kinds?: string[]; since?: string; until?: string; frames?: string[]; revealSecrets?: boolean };
  parentSnapshot?: string;
  model?: string;
  evaluationProfile?: string;
  bindings?: Record<string, string>;
  capabilities?: boolean;
}

export interface ListSnapshotsOptions {
  session?: string;
  activation?: string;
  /** When frozen: since inclusive, until exclusive; ISO 8601 with an explicit offset. */
  since?: string;
  until?: string;
  /** 1..100; 0 or undefined: 20. */
  limit?: number;
  cursor?: string;
}

const CONSTRUCTORS = services();

/** The kinds of server-side job, and the service that runs each. */
export type JobKind = "audit" | "rebuild-projections" | "rebuild-index";
const JOB_KINDS: Record<string, Service> = {
  audit: "transaction", "rebuild-projections": "transaction", "rebuild-index": "recall",
};

/** The service holding a job: its id names it ("recall-..." or "tx-..."). */
function jobService(id: string): Service {
  return id.startsWith("recall-") ? "recall" : "transaction";
}

export class Client {
  readonly targets: Record<Service, string>;
  readonly timeoutMs: number;
  readonly retry: RetryPolicy;
  private readonly credentials: grpc.ChannelCredentials;
  private readonly token: string;
  private readonly channels = new Map<string, grpc.Channel>();
  private readonly stubs: Record<Service, Stub>;
  /** The highest commitSeq this client's writes returned, per context (RECALL-13). */
  private readonly positions = new Map<string, number>();

  /** `target`: the server (all-in-one), default $MORPHZ_SERVER or 127.0.0.1:7070. */
  constructor(target?: string, options: ClientOptions = {}) {
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!(timeoutMs > 0)) throw inputError("timeoutMs must be a positive number", { field: "timeoutMs" });
    const creds = options.credentials ?? credentialsFromEnv();
    this.credentials = channelCredentials(creds);
    this.token = creds.token ?? "";
    this.timeoutMs = timeoutMs;
    this.retry = retryPolicy(options.retry);
    this.targets = {
      transaction: targetFor("transaction", target),
      recall: options.recall || target || targetFor("recall"),
      encoding: options.encoding || target || targetFor("encoding"),
    };
    this.stubs = {
      transaction: this.stub("transaction", this.targets.transaction),
      recall: this.stub("recall", this.targets.recall),
      encoding: this.stub("encoding", this.targets.encoding),
    };
  }

  // -- plumbing -------------------------------------------------------------------------
  /** One channel per address, shared by the services there. */
  private stub(service: Service, address: string): Stub {
    const channel = this.channels.get(address);
    const stub = new CONSTRUCTORS[service](address, this.credentials,
      channel ? { channelOverride: channel } : CHANNEL_OPTIONS) as unknown as Stub;
    if (!channel) this.channels.set(address, stub.getChannel() as grpc.Channel);
    return stub;
  }

  close(): void {
    for (const channel of this.channels.values()) channel.close();
    this.channels.clear();
  }

  private metadata(): grpc.Metadata {
    const md = new grpc.Metadata();
    if (this.token) md.set("authorization", `Bearer ${this.token}`);
    return md;
  }

  private async send<Res>(service: Service, call: Call): Promise<Res> {
    let stub = this.stubs[service];
    const waits = backoffs(this.retry);
    let hops = 0;
    for (;;) {
      let err: MorphzError;
      try {
        const reply = await once<Res>(stub[call.method].bind(stub) as UnaryMethod<object, Res>, call.request,
          this.metadata(), call.timeoutMs ?? this.timeoutMs);
        if (call.safety !== "read") this.noteWrite(call.request, reply);
        return reply;
      } catch (e) {
        if (!(e instanceof MorphzError)) throw e;
        err = e;
      }
      const address = service === "transaction" ? redirect(err) : undefined;
      if (address && hops < MAX_REDIRECTS) {
        hops++;
        stub = this.stub(service, address);
        continue;
      }
      const wait = retryable(call, err) ? waits.next() : undefined;
      if (!wait || wait.done) throw err;
      await sleep(wait.value);
    }
  }

  private noteWrite(request: object, reply: unknown): void {
    const context = (request as { context?: string }).context;
    // A batch's replies (AppendEvents) each carry the commitSeq of the one commit; a
    // reply whose `events` is a count (RebuildIndex's) names no write.
    const r = reply as { commitSeq?: number; events?: unknown } | null;
    const batch = Array.isArray(r?.events) ? (r?.events as { commitSeq?: number }[]) : [];
    const seq = Number(r?.commitSeq ?? batch[batch.length - 1]?.commitSeq ?? 0);
    if (context && seq > (this.positions.get(context) ?? 0)) this.positions.set(context, seq);
  }

  /** The commitSeq of this client's last write in `context` (0: none seen). */
  writePosition(context: string): number {
    return this.positions.get(context) ?? 0;
  }

  private tx<Res>(method: string, request: object, safety: Safety): Promise<Res> {
    return this.send("transaction", { method, request, safety });
  }

  // -- contexts -------------------------------------------------------------------------
  /** A new context (`window`: the organizing window in ticks; 0: default 8). */
  createContext(context: string, options: { window?: number } = {}): Promise<T.ContextStatus> {
    return this.tx("CreateContext", { context, window: options.window ?? 0 }, "never");
  }

  status(context: string): Promise<T.ContextStatus> {
    return this.tx("GetStatus", { context }, "read");
  }

  // -- events ---------------------------------------------------------------------------
  /** Any input: user-message | tool-result | approval | external | message | action. */
  appendEvent(context: string, options: AppendEventOptions): Promise<T.AppendEventResponse> {
    const request = this.appendRequest(context, options);
    return this.tx("AppendEvent", request, request.requestId ? "request_id" : "never");
  }

  private appendRequest(context: string, options: AppendEventOptions) {
    return {
      context, session: options.session, kind: options.kind, text: options.text, actor: options.actor ?? "",
      causalRefs: options.causalRefs ?? [], activation: options.activation ?? "",
      targetSession: options.targetSession ?? "", secret: options.secret ?? false,
      requestId: options.requestId ?? newRequestId(), occurredAt: options.occurredAt ?? "",
    };
  }

  /** Many events in one commit (all or none; at most 10,000), each given as appendEvent's
   * options. Each keeps its own request id (a fresh one where none is given), so a batch
   * sent again applies only what was not; replies come one per event, in order. */
  appendEvents(context: string, events: AppendEventOptions[]): Promise<T.AppendEventsResponse> {
    const items = events.map((options) => this.appendRequest("", options));
    return this.tx("AppendEvents", { context, events: items },
      items.every((i) => i.requestId) ? "request_id" : "never");
  }

  /** A message from `session` waiting in session `to`'s inbox. */
  sendMessage(context: string, options: { session: string; to: string; text: string; actor?: string; requestId?: string }): Promise<T.AppendEventResponse> {
    const { to, ...rest } = options;
    return this.appendEvent(context, { ...rest, kind: "message", targetSession: to });
  }

  /** A tool call the open `activation` of `session` issues. */
  recordAction(context: string, options: { session: string; activation: string; text: string; actor?: string; causalRefs?: string[]; requestId?: string }): Promise<T.AppendEventResponse> {
    return this.appendEvent(context, { ...options, kind: "action" });
  }

  /** A tool's result; `call`: the action (@eN) it answers (it then belongs to that call's
   * session, and `session` may stay empty). */
  toolResult(context: string, options: { text: string; call?: string; session?: string; actor?: string; requestId?: string }): Promise<T.AppendEventResponse> {
    const { call, session, ...rest } = options;
    return this.appendEvent(context, { ...rest, session: session ?? "", kind: "tool-result", causalRefs: call ? [call] : [] });
  }

  /** One event by @eN or full id (operator's read: every session's). `revealSecrets`:
   * a secret text as stored (FORBIDDEN without the reveal right, never silently redacted). */
  event(context: string, ref: string, options: { revealSecrets?: boolean } = {}): Promise<T.Event> {
    return this.tx("GetEvent", { context, ref, revealSecrets: options.revealSecrets ?? false }, "read");
  }

  // -- activations ----------------------------------------------------------------------
  /** Claim the session's pending inputs as one evaluation (never retried). */
  activate(context: string, options: { session: string }): Promise<T.Activation> {
    return this.tx("Activate", { context, session: options.session }, "never");
  }

  /** The evaluation answered: its root request may now be retired. Delivering a
   * delivered activation answers it again, so a retry is harmless. */
  deliver(context: string, activation: string): Promise<T.Activation> {
    return this.tx("Deliver", { context, activation }, "request_id");
  }

  // -- transactions and the Mind --------------------------------------------------------
  /** Commit one context-tx: DSL text, a Tx builder or a Transaction message. A TX_CONFLICT
   * rejects with ConflictError naming the changed boundaries. */
  commit(context: string, tx: TxInput, options: { session?: string; activation?: string; requestId?: string } = {}): Promise<T.Receipt> {
    const requestId = options.requestId ?? newRequestId();
    const request: T.CommitRequest = { context, session: options.session ?? "", activation: options.activation ?? "", requestId };
    if (typeof tx === "string") request.text = tx;
    else if (tx instanceof Tx) request.structured = tx.toProto();
    else if (tx !== null && typeof tx === "object" && Array.isArray((tx as T.Transaction).ops)) request.structured = tx;
    else return Promise.reject(inputError("tx must be DSL text, a Tx or a Transaction message", { field: "tx" }));
    return this.tx("Commit", request, requestId ? "request_id" : "never");
  }

  frame(context: string, frameId: string, options: { atRevision?: number; revealSecrets?: boolean } = {}): Promise<T.Frame> {
    return this.tx("GetFrame", { context, frameId, atRevision: options.atRevision ?? 0, revealSecrets: options.revealSecrets ?? false }, "read");
  }

  /** Every frame of the Mind, in projection order (REPLY_TOO_LARGE: more than one message
   * holds; list them in pages); with maxBytes, the page from `cursor`. */
  frames(context: string, options: FramesOptions = {}): Promise<T.FrameList> {
    return this.tx("ListFrames", {
      context, revealSecrets: options.revealSecrets ?? false,
      maxBytes: options.maxBytes ?? 0, cursor: options.cursor ?? "",
    }, "read");
  }

  /** Every page of the frames, following nextCursor (FRAMES_CURSOR_STALE: the Mind changed
   * between pages; list again). */
  framePages(context: string, options: Omit<FramesOptions, "cursor"> = {}): AsyncGenerator<T.FrameList> {
    return following((cursor) => this.frames(context, { maxBytes: FRAME_PAGE_BYTES, ...options, cursor }));
  }

  audit(context: string): Promise<T.AuditReport> {
    return this.tx("Audit", { context }, "read");
  }

  /** Rebuild the context's projections from its history (admin); what matched is left
   * alone, so doing it again is harmless. A long one is better run as a job (startJob). */
  rebuildProjections(context: string): Promise<T.RebuildReport> {
    return this.send("transaction", { method: "RebuildProjections", request: { context }, safety: "idempotent", timeoutMs: REBUILD_TIMEOUT_MS });
  }

  // -- server-side jobs (audit, rebuild-projections, rebuild-index) -----------------------
  /** Start `kind` on `context` as a server-side job: answered at once with its id (poll
   * job(id)); the job outlives the call and its deadline. An unknown kind is refused
   * before sending. */
  startJob(context: string, kind: JobKind): Promise<T.Job> {
    const service = JOB_KINDS[kind];
    if (!service) {
      return Promise.reject(inputError(`unknown job kind ${JSON.stringify(String(kind).slice(0, 40))}: ${Object.keys(JOB_KINDS).join(" | ")}`, { field: "kind" }));
    }
    return this.send(service, { method: "StartJob", request: { context, kind }, safety: "never" });
  }

  /** The job's state, progress (done of total) and, once finished, resultJson (the
   * operation's reply as JSON) or errorReason. */
  job(id: string): Promise<T.Job> {
    return this.send(jobService(id), { method: "GetJob", request: { id }, safety: "read" });
  }

  /** The jobs this principal may see (of `context` if given), of both services. */
  async jobs(context = ""): Promise<T.Job[]> {
    const lists = await Promise.all((["transaction", "recall"] as const).map((service) =>
      this.send<T.JobList>(service, { method: "ListJobs", request: { context }, safety: "read" })));
    return lists.flatMap((list) => list.jobs);
  }

  /** Ask the job to stop at its next check (nothing is left half-done); a finished job
   * answers as it is. Asking twice asks the same, so it is retried. */
  cancelJob(id: string): Promise<T.Job> {
    return this.send(jobService(id), { method: "CancelJob", request: { id }, safety: "idempotent" });
  }

  // -- authorization ----------------------------------------------------------------------
  /** Give `principal` ("*": every authenticated one) rights on the context; `session`:
   * for that session only. Each change is a policy event, so it is never resent. */
  grant(context: string, principal: string, rights: Right[], options: { session?: string } = {}): Promise<T.Policy> {
    return this.tx("SetPolicy", { context, op: "grant", principal, rights, session: options.session ?? "" }, "never");
  }

  revoke(context: string, principal: string, rights: Right[], options: { session?: string } = {}): Promise<T.Policy> {
    return this.tx("SetPolicy", { context, op: "revoke", principal, rights, session: options.session ?? "" }, "never");
  }

  policy(context: string): Promise<T.Policy> {
    return this.tx("GetPolicy", { context }, "read");
  }

  /** Set the context's retention policy, "(retention (kinds KIND...) (days N))", or "none"
   * to have none (administrators; docs/privacy.md): the content of those kinds older than
   * N days by occurred time is erased when it falls due. `policy()` and `status()` show it
   * and when it is next due. A policy event: never resent. */
  setRetention(context: string, policy: string): Promise<T.Policy> {
    return this.tx("SetPolicy", { context, op: "retention", principal: "", rights: [], session: "", retention: policy }, "never");
  }

  // -- privacy (docs/privacy.md) -----------------------------------------------------------
  /** Remove the context whole (events, Mind, snapshots, index, vectors, jobs); its name is
   * free again. Administrators, with a reason; never resent. */
  deleteContext(context: string, options: { reason: string }): Promise<T.ContextDeleted> {
    return this.send("transaction", { method: "DeleteContext", request: { context, reason: options.reason }, safety: "never", timeoutMs: REBUILD_TIMEOUT_MS });
  }

  /** Remove the content of the events `options` name and of what was derived only from
   * them, from every copy the server holds; the erase right (administrators hold it) and a
   * reason are required. An erasure is never resent (a second finds nothing left to take);
   * a dry run is a read. */
  erase(context: string, options: EraseOptions): Promise<T.Erasure> {
    const { dryRun, ...rest } = options;
    const request = {
      context, refs: [], session: "", actor: "", phrase: "", kinds: [], since: "", until: "", reason: "",
      ...rest, dryRun: dryRun ?? false,
    };
    return this.send("transaction", { method: "Erase", request, safety: dryRun ? "read" : "never", timeoutMs: REBUILD_TIMEOUT_MS });
  }

  /** The context's events, a page at a time with its progress (`done` of `total`), as the
   * lines `morphz context import` reads: occurred time in [since, until); secrets' text only
   * with `revealSecrets` (and the reveal right); erased events as placeholders. One
   * deadline (an hour) for the whole stream; never resent part way. */
  async *export(context: string, options: { since?: string; until?: string; revealSecrets?: boolean } = {}): AsyncGenerator<T.ExportPage> {
    const request = { context, since: options.since ?? "", until: options.until ?? "", revealSecrets: options.revealSecrets ?? false };
    const stub = this.stubs.transaction as unknown as Record<string, (
      req: object, md: grpc.Metadata, opts: grpc.CallOptions) => grpc.ClientReadableStream<T.ExportPage>>;
    const stream = stub.Export.call(stub, request, this.metadata(), { deadline: new Date(Date.now() + REBUILD_TIMEOUT_MS) });
    try {
      for await (const page of stream) yield page as T.ExportPage;
    } catch (e) {
      const serviceError = e instanceof Error && typeof (e as grpc.ServiceError).code === "number";
      throw serviceError ? fromServiceError(e as grpc.ServiceError) : e;
    } finally {
      stream.cancel();
    }
  }

  /** The contexts this principal may read. */
  async contexts(): Promise<string[]> {
    return (await this.tx<T.ContextList>("ListContexts", {}, "read")).contexts;
  }

  // -- recall ---------------------------------------------------------------------------
  private recall<Res>(method: string, request: object, evaluation?: Evaluation, timeoutMs?: number): Promise<Res> {
    const safety: Safety = evaluation ? "never" : "read";
    return this.send("recall", { method, request: { ...request, evaluation: evaluation ?? null }, safety, timeoutMs });
  }

  search(context: string, query = "", options: SearchOptions = {}): Promise<T.SearchResponse> {
    const { evaluation, minCommitSeq, ...rest } = options;
    const request = { context, query, ...rest, minCommitSeq: minCommitSeq ?? this.writePosition(context) };
    return this.recall("Search", request, evaluation);
  }

  /** A page of an event's (@eN, id) or a frame's full text. */
  read(context: string, ref: string, options: { offset?: number; limit?: number; evaluation?: Evaluation } = {}): Promise<T.ReadResponse> {
    const { evaluation, ...rest } = options;
    return this.recall("Read", { context, ref, ...rest }, evaluation);
  }

  /** One page of the graph walk from a frame (ancestors | descendants | both). */
  traverse(context: string, frameId: string, options: TraverseOptions = {}): Promise<T.TraverseResponse> {
    const { evaluation, ...rest } = options;
    return this.recall("Traverse", { context, frameId, ...rest }, evaluation);
  }

  /** Every page of a traversal, following nextCursor (RECALL_CURSOR_STALE: the Mind
   * changed between pages; walk again). */
  walk(context: string, frameId: string, options: Omit<TraverseOptions, "cursor" | "evaluation"> = {}): AsyncGenerator<T.TraverseResponse> {
    return following((cursor) => this.traverse(context, frameId, { ...options, cursor }));
  }

  inspectIndex(context: string): Promise<T.IndexStatus> {
    return this.recall("InspectIndex", { context });
  }

  rebuildIndex(context: string): Promise<T.IndexStatus> {
    return this.send("recall", { method: "RebuildIndex", request: { context }, safety: "never", timeoutMs: REBUILD_TIMEOUT_MS });
  }

  // -- encoding and snapshots -----------------------------------------------------------
  /** The Context Encoding for one model call, frozen as a snapshot. Without `activation`
   * it claims the session's pending inputs (a new activation): never retried then;
   * compiling again for a named activation changes nothing else, so that is. */
  compile(context: string, options: CompileOptions): Promise<T.Encoding> {
    const request = { ...options, context, activation: options.activation ?? "" };
    return this.send("encoding", { method: "Compile", request, safety: request.activation ? "read" : "never" });
  }

  /** The stored snapshot record (JSON, decoded). */
  async showSnapshot(context: string, snapshot: string): Promise<Record<string, unknown>> {
    const record = await this.send<T.SnapshotRecord>("encoding", { method: "ShowSnapshot", request: { context, snapshot }, safety: "read" });
    return JSON.parse(Buffer.from(record.recordJson).toString("utf8"));
  }

  replaySnapshot(context: string, snapshot: string): Promise<T.ReplayReport> {
    return this.send("encoding", { method: "Replay", request: { context, snapshot }, safety: "read" });
  }

  checkSnapshot(context: string, snapshot: string): Promise<T.CheckReport> {
    return this.send("encoding", { method: "Check", request: { context, snapshot }, safety: "read" });
  }

  readSnapshot(context: string, snapshot: string, ref: string, options: { offset?: number; limit?: number } = {}): Promise<T.ReadResult> {
    return this.send("encoding", { method: "Read", request: { context, snapshot, ref, ...options }, safety: "read" });
  }

  searchSnapshot(context: string, snapshot: string, query: string, options: { limit?: number } = {}): Promise<T.SearchResult> {
    return this.send("encoding", { method: "Search", request: { context, snapshot, query, ...options }, safety: "read" });
  }

  /** A page of the context's snapshots, newest first: a session's, an activation's or (no
   * filter) the whole context's, frozen in [since, until). */
  listSnapshots(context: string, options: ListSnapshotsOptions = {}): Promise<T.SnapshotList> {
    return this.send("encoding", { method: "ListSnapshots", request: { context, ...options }, safety: "read" });
  }

  /** Every page of listSnapshots, following nextCursor. */
  snapshotPages(context: string, options: Omit<ListSnapshotsOptions, "cursor"> = {}): AsyncGenerator<T.SnapshotList> {
    return following((cursor) => this.listSnapshots(context, { ...options, cursor }));
  }

  /** One evaluation by reference: its inputs, snapshots, recall calls, actions,
   * transactions and the Mind's change, with its session's previous and next. */
  evaluation(context: string, activation: string): Promise<T.EvaluationView> {
    return this.send("encoding", { method: "ShowEvaluation", request: { context, activation }, safety: "read" });
  }
}
