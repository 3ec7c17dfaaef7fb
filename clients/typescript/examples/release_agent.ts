// An agent loop over Morphz with a scripted stand-in for the model (no network): seed
// 002's release story. The user asks for a release; the test report arrives as a tool
// result; the agent derives `test-result`, revises `release`, relates them and retires
// the report; a second session asks at the same time to pause the release, and the
// transaction that loses the race rereads and merges; later two release cases are
// induced into `release-procedure` (supersedes); a question is answered by walking
// recall back to the raw test report. Every encoding and receipt is printed.
//
//   node dist/examples/release_agent.js [HOST:PORT]   (default $MORPHZ_SERVER, 127.0.0.1:7070)
import { Client, ConflictError, Tx, formatReceipt } from "../src";
import type { Encoding, TraverseResponse } from "../src";

export type Log = (line: string) => void;

export const REPORT = "regression suite: 120 passed, 0 failed (npm test, v1)";
export const PACKAGED = "npm run build: dist/ written; artifact check passed";
export const WEB_REPORT = "pnpm --filter web test: 48 passed; pnpm --filter web build: apps/web/dist/ written";

export interface StoryResult {
  context: string;
  reportRef: string;
  conflict: ConflictError;
  walk: TraverseResponse[];
  answer: string;
}

// What the scripted model reads off an encoding: the version it saw, and the refs of
// the observations it was shown (as a model reads them in the text).
function revisionOf(enc: Encoding): number {
  const m = /\(context \S+ \(runtime \(revision (\d+)\)/.exec(enc.text);
  if (!m) throw new Error("no kernel revision in the encoding");
  return Number(m[1]);
}

function observed(enc: Encoding, kind: string): string[] {
  const re = new RegExp(`\\(observation (@e\\d+) \\(runtime \\(kind ${kind}\\)`, "g");
  return [...enc.text.matchAll(re)].map((m) => m[1]);
}

export async function runReleaseStory(mz: Client, context: string, log: Log = console.log): Promise<StoryResult> {
  const show = (title: string, text: string) => log(`\n== ${title}\n${text}`);
  const encode = async (session: string, activation?: string) => {
    const enc = await mz.compile(context, { session, activation });
    show(`encoding for ${session} (activation ${enc.activation}, snapshot ${enc.snapshot})`, enc.text);
    return enc;
  };
  const commit = async (session: string, enc: Encoding, tx: string | Tx) => {
    show(`${session} commits`, typeof tx === "string" ? tx : tx.text());
    const receipt = await mz.commit(context, tx, { session, activation: enc.activation });
    show("receipt", formatReceipt(receipt));
    return receipt;
  };

  await mz.createContext(context);

  // 1. The user asks for a release; the model records its plan.
  await mz.appendEvent(context, { session: "main", kind: "user-message", text: "Ship v1 once the regression tests pass." });
  let enc = await encode("main");
  await commit("main", enc, `(context-tx (base-version ${revisionOf(enc)}) (create release (goal ship-v1) (stage waiting-tests)))`);

  // 2. The test report arrives as a tool result; meanwhile the user tells a second
  //    session to pause the release. Both models read the same version of the Mind.
  const report = await mz.toolResult(context, { session: "main", actor: "npm test", text: REPORT });
  await mz.appendEvent(context, { session: "ops", kind: "user-message", text: "Pause the release for now." });
  const mainEnc = await encode("main");
  const opsEnc = await encode("ops");
  const [reportRef] = observed(mainEnc, "tool-result");
  const digest = (base: number, stage: string) => new Tx(base, "测试结果已吸收，继续准备发布")
    .derive("test-result", "(tests passed)", { sources: [reportRef] })
    .revise("release", `(goal ship-v1) ${stage}`)
    .relate("test-result", "supports", "release")
    .retire(reportRef);
  const pause = (base: number, stage: string) => new Tx(base, "the user asked to pause the release")
    .revise("release", `(goal ship-v1) ${stage}`);
  // Sent at once: whichever commits second was based on a release that changed under it.
  const outcomes = await Promise.allSettled([
    commit("main", mainEnc, digest(revisionOf(mainEnc), "(stage packaging)")),
    commit("ops", opsEnc, pause(revisionOf(opsEnc), "(stage paused)")),
  ]);
  const lost = outcomes.findIndex((o) => o.status === "rejected");
  const failure = lost >= 0 ? (outcomes[lost] as PromiseRejectedResult).reason : undefined;
  if (!(failure instanceof ConflictError) || outcomes[1 - lost].status !== "fulfilled") {
    throw failure ?? new Error("two revisions of one release based on one version both committed");
  }
  show(`${lost === 0 ? "main" : "ops"} was rejected`, JSON.stringify(failure.toJSON(), null, 2));
  // The loser rereads the release and writes a body holding both wishes.
  const current = await mz.frame(context, "release");
  log(`\n== reread: release r${current.revision} ${current.body}`);
  const merged = "(stage paused) (tests passed) (resume-at packaging)";
  const base = (await mz.status(context)).revision;
  await commit(lost === 0 ? "main" : "ops", lost === 0 ? mainEnc : opsEnc,
    lost === 0 ? digest(base, merged) : pause(base, merged));

  // 3. The user resumes; v1 is packaged and kept as a case.
  await mz.appendEvent(context, { session: "main", kind: "user-message", text: "Resume: package and ship v1." });
  enc = await encode("main");
  const packaged = await mz.toolResult(context, { session: "main", actor: "npm run build", text: PACKAGED });
  enc = await encode("main");
  await commit("main", enc, new Tx(revisionOf(enc), "v1 shipped")
    .revise("release", "(goal ship-v1) (stage shipped)")
    .derive("release-case-a", '(layout single-package) (test "npm test") (build "npm run build") (artifact "dist/") ' +
      '(result "tests, build and artifact check passed")', { sources: ["test-result", packaged.ref] })
    .retire(packaged.ref));

  // 4. A second release, of a workspace's web package, becomes the second case; in the
  //    same evaluation the model induces a procedure from both.
  await mz.appendEvent(context, { session: "main", kind: "user-message", text: "Ship the workspace's web package too." });
  enc = await encode("main");
  const web = await mz.toolResult(context, { session: "main", actor: "pnpm", text: WEB_REPORT });
  enc = await encode("main");
  await commit("main", enc, new Tx(revisionOf(enc), "web package shipped")
    .derive("release-case-b", '(layout "workspace web package") (test "pnpm --filter web test") ' +
      '(build "pnpm --filter web build") (artifact "apps/web/dist/") (result "tests, build and artifact check passed")',
    { sources: [web.ref] })
    .retire(web.ref));
  enc = await encode("main", enc.activation);  // the model continues: same evaluation
  await commit("main", enc, new Tx(revisionOf(enc), "将两次发布经验归纳为可复用流程")
    .derive("release-procedure",
      '(steps "测试通过后构建，核验本次产物，再打包。") ' +
      '(single-package (test "npm test") (build "npm run build") (artifact "dist/")) ' +
      '(workspace (test "pnpm --filter web test") (build "pnpm --filter web build") (artifact "apps/web/dist/")) ' +
      '(applicability "先核对当前项目布局和脚本，再选择对应分支。")',
    { sources: ["release-case-a", "release-case-b"] })
    .relate("release-procedure", "supersedes", "release-case-a")
    .relate("release-procedure", "supersedes", "release-case-b")
    .retire("release-case-a", "release-case-b"));

  // 5. A question: the model walks recall from the procedure back to the raw evidence.
  await mz.appendEvent(context, { session: "main", kind: "user-message", text: "Did v1's regression tests really pass? Show me the report." });
  enc = await encode("main");
  const evaluation = { session: "main", activation: enc.activation };
  const walk: TraverseResponse[] = [];
  let cursor = "";
  do {
    const page = await mz.traverse(context, "release-procedure", {
      depth: 3, direction: "ancestors", includeBodies: true, includeEvents: false, maxNodes: 32, cursor, evaluation });
    walk.push(page);
    cursor = page.nextCursor;
  } while (cursor);
  const nodes = walk.flatMap((p) => p.nodes);
  show("recall walk from release-procedure", nodes.map((n) =>
    `${"  ".repeat(n.depth)}${n.kind} ${n.ref || n.id} (${n.state})${n.kind === "event" ? ` ${n.eventKind}: ${n.preview}` : ` ${n.body}`}`).join("\n"));
  const leaf = nodes.find((n) => n.kind === "event" && n.eventKind === "tool-result" && n.ref === reportRef);
  if (!leaf) throw new Error(`the walk did not reach the test report ${reportRef}`);
  const full = await mz.read(context, leaf.ref, { evaluation });
  const answer = `Yes: ${leaf.ref} (${full.eventKind}, ${full.state}) says "${full.text}".`;
  show("answer", answer);
  await mz.deliver(context, enc.activation);
  return { context, reportRef: report.ref, conflict: failure, walk, answer };
}

if (require.main === module) {
  const mz = new Client(process.argv[2]);
  runReleaseStory(mz, `release-demo-${Date.now()}`)
    .then(() => mz.close())
    .catch((err) => {
      mz.close();
      console.error(JSON.stringify(err.toJSON ? err.toJSON() : { message: String(err) }));
      process.exit(1);
    });
}
