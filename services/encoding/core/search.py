"""Search and read inside a snapshot's frozen scope (ASM-01, ASM-05).

Search looks only at the material the snapshot froze (its observations and frames,
bodies as of the snapshot), so it can never surface anything outside the scope; a
blank query is rejected before anything is read."""
from __future__ import annotations

from morphz.services.encoding.core.options import bad
from morphz.services.encoding.core.results import SearchHit, SearchResult
from morphz.shared.text.analyze import normalize  # the same folding as recall's index

MAX_QUERY_CHARS = 1024
DEFAULT_LIMIT, MAX_LIMIT = 20, 128
SNIPPET_CHARS = 120


def check_query(query: str, limit: int) -> tuple[list[str], int]:
    if not isinstance(query, str) or not query.strip():
        raise bad("the query is blank", field="query")
    if len(query) > MAX_QUERY_CHARS:
        raise bad(f"the query exceeds {MAX_QUERY_CHARS} characters", field="query")
    if not 0 <= limit <= MAX_LIMIT:
        raise bad(f"limit must be 0..{MAX_LIMIT}", field="limit")
    return normalize(query).split(), limit or DEFAULT_LIMIT


def search(terms: list[str], limit: int,
           material: list[tuple[str, str, str]]) -> SearchResult:
    """material: (key, kind, text). All terms must occur (NFKC + case folded)."""
    if not material:
        return SearchResult([], "empty_index", 0,
                            "the snapshot's scope holds nothing to search")
    hits = []
    for key, kind, text in material:
        norm = normalize(text)
        if all(t in norm for t in terms):
            at = max(0, norm.find(terms[0]) - SNIPPET_CHARS // 4)
            hits.append(SearchHit(key, kind, norm[at:at + SNIPPET_CHARS]))
            if len(hits) >= limit:
                break
    if not hits:
        return SearchResult([], "no_match", len(material),
                            f"none of the {len(material)} items in scope matches every term")
    return SearchResult(hits, "", len(material), "")
