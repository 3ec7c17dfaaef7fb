"""An agent loop on Morphz, with a scripted stand-in for the model (no network): the
release story of the project's walk-through, end to end.

1. The user asks for a release; the agent plans it (`release`) and runs the tests.
2. The test report comes back as a tool result; the agent derives `test-result`,
   revises `release`, relates them and retires the digested report, in one context-tx.
3. Meanwhile a second session asks to pause the release: both revise `release` from the
   same version, one gets TX_CONFLICT naming the changed boundary, rereads and merges.
4. Later, after this release and one of a workspace web app, the two cases are induced
   into `release-procedure`, which supersedes them (they retire at once).
5. A question is answered by walking recall from `release-procedure` back to the raw
   test report.

Every model call sees a Context Encoding compiled by the server (printed), and every
commit prints its receipt. Run it against a server (scripts/demo starts one):

    python clients/python/examples/release_agent.py --server 127.0.0.1:7070
"""
from __future__ import annotations

import argparse
import concurrent.futures
import re
import sys
import threading
import uuid
from dataclasses import dataclass, field
from typing import Callable, Optional, TextIO, Union

from morphz.client import Client, ConflictError, Evaluation, Tx, quote

TxLike = Union[str, Tx]


# -- what the model sees: the encoding text ------------------------------------------------
def revision_in(encoding: str) -> int:
    """The Mind revision the kernel region reports (the base-version to write on)."""
    return int(re.search(r"\(context \S+ \(runtime \(revision (\d+)\)", encoding).group(1))


def observations(encoding: str, kind: str) -> list[str]:
    """The @eN refs of the inbox's observations of one kind, oldest first."""
    return re.findall(rf"\(observation (@e\d+) \(runtime \(kind {re.escape(kind)}\)", encoding)


def results_of_activation(encoding: str) -> list[str]:
    """Results of this activation's tool calls that came back while it was open."""
    found = re.search(r"\(results ((?:@e\d+ ?)+)\)", encoding)
    return found.group(1).split() if found else []


# -- the model's answers ------------------------------------------------------------------------
@dataclass
class Response:
    """What the model returns for one call: a transaction, tool calls, a reply."""
    tx: Optional[TxLike] = None
    tools: list[tuple[str, str]] = field(default_factory=list)  # (tool, command)
    say: str = ""


class ScriptedModel:
    """Stands in for the model: each step reads the encoding it is given (refs, the
    revision) and answers as a model following the README walk-through would."""

    def plan(self, enc: str) -> Response:
        return Response(
            tx=f"(context-tx (base-version {revision_in(enc)}) "
               "(create release (goal ship-v1) (stage waiting-tests)))",
            tools=[("npm test", "npm test")], say="Running the regression tests first.")

    def digest_report(self, enc: str, stage: str = "(stage packaging)") -> Response:
        report = results_of_activation(enc)[-1]
        return Response(tx=(Tx(revision_in(enc), "测试结果已吸收，继续准备发布")
                            .derive("test-result", "(tests passed)", sources=[report])
                            .revise("release", f"(goal ship-v1) {stage}")
                            .relate("test-result", "supports", "release")
                            .retire(report)),
                        say="Tests passed; packaging next.")

    def pause(self, enc: str, release_body: str = "(goal ship-v1) (stage waiting-tests)") \
            -> Response:
        return Response(tx=Tx(revision_in(enc)).revise("release", _paused(release_body)),
                        say="Release paused.")

    def resume(self, enc: str) -> Response:
        return Response(tx=Tx(revision_in(enc)).revise("release",
                                                       "(goal ship-v1) (stage packaging)"),
                        tools=[("npm", "npm run build && npm pack")])

    def record_case_a(self, enc: str, report: str) -> Response:
        build = results_of_activation(enc)[-1]
        body = ('(layout single-package) (test "npm test") (build "npm run build") '
                '(artifact "dist/") (result "tests, build and artifact check passed")')
        return Response(tx=(Tx(revision_in(enc), "v1 shipped; the build log is digested")
                            .derive("release-case-a", body, sources=[report, build])
                            .revise("release", "(goal ship-v1) (stage shipped)")
                            .retire(build)),
                        say="v1 is packaged: dist/.")

    def web_release(self, enc: str) -> Response:
        return Response(tools=[("pnpm", "pnpm --filter web test && pnpm --filter web build")])

    def record_case_b(self, enc: str) -> Response:
        log = results_of_activation(enc)[-1]
        body = ('(layout workspace-web) (test "pnpm --filter web test") '
                '(build "pnpm --filter web build") (artifact "apps/web/dist/") '
                '(result "tests, build and artifact check passed")')
        return Response(tx=Tx(revision_in(enc), "web build log digested")
                        .derive("release-case-b", body, sources=[log]).retire(log))

    def induce(self, enc: str) -> Response:
        body = " ".join([
            f'(steps {quote("测试通过后构建，核验本次产物，再打包。")})',
            '(single-package (test "npm test") (build "npm run build") (artifact "dist/"))',
            '(workspace (test "pnpm --filter web test") (build "pnpm --filter web build") '
            '(artifact "apps/web/dist/"))',
            f'(applicability {quote("先核对当前项目布局和脚本，再选择对应分支。")})'])
        return Response(tx=f"(context-tx (base-version {revision_in(enc)}) "
                           f'(reason "将两次发布经验归纳为可复用流程") '
                           f"(derive release-procedure (from release-case-a release-case-b) "
                           f"{body}) "
                           "(relate release-procedure supersedes release-case-a) "
                           "(relate release-procedure supersedes release-case-b) "
                           "(retire release-case-a release-case-b))")


