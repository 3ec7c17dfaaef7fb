"""A search as asked, checked once (SearchRequest.parse): bounded, its words analyzed, its
time range parsed, its filters among the known values, the evaluation it is made for
named in full. Every check raises the reason the error table names for it, in the order
a caller fixes them. The servicer makes one from its message (convert.py); in-process
callers call parse themselves; RecallCore.search takes nothing else."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Optional

from morphz.services.recall.core.hybrid import DEFAULT_MODE, MODES
from morphz.services.recall.core.timeparse import parse_bound
from morphz.services.recall.index.tantivy_search import Query
from morphz.shared.errors import MorphzError
from morphz.shared.mind import records as R
from morphz.shared.names import check_name
from morphz.shared.text.analyze import query_terms

DEFAULT_LIMIT, MAX_LIMIT = 20, 100
MAX_QUERY_CHARS, MAX_QUERY_TERMS = 4096, 256
MAX_FILTER_VALUES = 32
KINDS = ("event", "frame")
STATES = (R.ACTIVE, R.RETIRING, R.RETIRED)


def check_limit(value: int, default: int, cap: int, what: str) -> int:
    """0: the default; else 1..cap."""
    if value == 0:
        return default
    if not 0 < value <= cap:
        raise MorphzError("RECALL_LIMIT_INVALID", f"{what} must be 1..{cap}, got {value}",
                          field=what, maximum=cap)
    return value


def check_choices(values: Iterable[str], allowed: tuple[str, ...], what: str) -> tuple[str, ...]:
    """The values sorted, each among `allowed`."""
    values = sorted(set(values))
    bad = [v for v in values if v not in allowed]
    if bad or len(values) > MAX_FILTER_VALUES:
        raise MorphzError("RECALL_FILTER_INVALID", f"{what} must be among {', '.join(allowed)}",
                          field=what, value=(bad[0][:64] if bad else None))
    return tuple(values)


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The evaluation a recall is made for: a session's activation not yet delivered
    (both empty: none, an operator's recall). Checked against the store by RecallCore."""
    session: str = ""
    activation: str = ""

    def __bool__(self) -> bool:
        return bool(self.session or self.activation)


