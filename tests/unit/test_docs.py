"""README.md is a front page and docs/ holds the reference: the README fits in 200 lines,
links every page of docs/ (a page added later too), and no link of the README or of a
docs page is broken: each names a file or folder a clone holds, and a heading that
exists where it names an anchor. (Its quick start runs in tests/integration/
test_readme.py.)"""
from __future__ import annotations

from tests import docs

FRONT_PAGE_LINES = 200


def test_the_readme_is_a_front_page():
    lines = docs.README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= FRONT_PAGE_LINES, f"README.md has {len(lines)} lines: move the " \
        "reference into a docs/ page and link it"


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(docs.README.parent / target.partition("#")[0]).resolve()
              for _, target in docs.links(docs.README)}
    pages = sorted(docs.DOCS.glob("*.md"))
    assert len(pages) >= 7
    missing = [p.name for p in pages if p.resolve() not in linked]
    assert not missing, f"docs pages the README does not link: {missing}"


def test_no_link_of_the_readme_or_the_docs_is_broken():
    files = docs.repository_files()
    found = [bad for page in docs.pages() for bad in docs.broken(page, files=files)]
    assert not found, "\n".join(found)
    assert sum(len(docs.links(p)) for p in docs.pages()) >= 40  # the walk saw the links


def test_the_link_check_finds_a_missing_file_a_missing_anchor_and_a_wrapped_link(tmp_path):
    root = tmp_path
    (root / "docs").mkdir()
    (root / "README.md").write_text(
        "# Top\n\n## Quick start: now\n\nSee [the page](docs/a.md#part-two), [gone](docs/b.md),\n"
        "[a wrapped\nlink](docs/a.md#no-such-part), [here](#quick-start-now), [web](https://x.y)"
        "\n\n```sh\necho [not a link](nowhere.md)\n```\n`[code](nowhere.md)`\n")
    (root / "docs" / "a.md").write_text("# A\n\n## Part `two`\n\n[up](../README.md#top)\n")
    files = {"README.md", "docs/a.md"}
    assert docs.broken(root / "README.md", root, files) == [
        "README.md:5: docs/b.md: no such file in the repository",
        "README.md:6: docs/a.md#no-such-part: no heading with that anchor in docs/a.md"]
    assert docs.broken(root / "docs" / "a.md", root, files) == []
    (root / "docs" / "a.md").write_text("# A\n\n[out](../../elsewhere.md)\n")
    assert docs.broken(root / "docs" / "a.md", root, files) == [
        "docs/a.md:3: ../../elsewhere.md: outside the repository"]


def test_anchors_are_githubs():
    assert docs.anchor("Storage shards: placement through etcd") == \
        "storage-shards-placement-through-etcd"
    assert docs.anchor("The `context-tx` language") == "the-context-tx-language"
    assert docs.anchor("Connect an MCP client (agent hosts)") == \
        "connect-an-mcp-client-agent-hosts"
    assert docs.anchor("Sessions, causal scopes and messages") == \
        "sessions-causal-scopes-and-messages"
