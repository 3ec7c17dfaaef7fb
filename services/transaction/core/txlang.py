"""The context-tx language: from S-expression text (or the protobuf form, via the
servicer) to a validated `Tx` of typed operations. Shape checks only; the rules of
the Mind are in ops.py.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Optional, Union

from morphz.shared import sexpr
from morphz.shared.errors import MorphzError
from morphz.shared.limits import FRAME_ID_CHARS, TX_BYTES, TX_DEPTH, TX_NODES, TX_OPS, echo
from morphz.shared.mind.records import is_ref
from morphz.shared.mind import secrets

FRAME_OPS = ("create", "derive", "revise")
TARGET_OPS = ("retire", "restore", "protect", "unprotect")
EDGE_OPS = ("relate", "unrelate")
NAMED_OPS = ("checkpoint", "rollback", "drop-checkpoint")
SESSION_OPS = ("retire-session", "restore-session")
ALL_OPS = FRAME_OPS + TARGET_OPS + EDGE_OPS + ("place",) + NAMED_OPS + SESSION_OPS
# Operations that need the exact latest version: never rebased. A checkpoint
# snapshots the whole Mind, so it too must be taken at the version the agent read.
EXACT_VERSION_OPS = ("checkpoint", "rollback") + SESSION_OPS
# Operations that require the transaction's `reason` (CORE-03).
REASON_OPS = ("retire", "unprotect", "retire-session")

MAX_ID_CHARS = FRAME_ID_CHARS.max
# A transaction's limits, the same for the text and the structured form (convert.py):
# its size, nesting and nodes as the text form's reader counts them, and its operations.
TX_LIMITS = sexpr.Limits(max_bytes=TX_BYTES.max, max_depth=TX_DEPTH.max,
                         max_nodes=TX_NODES.max)
MAX_OPS = TX_OPS.max
_ID_BAD_CHAR = re.compile(r'[\s()";\x00]')  # \s is str.isspace()
_INTEGER = re.compile(r"-?\d+\Z")
# A body's first item `(from ...)` is the from clause to the text form (see _parse_op).
_FROM_CLAUSE = re.compile(r"\(from[ )]")
# Body items stand inside (context-tx (OP ID ...)): two lists deep in the text form.
BODY_DEPTH = 2


@dataclass
class FrameOp:
    op: str
    frame_id: str
    body: str  # canonical text of the body items
    sources: Optional[list[str]] = None  # None: not given (revise keeps the old ones)
    # In a stored transaction only: the erasure (@eN) that took this op's body (derived
    # only from erased events; docs/privacy.md); the body is then "". Stored when set.
    erased: str = ""


@dataclass
class TargetsOp:
    op: str
    targets: list[str]


@dataclass
class EdgeOp:
    op: str
    subject: str
    name: str
    object: str


@dataclass
class PlaceOp:
    op: str
    frame_id: str
    where: str  # before | after | first | last
    anchor: str = ""


@dataclass
class NamedOp:
    op: str
    name: str


Op = Union[FrameOp, TargetsOp, EdgeOp, PlaceOp, NamedOp]
_OP_TYPES = {**{o: FrameOp for o in FRAME_OPS}, **{o: TargetsOp for o in TARGET_OPS},
             **{o: EdgeOp for o in EDGE_OPS}, "place": PlaceOp,
             **{o: NamedOp for o in NAMED_OPS + SESSION_OPS}}


@dataclass
class Tx:
    base_version: int
    reason: str
    ops: list[Op] = field(default_factory=list)
    # The cognitive tick the agent read at, beside base_version (None: not declared).
    base_tick: Optional[int] = None

    def to_dict(self) -> dict:
        d = {"base_version": self.base_version, "reason": self.reason,
             "ops": [_op_dict(o) for o in self.ops]}
        if self.base_tick is not None:  # absent otherwise: older events stay as they were
            d["base_tick"] = self.base_tick
        return d

    @staticmethod
    def from_dict(d: dict) -> "Tx":
        return Tx(d["base_version"], d["reason"], [_OP_TYPES[o["op"]](**o) for o in d["ops"]],
                  d.get("base_tick"))

    def render(self) -> str:
        """Canonical context-tx text of this transaction."""
        parts = [f"(base-version {self.base_version})"]
        if self.base_tick is not None:
            parts.append(f"(base-tick {self.base_tick})")
        if self.reason:
            parts.append(f"(reason {sexpr.render(self.reason)})")
        for o in self.ops:
            parts.append(_render_op(o))
        return "(context-tx " + " ".join(parts) + ")"


def _op_dict(o: Op) -> dict:
    """An op as a stored transaction holds it (a frame op's `erased` only when set: the
    stored form, and a request's payload hash, stay what they were)."""
    d = dict(vars(o))
    if d.get("erased") == "":
        del d["erased"]
    return d


def _bad(message: str, index: Optional[int] = None, **details: object) -> MorphzError:
    return MorphzError("TX_INVALID", message, op_index=index, **details)


def check_frame_id(value: str, index: Optional[int] = None, what: str = "frame id") -> str:
    if len(value) > MAX_ID_CHARS:
        raise _bad(f"{what} longer than {MAX_ID_CHARS} characters", index, ref=value[:80],
                   **FRAME_ID_CHARS.details(size=len(value)))
    if not value or value[0] == "@" or _ID_BAD_CHAR.search(value) or _INTEGER.match(value):
        raise _bad(f"invalid {what} {value[:80]!r}", index, ref=value[:80])
    return value


def limit_details(reason: str, limits: sexpr.Limits) -> dict:
    """The limit a reader's error (sexpr.REASONS) stands for, if it is one."""
    named = {"SEXPR_TOO_LARGE": (TX_BYTES, limits.max_bytes),
             "SEXPR_TOO_DEEP": (TX_DEPTH, limits.max_depth),
             "SEXPR_TOO_MANY_NODES": (TX_NODES, limits.max_nodes)}.get(reason)
    return named[0].details(named[1]) if named else {}


def too_many_ops(count: int, index: int) -> MorphzError:
    return MorphzError("TX_PARSE_ERROR", f"the transaction has more than {MAX_OPS} operations",
                       op_index=index, **TX_OPS.details(size=count))


def check_target(value: str, index: Optional[int] = None) -> str:
    return value if is_ref(value) else check_frame_id(value, index)


# -- text form -----------------------------------------------------------------------

def parse_text(text: Union[str, bytes], limits: sexpr.Limits = TX_LIMITS) -> Tx:
    try:
        form = sexpr.parse_one(text, limits)
    except sexpr.SexprError as e:
        raise MorphzError("TX_PARSE_ERROR", e.message, syntax=e.reason, line=e.line,
                          column=e.column, offset=e.offset,
                          **limit_details(e.reason, limits)) from None
    if not isinstance(form, list) or not form or form[0] != sexpr.Symbol("context-tx"):
        raise _bad("a transaction is one (context-tx ...) form")
    base: Optional[int] = None
    base_tick: Optional[int] = None
    reason = ""
    ops: list[Op] = []
    for item in form[1:]:
        if not isinstance(item, list) or not item or not isinstance(item[0], sexpr.Symbol):
            raise _bad(f"expected an operation list, got {_show(item)}", len(ops))
        head, args = item[0].name, item[1:]
        if head == "base-version":
            if len(args) != 1 or not isinstance(args[0], int) or args[0] < 0 or base is not None:
                raise _bad("(base-version N) takes one non-negative integer, once")
            base = args[0]
        elif head == "base-tick":
            if len(args) != 1 or not isinstance(args[0], int) or args[0] < 0 or \
                    base_tick is not None:
                raise _bad("(base-tick T) takes one non-negative integer, once")
            base_tick = args[0]
        elif head == "reason":
            if len(args) != 1 or not isinstance(args[0], str) or reason:
                raise _bad('(reason "...") takes one string, once')
            reason = args[0]
        elif head in ALL_OPS:
            if len(ops) == MAX_OPS:
                raise too_many_ops(sum(isinstance(i, list) and bool(i) and isinstance(
                    i[0], sexpr.Symbol) and i[0].name in ALL_OPS for i in form[1:]), len(ops))
            ops.append(_parse_op(head, args, len(ops)))
        else:
            raise MorphzError("TX_UNKNOWN_OP", f"unknown operation {echo(head)!r}",
                              op_index=len(ops), op=echo(head))
    if base is None:
        raise _bad("the transaction must declare (base-version N)")
    return check_tx(Tx(base, reason, ops, base_tick))


def _show(node: object) -> str:
    """What an error echoes of a node: short, and never a `(secret ...)` part."""
    return sexpr.render(secrets.redact_nodes([node])[0])[:80]


def _atom_id(node: object, index: int, what: str = "frame id") -> str:
    if isinstance(node, sexpr.Symbol):
        return check_frame_id(node.name, index, what)
    if isinstance(node, sexpr.Ref) and what == "target":
        return str(node)
    # `ref` names what was given, as check_frame_id does for the same id given structured.
    raise _bad(f"expected a {what}, got {_show(node)}", index, ref=_show(node))


def _target(node: object, index: int) -> str:
    if isinstance(node, sexpr.Ref):
        return str(node)
    return _atom_id(node, index)


def _parse_op(head: str, args: list, index: int) -> Op:
    if head in FRAME_OPS:
        if not args:
            raise _bad(f"({head} ID ...) needs a frame id", index)
        fid = _atom_id(args[0], index)
        items = args[1:]
        sources = None
        if items and isinstance(items[0], list) and items[0][:1] == [sexpr.Symbol("from")] \
                and head != "create":
            sources = [_target(s, index) for s in items[0][1:]]
            items = items[1:]
        return FrameOp(head, fid, sexpr.render_read(items), sources)
    if head in TARGET_OPS:
        if not args:
            raise _bad(f"({head} ...) needs at least one frame id or @eN", index)
        return TargetsOp(head, [_target(a, index) for a in args])
    if head in EDGE_OPS:
        if len(args) != 3:
            raise _bad(f"({head} SUBJECT NAME OBJECT) takes three symbols", index)
        s, n, o = (_atom_id(a, index, w) for a, w in zip(args, ("frame id", "relation name", "frame id")))
        return EdgeOp(head, s, n, o)
    if head == "place":
        if len(args) != 2:
            raise _bad("(place F (before G)|(after G)|first|last)", index)
        fid = _atom_id(args[0], index)
        where = args[1]
        if isinstance(where, sexpr.Symbol) and where.name in ("first", "last"):
            return PlaceOp(head, fid, where.name)
        if isinstance(where, list) and len(where) == 2 and where[0] in (
                sexpr.Symbol("before"), sexpr.Symbol("after")):
            return PlaceOp(head, fid, where[0].name, _atom_id(where[1], index))
        raise _bad("(place F (before G)|(after G)|first|last)", index)
    # checkpoint names and session ids
    if len(args) != 1:
        raise _bad(f"({head} NAME) takes one name", index)
    node = args[0]
    if isinstance(node, str):
        node = sexpr.Symbol(node)
    return NamedOp(head, _atom_id(node, index, "session id" if head in SESSION_OPS else "name"))


def check_op(o: Op, i: int) -> None:
    """Shape of one operation: what the text form checks while it reads the operation."""
    if o.op not in _OP_TYPES or not isinstance(o, _OP_TYPES[o.op]):
        raise MorphzError("TX_UNKNOWN_OP", f"unknown operation {echo(o.op)!r}", op_index=i)
    if isinstance(o, FrameOp):
        check_frame_id(o.frame_id, i)
        for s in o.sources or []:
            check_target(s, i)
        # Two shapes the text form cannot write (a Tx must render to text that reads
        # back as itself): sources on create, and a revise that keeps its sources but
        # whose body begins with `(from ...)`, which the text form reads as sources.
        if o.op == "create" and o.sources is not None:
            raise _bad("create takes no sources: use derive", i, ref=o.frame_id,
                       field="create.sources")
        if o.op == "revise" and o.sources is None and _FROM_CLAUSE.match(o.body):
            raise _bad("a revise body that keeps the sources cannot begin with (from ...): "
                       "the text form reads that as the sources", i, ref=o.frame_id,
                       field="revise.body")
    elif isinstance(o, TargetsOp):
        if not o.targets:
            raise _bad(f"{o.op} needs at least one target", i)
        for t in o.targets:
            check_target(t, i)
    elif isinstance(o, EdgeOp):
        check_frame_id(o.subject, i)
        check_frame_id(o.name, i, "relation name")
        check_frame_id(o.object, i)
    elif isinstance(o, PlaceOp):
        check_frame_id(o.frame_id, i)
        if o.where not in ("before", "after", "first", "last"):
            raise _bad("place needs before, after, first or last", i, field="place.where")
        if o.where in ("before", "after"):
            check_frame_id(o.anchor, i)
    else:
        check_frame_id(o.name, i, "session id" if o.op in SESSION_OPS else "name")


def check_tx(tx: Tx) -> Tx:
    """Shape rules common to the text and protobuf forms. Every operation's shape comes
    first, as in the text form, which checks it while reading, so both forms report the
    same first error."""
    if tx.base_version < 0:
        raise _bad("base-version must be >= 0")
    if tx.base_tick is not None and tx.base_tick < 0:
        raise _bad("base-tick must be >= 0")
    if not tx.ops:
        raise _bad("the transaction has no operations")
    for i, o in enumerate(tx.ops):
        check_op(o, i)
    for i, o in enumerate(tx.ops):
        if isinstance(o, FrameOp):
            if o.op == "derive" and not o.sources:
                raise _bad("derive needs (from SOURCE ...) with at least one source", i,
                           ref=o.frame_id)
            if o.frame_id in (o.sources or []):
                raise _bad(f"frame {o.frame_id} cannot be its own source", i, ref=o.frame_id)
        if o.op in REASON_OPS and not tx.reason.strip():
            raise MorphzError("TX_REASON_REQUIRED",
                              f"a transaction that does {o.op} must give (reason \"...\")",
                              op_index=i, op=o.op)
    return tx


def text_nodes(o: Op) -> int:
    """S-expression nodes the operation takes in the text form, its body's not counted
    (every list, atom and string is one; see sexpr.Limits.max_nodes)."""
    if isinstance(o, FrameOp):  # (OP ID [(from S...)] BODY...)
        return 3 + (0 if o.sources is None else 2 + len(o.sources))
    if isinstance(o, TargetsOp):
        return 2 + len(o.targets)
    if isinstance(o, EdgeOp):
        return 5
    if isinstance(o, PlaceOp):  # (place F first) or (place F (before G))
        return 6 if o.where in ("before", "after") else 4
    return 3


def header_nodes(tx: Tx) -> int:
    """Nodes of `(context-tx (base-version N) [(base-tick T)] [(reason "...")] ...)`
    around the ops (a new header clause in render() adds its nodes here)."""
    return 2 + 3 + (3 if tx.base_tick is not None else 0) + (3 if tx.reason else 0)


def _render_op(o: Op) -> str:
    if isinstance(o, FrameOp):
        src = "" if o.sources is None else " (from " + " ".join(o.sources) + ")"
        body = f" {o.body}" if o.body else ""
        return f"({o.op} {o.frame_id}{src}{body})"
    if isinstance(o, TargetsOp):
        return f"({o.op} {' '.join(o.targets)})"
    if isinstance(o, EdgeOp):
        return f"({o.op} {o.subject} {o.name} {o.object})"
    if isinstance(o, PlaceOp):
        where = f"({o.where} {o.anchor})" if o.anchor else o.where
        return f"(place {o.frame_id} {where})"
    return f"({o.op} {o.name})"


def parse_body(text: str, index: Optional[int] = None,
               limits: sexpr.Limits = TX_LIMITS,
               nodes_left: Optional[int] = None) -> tuple[str, int]:
    """Canonicalize body text given in the protobuf form; return it and its node count.
    It may nest as deep as a body can in the text form (BODY_DEPTH lists in), and is
    read no further than `nodes_left` nodes (what the transaction's limit leaves it)."""
    left = limits.max_nodes if nodes_left is None else max(nodes_left, 0)
    try:
        items = sexpr.parse_many(text, replace(limits, max_depth=limits.max_depth - BODY_DEPTH,
                                               max_nodes=left))
    except sexpr.SexprError as e:
        message = f"the transaction has more than {limits.max_nodes} nodes in its text " \
            "form" if e.reason == "SEXPR_TOO_MANY_NODES" else f"frame body: {e.message}"
        raise MorphzError("TX_PARSE_ERROR", message, syntax=e.reason,
                          op_index=index, line=e.line, column=e.column,
                          **limit_details(e.reason, limits)) from None
    return sexpr.render_read(items), _count_nodes(items)


def _count_nodes(items: list) -> int:
    count, stack = 0, [items]
    while stack:
        for node in stack.pop():
            count += 1
            if isinstance(node, list):
                stack.append(node)
    return count