def _paused(body: str) -> str:
    """The merge of a pause into the plan: paused, remembering the stage to resume at."""
    stage = re.search(r"\(stage ([^)]+)\)", body).group(1)
    resume = stage if stage != "paused" else \
        re.search(r"\(resume-at ([^)]+)\)", body).group(1)
    return f"(goal ship-v1) (stage paused) (resume-at {resume})"


# -- the runtime ------------------------------------------------------------------------------
@dataclass
class Story:
    context: str
    request: str = ""
    report: str = ""
    reached: str = ""  # the tool result the recall walk ended at
    conflict: list[str] = field(default_factory=list)  # the boundaries the loser was told
    walk_nodes: list = field(default_factory=list)
    walk_edges: list = field(default_factory=list)
    answer: str = ""


class Runtime:
    """Runs model calls against Morphz: compile, ask the model, run its tools, commit."""

    def __init__(self, mz: Client, context: str, out: TextIO) -> None:
        self.mz, self.context, self.out = mz, context, out
        self._lock = threading.Lock()  # the two sessions print in turn

    def show(self, title: str, text: str = "") -> None:
        with self._lock:
            print(f"\n=== {title}", file=self.out)
            if text:
                print(text, file=self.out)

    def say(self, session: str, text: str) -> str:
        ev = self.mz.append_event(self.context, session=session, kind="user-message", text=text)
        self.show(f"[{session}] user: {text}  ({ev.ref})")
        return ev.ref

    def compile(self, session: str, activation: str = "") -> tuple[str, str]:
        enc = self.mz.compile(self.context, session=session, activation=activation,
                              model="scripted-stand-in", bindings={"cwd": "/srv/app"})
        self.show(f"[{session}] encoding {enc.snapshot} ({enc.bytes} bytes, activation "
                  f"{enc.activation}, revision {enc.revision}, tick {enc.tick})", enc.text)
        return enc.text, enc.activation

    def commit(self, session: str, activation: str, tx: TxLike):
        text = tx.text() if isinstance(tx, Tx) else tx
        receipt = self.mz.commit(self.context, tx, session=session, activation=activation)
        lines = [f"revision {receipt.revision}" + (" (rebased)" if receipt.rebased else "")]
        lines += [f"#{r.index} {r.op} {r.target} -> {r.outcome}"
                  + (f" (frame revision {r.frame_revision})" if r.frame_revision else "")
                  for r in receipt.results]
        self.show(f"[{session}] context-tx -> receipt {receipt.event_ref}",
                  text + "\n--- receipt\n" + "\n".join(lines))
        return receipt

    def run_tools(self, session: str, activation: str, response: Response,
                  tool: Callable[[str], str]) -> list[str]:
        refs = []
        for actor, command in response.tools:
            call = self.mz.record_action(self.context, session=session, activation=activation,
                                         actor=actor, text=command)
            result = self.mz.tool_result(self.context, call=call.ref, actor=actor,
                                         text=tool(command))
            self.show(f"[{session}] tool {actor}: {command} ({call.ref}) -> {result.ref} "
                      f"(returned to {result.returned_to})")
            refs.append(result.ref)
        return refs

    def step(self, session: str, activation: str, response: Response,
             tool: Callable[[str], str] = lambda _: ""):
        receipt = self.commit(session, activation, response.tx) if response.tx else None
        refs = self.run_tools(session, activation, response, tool)
        if response.say:
            self.show(f"[{session}] agent: {response.say}")
        return receipt, refs


TOOL_OUTPUT = {
    "npm test": "regression suite: 120 passed, 0 failed",
    "npm run build && npm pack": "built dist/ (14 files); packed ship-v1.tgz; artifact verified",
    "pnpm --filter web test && pnpm --filter web build":
        "web: 48 passed, 0 failed; built apps/web/dist/; artifact verified",
}


