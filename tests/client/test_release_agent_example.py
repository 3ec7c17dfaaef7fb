"""The example agent loop (clients/python/examples/release_agent.py) runs the release
story to completion against the real server, and leaves the Mind the story says: the
plan revised and related to its evidence, the pause merged after a conflict, the two
cases superseded by the induced procedure, and a recall walk down to the raw report."""
from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "clients" / "python" / "examples" / \
    "release_agent.py"


@pytest.fixture(scope="module")
def release_agent():
    spec = importlib.util.spec_from_file_location("release_agent", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def test_core_13_release_agent_plays_the_release_story_and_walks_back_to_the_report(
        release_agent, mz, capsys):
    context = "py-release-agent"
    story = release_agent.play(mz, context)
    release_agent.show_mind(mz, context)
    printed = capsys.readouterr().out
    assert printed.count("=== [main] encoding") >= 7 and "--- receipt" in printed
    assert "=== final Mind" in printed

    frames = {f.id: mz.frame(context, f.id) for f in mz.frames(context).frames}
    assert {i: (f.state, f.body) for i, f in frames.items()} == {
        "release": ("active", "(goal ship-v1) (stage shipped)"),
        "test-result": ("active", "(tests passed)"),
        "release-case-a": ("retired", '(layout single-package) (test "npm test") (build "npm '
                           'run build") (artifact "dist/") (result "tests, build and artifact '
                           'check passed")'),
        "release-case-b": ("retired", '(layout workspace-web) (test "pnpm --filter web test") '
                           '(build "pnpm --filter web build") (artifact "apps/web/dist/") '
                           '(result "tests, build and artifact check passed")'),
        "release-procedure": ("active", frames["release-procedure"].body)}
    assert '(steps "测试通过后构建，核验本次产物，再打包。")' in frames["release-procedure"].body
    # The conflict was merged, not overwritten: the pause and the passed tests both hold
    # (create, digest, merged pause, resume, shipped).
    assert story.conflict and "frame:release" in story.conflict
    assert frames["release"].revision == 5
    assert mz.frame(context, "release", at_revision=3).body == \
        "(goal ship-v1) (stage paused) (resume-at packaging)"
    relations = {(r.subject, r.name, r.object) for f in frames.values() for r in f.relations}
    assert relations == {("test-result", "supports", "release"),
                         ("release-procedure", "supersedes", "release-case-a"),
                         ("release-procedure", "supersedes", "release-case-b")}
    assert list(frames["release-procedure"].sources) == ["release-case-a", "release-case-b"]
    assert list(frames["test-result"].sources) == [story.report]
    raw = mz.event(context, story.report)
    assert (raw.kind, raw.state, raw.text) == ("tool-result", "retired",
                                               "regression suite: 120 passed, 0 failed")

    # The recall walk went procedure -> case -> the original tool result.
    leaves = {n.ref: n for n in story.walk_nodes if n.kind == "event"}
    assert story.report in leaves and leaves[story.report].depth == 2
    edges = {(getattr(e, "from"), e.kind, e.to) for e in story.walk_edges}
    assert {("release-procedure", "source", "release-case-a"),
            ("release-case-a", "source", story.report)} <= edges
    assert story.answer.startswith(f"Yes: regression suite: 120 passed, 0 failed ({story.report}")
    assert mz.audit(context).match
