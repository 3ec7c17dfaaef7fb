// An agent loop on Morphz, with a scripted stand-in for the model (no network): the
// release story of the project's walk-through, end to end (the same story as
// clients/python/examples/release_agent.py).
//
// 1. The user asks for a release; the agent plans it (`release`) and runs the tests.
// 2. The test report comes back as a tool result; the agent derives `test-result`,
//    revises `release`, relates them and retires the digested report, in one context-tx.
// 3. Meanwhile a second session asks to pause the release: both revise `release` from the
//    same version, one gets TX_CONFLICT naming the changed boundary, rereads and merges.
// 4. Later, after this release and one of a workspace web app, the two cases are induced
//    into `release-procedure`, which supersedes them (they retire at once).
// 5. A question is answered by walking recall from `release-procedure` back to the raw
//    test report.
//
// Every model call sees a Context Encoding compiled by the server (printed), and every
// commit prints its receipt. It imports the package by its name, as a user's program does
// (in this folder the name resolves to the package itself). Run it against a server
// (scripts/serve starts one):
//
//   node dist/examples/release_agent.js [--server HOST:PORT] [--context NAME]
import { randomUUID } from "node:crypto";

import { Client, ConflictError, Tx, quote } from "@morphz/client";
import type { TraverseEdge as Edge, TraverseNode as Node } from "@morphz/client";

type TxLike = string | Tx;

// -- what the model sees: the encoding text ---------------------------------------------
/** The Mind revision the kernel region reports (the base-version to write on). */
export function revisionIn(encoding: string): number {
  const found = /\(context \S+ \(runtime \(revision (\d+)\)/.exec(encoding);
  if (!found) throw new Error("no revision in the encoding's kernel region");
  return Number(found[1]);
}

/** Results of this activation's tool calls that came back while it was open. */
export function resultsOfActivation(encoding: string): string[] {
  const found = /\(results ((?:@e\d+ ?)+)\)/.exec(encoding);
  return found ? found[1].trim().split(" ") : [];
}

// -- the model's answers -----------------------------------------------------------------
/** What the model returns for one call: a transaction, tool calls, a reply. */
interface Response {
  tx?: TxLike;
  tools?: [string, string][];  // (tool, command)
  say?: string;
}

/** Stands in for the model: each step reads the encoding it is given (refs, the
 * revision) and answers as a model following the README walk-through would. */
export class ScriptedModel {
  plan(enc: string): Response {
    return {
      tx: `(context-tx (base-version ${revisionIn(enc)}) (create release (goal ship-v1) (stage waiting-tests)))`,
      tools: [["npm test", "npm test"]], say: "Running the regression tests first.",
    };
  }

  digestReport(enc: string, stage = "(stage packaging)"): Response {
    const report = resultsOfActivation(enc).at(-1)!;
    return {
      tx: new Tx(revisionIn(enc), "测试结果已吸收，继续准备发布")
        .derive("test-result", "(tests passed)", { sources: [report] })
        .revise("release", `(goal ship-v1) ${stage}`)
        .relate("test-result", "supports", "release")
        .retire(report),
      say: "Tests passed; packaging next.",
    };
  }

  pause(enc: string, releaseBody = "(goal ship-v1) (stage waiting-tests)"): Response {
    return { tx: new Tx(revisionIn(enc)).revise("release", paused(releaseBody)), say: "Release paused." };
  }

  resume(enc: string): Response {
    return {
      tx: new Tx(revisionIn(enc)).revise("release", "(goal ship-v1) (stage packaging)"),
      tools: [["npm", "npm run build && npm pack"]],
    };
  }

  recordCaseA(enc: string, report: string): Response {
    const build = resultsOfActivation(enc).at(-1)!;
    const body = '(layout single-package) (test "npm test") (build "npm run build") ' +
      '(artifact "dist/") (result "tests, build and artifact check passed")';
    return {
      tx: new Tx(revisionIn(enc), "v1 shipped; the build log is digested")
        .derive("release-case-a", body, { sources: [report, build] })
        .revise("release", "(goal ship-v1) (stage shipped)")
        .retire(build),
      say: "v1 is packaged: dist/.",
    };
  }

  webRelease(_enc: string): Response {
    return { tools: [["pnpm", "pnpm --filter web test && pnpm --filter web build"]] };
  }

  recordCaseB(enc: string): Response {
    const log = resultsOfActivation(enc).at(-1)!;
    const body = '(layout workspace-web) (test "pnpm --filter web test") ' +
      '(build "pnpm --filter web build") (artifact "apps/web/dist/") ' +
      '(result "tests, build and artifact check passed")';
    return { tx: new Tx(revisionIn(enc), "web build log digested").derive("release-case-b", body, { sources: [log] }).retire(log) };
  }

  induce(enc: string): Response {
    const body = [
      `(steps ${quote("测试通过后构建，核验本次产物，再打包。")})`,
      '(single-package (test "npm test") (build "npm run build") (artifact "dist/"))',
      '(workspace (test "pnpm --filter web test") (build "pnpm --filter web build") (artifact "apps/web/dist/"))',
      `(applicability ${quote("先核对当前项目布局和脚本，再选择对应分支。")})`,
    ].join(" ");
    return {
      tx: `(context-tx (base-version ${revisionIn(enc)}) (reason "将两次发布经验归纳为可复用流程") ` +
        `(derive release-procedure (from release-case-a release-case-b) ${body}) ` +
        "(relate release-procedure supersedes release-case-a) " +
        "(relate release-procedure supersedes release-case-b) " +
        "(retire release-case-a release-case-b))",
    };
  }
}

/** The merge of a pause into the plan: paused, remembering the stage to resume at. */
function paused(body: string): string {
  const stage = /\(stage ([^)]+)\)/.exec(body)![1];
  const resume = stage !== "paused" ? stage : /\(resume-at ([^)]+)\)/.exec(body)![1];
  return `(goal ship-v1) (stage paused) (resume-at ${resume})`;
}