def play(mz: Client, context: str, out: Optional[TextIO] = None) -> Story:
    """The whole story on a new context (printed to `out`, default stdout); returns what
    the checks need."""
    model, rt, story = ScriptedModel(), Runtime(mz, context, out or sys.stdout), Story(context)
    mz.create_context(context)

    # 1. The request; the plan; the tests run (their result returns into the activation).
    story.request = rt.say("main", "Ship v1 once the regression tests pass.")
    enc, a_main = rt.compile("main")
    _, (story.report,) = rt.step("main", a_main, model.plan(enc), TOOL_OUTPUT.get)

    # 2 and 3. The report is digested while the chat session asks to pause: both write on
    # the revision they read; whichever commits second is told what changed and merges.
    rt.say("chat", "先暂停发布 (hold the release for now).")
    enc_main, _ = rt.compile("main", a_main)
    enc_chat, a_chat = rt.compile("chat")
    answers = {"main": model.digest_report(enc_main), "chat": model.pause(enc_chat)}
    activations = {"main": a_main, "chat": a_chat}
    start = threading.Barrier(2)

    def attempt(session: str):
        start.wait()
        try:
            return rt.step(session, activations[session], answers[session])
        except ConflictError as e:
            return e
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        outcomes = dict(zip(answers, pool.map(attempt, answers)))
    (loser, err), = [(s, o) for s, o in outcomes.items() if isinstance(o, ConflictError)]
    story.conflict = err.boundaries
    rt.show(f"[{loser}] TX_CONFLICT: {', '.join(err.boundaries)} changed since "
            f"base-version {err.base} (latest {err.latest}): reread and merge")
    release = mz.frame(context, "release")  # the reread
    rt.show(f"[{loser}] reread release r{release.revision}: {release.body}")
    enc, _ = rt.compile(loser, activations[loser])
    merged = model.pause(enc, release.body) if loser == "chat" else \
        model.digest_report(enc, stage="(stage paused) (resume-at packaging)")
    rt.step(loser, activations[loser], merged)
    for session in ("main", "chat"):
        mz.deliver(context, activations[session])

    # 4. Later: the pause is lifted and v1 ships (case a); a web app ships (case b); the
    # two cases are induced into a procedure that supersedes them.
    rt.say("main", "Pause lifted: package and ship v1.")
    enc, a = rt.compile("main")
    rt.step("main", a, model.resume(enc), TOOL_OUTPUT.get)
    enc, _ = rt.compile("main", a)
    rt.step("main", a, model.record_case_a(enc, story.report))
    mz.deliver(context, a)
    rt.say("main", "Now release the web app of the workspace the same way.")
    enc, a = rt.compile("main")
    rt.step("main", a, model.web_release(enc), TOOL_OUTPUT.get)
    enc, _ = rt.compile("main", a)
    rt.step("main", a, model.record_case_b(enc))
    enc, _ = rt.compile("main", a)
    rt.step("main", a, model.induce(enc))
    mz.deliver(context, a)

    # 5. A question answered from the procedure back to the raw evidence.
    rt.say("main", "Did the v1 regression tests really pass? Show me the report.")
    enc, a = rt.compile("main")
    evaluation = Evaluation(session="main", activation=a)
    for page in mz.walk(context, "release-procedure", depth=2, direction="ancestors",
                        include_bodies=True):
        story.walk_nodes += page.nodes
        story.walk_edges += page.edges
    rt.show("[main] recall walk from release-procedure (ancestors, depth 2)",
            "\n".join(_node_line(n) for n in story.walk_nodes) + "\n"
            + "\n".join(f"  {getattr(e, 'from')} -{e.name or e.kind}-> {e.to}"
                        for e in story.walk_edges))
    leaf = next(n for n in story.walk_nodes
                if n.kind == "event" and n.event_kind == "tool-result"
                and n.preview.startswith("regression suite"))
    story.reached = leaf.ref  # what the walk found, checked against the report recorded
    assert story.reached == story.report, (story.reached, story.report)
    full = mz.read(context, leaf.ref, evaluation=evaluation)
    story.answer = f"Yes: {full.text} ({leaf.ref}, {full.time})"
    rt.show("[main] agent: " + story.answer)
    mz.deliver(context, a)
    return story


def _node_line(n) -> str:
    indent = "  " * n.depth
    if n.kind == "frame":
        return f"{indent}frame {n.id} r{n.revision} [{n.state}] {n.body}"
    return f"{indent}event {n.ref} {n.event_kind} [{n.state}] {n.preview!r}"


def show_mind(mz: Client, context: str, out: Optional[TextIO] = None) -> None:
    """The final Mind: every frame with its state, sources and relations."""
    out = out or sys.stdout
    print("\n=== final Mind", file=out)
    for f in mz.frames(context).frames:
        full = mz.frame(context, f.id)
        print(f"{f.id} r{f.revision} [{f.state}] (sources {' '.join(f.sources)}) {f.body}",
              file=out)
        for r in full.relations:
            if r.subject == f.id:
                print(f"  {r.subject} {r.name} {r.object}", file=out)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", help="HOST:PORT (default $MORPHZ_SERVER or 127.0.0.1:7070)")
    parser.add_argument("--context", default=f"release-demo-{uuid.uuid4().hex[:8]}")
    args = parser.parse_args(argv)
    with Client(args.server) as mz:
        story = play(mz, args.context)
        show_mind(mz, args.context)
    print(f"\ncontext {story.context}: the recall walk reached {story.reached}, the raw "
          "test report")
    return 0


if __name__ == "__main__":
    sys.exit(main())
