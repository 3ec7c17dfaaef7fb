"""UI-02's compositions without a server: the Mind at an earlier revision (frames created
later left out unread, relations of later commits undone), a frame's neighbourhood, and
a body diff by top-level items. The browser tests (tests/integration/test_ui_inspector.py)
run the same code against a real server; here each rule is pinned on its own."""
from __future__ import annotations

from morphz.services.ui import mind as M
from morphz.services.ui.history import Commit
from morphz.services.ui.views import body_diff, body_items


def frame(fid: str, changed_at: int, revision: int = 1, sources=()) -> M.FrameView:
    return M.FrameView(fid, revision, "active", False, tuple(sources), f"(id {fid})",
                       changed_at, 0, False)


class History:
    """Commits by revision, as history.Commits answers them."""

    def __init__(self, *texts: str) -> None:
        self._commits = [Commit(i + 1, f"@e{i + 1}", i + 1, "", "", "", t)
                         for i, t in enumerate(texts)]

    def at(self, revision: int):
        return self._commits[revision - 1] if 0 < revision <= len(self._commits) else None


class NoReads:
    """A client no as-of read may reach: every frame here is current or born later."""

    def frame(self, *args, **kwargs):
        raise AssertionError(f"unexpected read {args}")


def test_ui_02_mind_at_an_earlier_revision_leaves_out_later_frames_and_undoes_later_edges():
    history = History("(context-tx (base-version 0) (create a (x 1)) (create b (x 2)))",
                      "(context-tx (base-version 1) (create c (x 3)) (relate c needs a) "
                      "(unrelate a likes b))")
    now = (2, [frame("a", 1), frame("b", 1), frame("c", 2)],
           frozenset({("c", "needs", "a")}))
    at1 = M.at_revision(NoReads(), "ctx", now, history, 1, False)
    assert list(at1.frames) == ["a", "b"]
    assert at1.relations == {("a", "likes", "b")}  # unrelated at 2: it held at 1
    assert at1.exact_relations
    current = M.at_revision(NoReads(), "ctx", now, history, 0, False)
    assert list(current.frames) == ["a", "b", "c"] and current.relations == now[2]


def test_ui_02_a_commit_that_does_not_parse_marks_relations_approximate():
    history = History("(context-tx (base-version 0) (create a (x 1)))", "not a transaction")
    now = (2, [frame("a", 1)], frozenset())
    assert not M.at_revision(NoReads(), "ctx", now, history, 1, False).exact_relations


def test_ui_02_neighbourhood_follows_relations_and_sources_both_ways_within_depth_and_cap():
    frames = {f"f{i}": frame(f"f{i}", 1) for i in range(6)}
    frames["f5"] = frame("f5", 1, sources=("f0", "@e3"))
    mind = M.MindAt(1, 1, frames, frozenset({("f1", "follows", "f0"), ("f2", "follows", "f1"),
                                              ("f3", "follows", "f2")}), True)
    assert M.neighbourhood(mind, "f0", 1, 10) == ["f0", "f1", "f5"]
    assert M.neighbourhood(mind, "f0", 2, 10) == ["f0", "f1", "f5", "f2"]
    assert M.neighbourhood(mind, "f0", 4, 3) == ["f0", "f1", "f5"]
    g = M.graph(mind, ["f0", "f5"], {"@e3": {"ref": "@e3", "preview": "raw"}})
    assert [(e["kind"], e["from"], e["to"]) for e in g["edges"]] == [
        ("source", "f5", "f0"), ("source", "f5", "@e3")]
    assert [n.get("id") or n.get("ref") for n in g["nodes"]] == ["f0", "f5", "@e3"]


def test_ui_02_body_diff_compares_top_level_items():
    assert body_items('(goal ship-v1) (note "a ) in text") (stage (x y))') == [
        "(goal ship-v1)", '(note "a ) in text")', "(stage (x y))"]
    assert body_diff("(goal ship-v1) (stage waiting-tests)",
                     "(goal ship-v1) (stage packaging)") == [
        {"op": "same", "text": "(goal ship-v1)"},
        {"op": "removed", "text": "(stage waiting-tests)"},
        {"op": "added", "text": "(stage packaging)"}]