// -- the runtime -------------------------------------------------------------------------
export interface Story {
  context: string;
  request: string;
  report: string;
  conflict: string[];  // the boundaries the loser was told
  walkNodes: Node[];
  walkEdges: Edge[];
  answer: string;
}

export const TOOL_OUTPUT: Record<string, string> = {
  "npm test": "regression suite: 120 passed, 0 failed",
  "npm run build && npm pack": "built dist/ (14 files); packed ship-v1.tgz; artifact verified",
  "pnpm --filter web test && pnpm --filter web build": "web: 48 passed, 0 failed; built apps/web/dist/; artifact verified",
};

/** Runs model calls against Morphz: compile, ask the model, run its tools, commit. */
class Runtime {
  constructor(private readonly mz: Client, private readonly context: string, private readonly out: (line: string) => void) {}

  show(title: string, text = ""): void {
    this.out(`\n=== ${title}${text ? `\n${text}` : ""}`);
  }

  async say(session: string, text: string): Promise<string> {
    const ev = await this.mz.appendEvent(this.context, { session, kind: "user-message", text });
    this.show(`[${session}] user: ${text}  (${ev.ref})`);
    return ev.ref;
  }

  async compile(session: string, activation = ""): Promise<[string, string]> {
    const enc = await this.mz.compile(this.context, {
      session, activation, model: "scripted-stand-in", bindings: { cwd: "/srv/app" } });
    this.show(`[${session}] encoding ${enc.snapshot} (${enc.bytes} bytes, activation ${enc.activation}, ` +
      `revision ${enc.revision}, tick ${enc.tick})`, enc.text);
    return [enc.text, enc.activation];
  }

  async commit(session: string, activation: string, tx: TxLike) {
    const text = typeof tx === "string" ? tx : tx.text();
    const receipt = await this.mz.commit(this.context, tx, { session, activation });
    const lines = [`revision ${receipt.revision}${receipt.rebased ? " (rebased)" : ""}`,
      ...receipt.results.map((r) => `#${r.index} ${r.op} ${r.target} -> ${r.outcome}` +
        (r.frameRevision ? ` (frame revision ${r.frameRevision})` : ""))];
    this.show(`[${session}] context-tx -> receipt ${receipt.eventRef}`, `${text}\n--- receipt\n${lines.join("\n")}`);
    return receipt;
  }

  async runTools(session: string, activation: string, response: Response): Promise<string[]> {
    const refs = [];
    for (const [actor, command] of response.tools ?? []) {
      const call = await this.mz.recordAction(this.context, { session, activation, actor, text: command });
      const result = await this.mz.toolResult(this.context, { call: call.ref, actor, text: TOOL_OUTPUT[command] });
      this.show(`[${session}] tool ${actor}: ${command} (${call.ref}) -> ${result.ref} (returned to ${result.returnedTo})`);
      refs.push(result.ref);
    }
    return refs;
  }

  async step(session: string, activation: string, response: Response): Promise<string[]> {
    if (response.tx) await this.commit(session, activation, response.tx);
    const refs = await this.runTools(session, activation, response);
    if (response.say) this.show(`[${session}] agent: ${response.say}`);
    return refs;
  }
}

