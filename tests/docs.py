"""The repository's documentation as the tests read it: README.md (the front page) and the
pages under docs/, their sections and code blocks, their links and the anchors GitHub
makes of their headings. Tests that run what a page prints, or check what it promises,
read it through these, so a section moved between pages moves one argument."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

_FENCE = re.compile(r"^(```|~~~)")
_HEADING = re.compile(r"^(#{1,6}) +(.+?) *#*$")
# [text](target) and ![alt](target); the target ends at whitespace or the closing paren
_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def pages() -> list[Path]:
    """README.md and every page of docs/."""
    return [README, *sorted(DOCS.glob("*.md"))]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the lines outside fenced code blocks."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            out.append((number, line))
    return out


def section(path: Path, title: str) -> str:
    """The section whose heading starts with `title` (any level), to the next heading of
    its level or above."""
    lines = path.read_text(encoding="utf-8").splitlines()
    prose = dict(prose_lines("\n".join(lines)))
    for number, line in prose.items():
        m = _HEADING.match(line)
        if m and m.group(2).startswith(title):
            level = len(m.group(1))
            end = next((n for n in sorted(prose) if n > number and (h := _HEADING.match(prose[n]))
                        and len(h.group(1)) <= level), len(lines) + 1)
            return "\n".join(lines[number - 1:end - 1]) + "\n"
    raise AssertionError(f"{path.relative_to(ROOT)} has no section {title!r}")


def block(text: str, lang: str, index: int = 0) -> str:
    """The index-th fenced code block of language `lang` in text."""
    found = re.findall(rf"^```{lang}\n(.*?)^```", text, re.S | re.M)
    assert len(found) > index, f"no ```{lang} block #{index}"
    return found[index]


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped (letters
    of any script, digits, `_` and `-` stay), spaces as `-`."""
    text = re.sub(r"`|\*\*|\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor of a page's headings (a repeated one gets -1, -2... as on GitHub)."""
    counts: dict[str, int] = {}
    out = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        m = _HEADING.match(line)
        if m:
            base = anchor(m.group(2))
            n = counts.get(base, 0)
            out.add(f"{base}-{n}" if n else base)
            counts[base] = n + 1
    return out


def links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of every link and image in a page's prose, a link's text
    running over lines included (code blocks and inline code spans left out)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    prose = dict(prose_lines("\n".join(lines)))
    text = "\n".join(re.sub(r"`[^`]*`", "", prose.get(n, "")) for n in range(1, len(lines) + 1))
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in _LINK.finditer(text)]


def repository_files(root: Path = ROOT) -> set[str]:
    """The files a clone holds (and new ones not ignored): generated and ignored files are
    not there for a reader."""
    out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others",
                          "--exclude-standard"], capture_output=True, check=True).stdout
    return {name for name in out.decode().split("\0") if name}


def broken(page: Path, root: Path = ROOT, files: set[str] | None = None) -> list[str]:
    """Links of `page` that do not resolve: a relative target must be a file (or a folder
    holding files) of the repository, and a `#anchor` a heading of the page it names.
    Links to the web are not followed (nothing here reaches it)."""
    files = repository_files(root) if files is None else files
    folders = {str(Path(f).parent) for f in files}
    folders |= {str(p) for f in folders for p in Path(f).parents}
    out = []
    for number, target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page.resolve()
        where = f"{page.relative_to(root)}:{number}: {target}"
        try:
            name = resolved.relative_to(root.resolve()).as_posix()
        except ValueError:
            out.append(f"{where}: outside the repository")
            continue
        if name not in files and name not in folders:
            out.append(f"{where}: no such file in the repository")
        elif fragment and name.endswith(".md") and fragment not in anchors(resolved):
            out.append(f"{where}: no heading with that anchor in {name}")
    return out