def check_evaluation(evaluation: Optional[Evaluation]) -> Optional[Evaluation]:
    """The evaluation, both its names well formed (None: none named). Whether the
    activation is one of the session's and not yet delivered is the store's to say
    (core/access.py)."""
    if not evaluation:
        return None
    if not evaluation.session or not evaluation.activation:
        raise MorphzError("RECALL_ACTIVATION_INVALID",
                          "a recall for an evaluation names both session and activation")
    check_name(evaluation.session, "session")
    check_name(evaluation.activation, "activation")
    return evaluation


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """`mode`: the mode searched (the default filled in); `asked_mode`: the one the caller
    named ('' for none: a default search may fall back to the lexical leg). `terms`: the
    query's analyzed words; `since_us`/`until_us`: the time range, None where open;
    `evaluation`: the one the search is made for (None: an operator's search);
    `min_commit_seq`: the context version to read (read your writes, RecallCore.search)."""
    context: str
    query: str
    terms: tuple[str, ...]
    since: str
    until: str
    since_us: Optional[int]
    until_us: Optional[int]
    limit: int
    kinds: tuple[str, ...]
    states: tuple[str, ...]
    sessions: tuple[str, ...]
    cursor: str
    mode: str
    asked_mode: str
    min_commit_seq: int
    evaluation: Optional[Evaluation] = None

    @classmethod
    def parse(cls, context: str, query: str = "", *, since: str = "", until: str = "",
              limit: int = 0, kinds: Iterable[str] = (), states: Iterable[str] = (),
              sessions: Iterable[str] = (), cursor: str = "", mode: str = "",
              evaluation: Optional[Evaluation] = None, min_commit_seq: int = 0,
              vectors_off: bool = False) -> "SearchRequest":
        """`vectors_off`: the server has no vector leg (`--embedder none`): a vector
        search is refused, a hybrid one (named or by default) is lexical (served_by:
        checked here in its turn among the others, and by the core whoever parsed)."""
        check_name(context, "context")
        asked = mode
        mode = mode or DEFAULT_MODE
        if mode not in MODES:
            raise MorphzError("RECALL_MODE_INVALID", f"mode must be one of {', '.join(MODES)}",
                              field="mode")
        mode = _served_mode(mode, vectors_off)
        if len(query) > MAX_QUERY_CHARS:
            raise MorphzError("RECALL_QUERY_INVALID", f"query longer than {MAX_QUERY_CHARS} "
                              "characters", field="query")
        words = query_terms(query)
        if query.strip() and not words:
            raise MorphzError("RECALL_QUERY_INVALID", "the query has no searchable words",
                              field="query")
        if len(words) > MAX_QUERY_TERMS:
            raise MorphzError("RECALL_QUERY_INVALID", f"the query has {len(words)} terms; at "
                              f"most {MAX_QUERY_TERMS}", field="query")
        since_us, until_us = parse_bound(since, "since"), parse_bound(until, "until")
        if not words and since_us is None and until_us is None:
            raise MorphzError("RECALL_QUERY_INVALID", "give words to search for, a time range "
                              "(--since/--until), or both", field="query")
        if since_us is not None and until_us is not None and since_us >= until_us:
            raise MorphzError("RECALL_TIME_INVALID", "since must be before until",
                              field="since")
        limit = check_limit(limit, DEFAULT_LIMIT, MAX_LIMIT, "limit")
        kinds = check_choices(kinds, KINDS, "kinds")
        states = check_choices(states, STATES, "states")
        sessions = tuple(sorted({check_name(s, "session") for s in sessions}))
        if len(sessions) > MAX_FILTER_VALUES:
            raise MorphzError("RECALL_FILTER_INVALID", "too many sessions", field="sessions")
        return cls(context=context, query=query, terms=tuple(words), since=since, until=until,
                   since_us=since_us, until_us=until_us, limit=limit, kinds=kinds,
                   states=states, sessions=sessions, cursor=cursor, mode=mode,
                   asked_mode=asked, min_commit_seq=min_commit_seq,
                   evaluation=check_evaluation(evaluation))

    def served_by(self, vectors_off: bool) -> "SearchRequest":
        """The request as a server with its vector leg off (or on) answers it: itself,
        or lexical (a vector search refused, RECALL_VECTORS_OFF)."""
        mode = _served_mode(self.mode, vectors_off)
        return self if mode == self.mode else replace(self, mode=mode)

    @property
    def reads_vectors(self) -> bool:
        """Whether the search may read the vector leg: a mode other than lexical, and
        words to embed."""
        return self.mode != "lexical" and bool(self.terms)

    def lexical_query(self) -> Query:
        """The lexical leg's query: the words and the filters the index applies."""
        return Query(terms=list(self.terms), kinds=list(self.kinds),
                     sessions=list(self.sessions), since_us=self.since_us,
                     until_us=self.until_us)

    def cursor_params(self, viewer_session: Optional[str]) -> dict:
        """What a page's cursor binds: a next page must ask the same search (of the
        same causal scope's evidence, for an evaluation)."""
        params = {"op": "search", "context": self.context, "terms": list(self.terms),
                  "since": self.since_us, "until": self.until_us, "limit": self.limit,
                  "kinds": list(self.kinds), "states": list(self.states),
                  "sessions": list(self.sessions)}
        if viewer_session is not None:
            params["viewer"] = viewer_session
        if self.reads_vectors:  # (lexical cursors stay as they were)
            params["mode"] = self.mode
        return params


def _served_mode(mode: str, vectors_off: bool) -> str:
    """The mode a server with its vector leg off answers in (`--embedder none`)."""
    if not vectors_off or mode == "lexical":
        return mode
    if mode == "vector":
        raise MorphzError("RECALL_VECTORS_OFF", "this server runs with its vector leg "
                          "off (--embedder none): search in lexical or hybrid mode "
                          "(hybrid answers from the lexical leg)", field="mode")
    return "lexical"  # hybrid, named or by default: as while the leg is unbuilt