/** The whole story on a new context (printed through `out`); returns what the checks need. */
export async function play(mz: Client, context: string, out: (line: string) => void = console.log): Promise<Story> {
  const model = new ScriptedModel();
  const rt = new Runtime(mz, context, out);
  const story: Story = { context, request: "", report: "", conflict: [], walkNodes: [], walkEdges: [], answer: "" };
  await mz.createContext(context);

  // 1. The request; the plan; the tests run (their result returns into the activation).
  story.request = await rt.say("main", "Ship v1 once the regression tests pass.");
  let [enc, aMain] = await rt.compile("main");
  [story.report] = await rt.step("main", aMain, model.plan(enc));

  // 2 and 3. The report is digested while the chat session asks to pause: both write on
  // the revision they read; whichever commits second is told what changed and merges.
  await rt.say("chat", "先暂停发布 (hold the release for now).");
  const [encMain] = await rt.compile("main", aMain);
  const [encChat, aChat] = await rt.compile("chat");
  const answers: Record<string, Response> = { main: model.digestReport(encMain), chat: model.pause(encChat) };
  const activations: Record<string, string> = { main: aMain, chat: aChat };
  const sessions = Object.keys(answers);
  const outcomes = await Promise.all(sessions.map((s) =>
    rt.step(s, activations[s], answers[s]).catch((e: unknown) => {
      if (e instanceof ConflictError) return e;
      throw e;
    })));
  const lost = outcomes.map((o, i) => [sessions[i], o] as const).filter(([, o]) => o instanceof ConflictError);
  if (lost.length !== 1) throw new Error(`${lost.length} of two revisions of one release version were refused, not 1`);
  const [loser, err] = lost[0] as [string, ConflictError];
  story.conflict = err.boundaries;
  rt.show(`[${loser}] TX_CONFLICT: ${err.boundaries.join(", ")} changed since base-version ${err.base} ` +
    `(latest ${err.latest}): reread and merge`);
  const release = await mz.frame(context, "release");  // the reread
  rt.show(`[${loser}] reread release r${release.revision}: ${release.body}`);
  [enc] = await rt.compile(loser, activations[loser]);
  const merged = loser === "chat" ? model.pause(enc, release.body)
    : model.digestReport(enc, "(stage paused) (resume-at packaging)");
  await rt.step(loser, activations[loser], merged);
  for (const session of ["main", "chat"]) await mz.deliver(context, activations[session]);

  // 4. Later: the pause is lifted and v1 ships (case a); a web app ships (case b); the
  // two cases are induced into a procedure that supersedes them.
  await rt.say("main", "Pause lifted: package and ship v1.");
  let a: string;
  [enc, a] = await rt.compile("main");
  await rt.step("main", a, model.resume(enc));
  [enc] = await rt.compile("main", a);
  await rt.step("main", a, model.recordCaseA(enc, story.report));
  await mz.deliver(context, a);
  await rt.say("main", "Now release the web app of the workspace the same way.");
  [enc, a] = await rt.compile("main");
  await rt.step("main", a, model.webRelease(enc));
  [enc] = await rt.compile("main", a);
  await rt.step("main", a, model.recordCaseB(enc));
  [enc] = await rt.compile("main", a);
  await rt.step("main", a, model.induce(enc));
  await mz.deliver(context, a);

  // 5. A question answered from the procedure back to the raw evidence.
  await rt.say("main", "Did the v1 regression tests really pass? Show me the report.");
  [enc, a] = await rt.compile("main");
  for await (const page of mz.walk(context, "release-procedure", { depth: 2, direction: "ancestors", includeBodies: true })) {
    story.walkNodes.push(...page.nodes);
    story.walkEdges.push(...page.edges);
  }
  rt.show("[main] recall walk from release-procedure (ancestors, depth 2)",
    [...story.walkNodes.map(nodeLine), ...story.walkEdges.map((e) => `  ${e.from} -${e.name || e.kind}-> ${e.to}`)].join("\n"));
  const leaf = story.walkNodes.find((n) => n.kind === "event" && n.eventKind === "tool-result" &&
    n.preview.startsWith("regression suite"));
  if (!leaf) throw new Error("the recall walk did not reach the test report");
  const full = await mz.read(context, leaf.ref, { evaluation: { session: "main", activation: a } });
  story.answer = `Yes: ${full.text} (${leaf.ref}, ${full.time})`;
  rt.show(`[main] agent: ${story.answer}`);
  await mz.deliver(context, a);
  return story;
}

function nodeLine(n: Node): string {
  const indent = "  ".repeat(n.depth);
  return n.kind === "frame" ? `${indent}frame ${n.id} r${n.revision} [${n.state}] ${n.body}`
    : `${indent}event ${n.ref} ${n.eventKind} [${n.state}] ${JSON.stringify(n.preview)}`;
}

/** The final Mind: every frame with its state, sources and relations. */
export async function showMind(mz: Client, context: string, out: (line: string) => void = console.log): Promise<void> {
  out("\n=== final Mind");
  for (const f of (await mz.frames(context)).frames) {
    const full = await mz.frame(context, f.id);
    out(`${f.id} r${f.revision} [${f.state}] (sources ${f.sources.join(" ")}) ${f.body}`);
    for (const r of full.relations) if (r.subject === f.id) out(`  ${r.subject} ${r.name} ${r.object}`);
  }
}

async function main(argv: string[]): Promise<number> {
  const flag = (name: string) => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const context = flag("--context") ?? `release-demo-${randomUUID().slice(0, 8)}`;
  const mz = new Client(flag("--server"));
  try {
    const story = await play(mz, context);
    await showMind(mz, context);
    console.log(`\ncontext ${story.context}: the recall walk reached ${story.report}, the raw test report`);
    return 0;
  } finally {
    mz.close();
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).then((code) => process.exit(code), (err) => {
    console.error(JSON.stringify(err?.toJSON ? err.toJSON() : { message: String(err) }));
    process.exit(1);
  });
}
