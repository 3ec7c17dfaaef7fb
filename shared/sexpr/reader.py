"""The reader: text (str or UTF-8 bytes) -> nodes. Iterative and linear-time, so hostile
input can only ever produce a ``SexprError``: a fast reader for well-formed input, and
the exact one that finds what is wrong and where."""

from __future__ import annotations

import re
from itertools import islice

from morphz.shared.sexpr.nodes import (
    DEFAULT_LIMITS, INT, MAX_DIGITS, REF, Limits, Node, Ref, SexprError, Symbol)


def _error(text: str, reason: str, message: str, offset: int) -> SexprError:
    # Line/column are only computed on failure, keeping the hot path free of bookkeeping.
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return SexprError(reason, message, offset, line, column)


# One match per token: leading whitespace/comments are skipped inside the same
# match.  Python's \s matches exactly the characters for which str.isspace()
# is true.  Possessive/atomic constructs (3.11+) rule out backtracking blow-ups,
# and the alternatives cover every character, so a match never fails.
_TOKEN = re.compile(
    r"""
    (?:\s++|;[^\n]*+)*+
    (?:
     (?P<open>\()
    |(?P<close>\))
    |(?P<string>"(?>[^"\\]*+(?:\\.[^"\\]*+)*+)")
    |(?P<unterminated>")
    |(?P<atom>[^\s()";]++)
    |(?P<eof>\Z)
    )
    """,
    re.VERBOSE | re.DOTALL,
)
_ESCAPE = re.compile(r'\\(?:u\{([0-9A-Fa-f]{1,6})\}|(["\\ntr])|.)', re.DOTALL)
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r"}
_FAST_ESCAPES = (('\\"', '"'), ("\\n", "\n"), ("\\t", "\t"), ("\\r", "\r"))
_BAD_CHAR = re.compile(r"[\x00\ud800-\udfff]")
_NUMERIC_START = frozenset("-0123456789@")
FAST_CHARS = 64 << 10  # the longest text _parse_fast reads with one findall


def _decode(text: str | bytes, limits: Limits) -> str:
    if isinstance(text, (bytes, bytearray, memoryview)):
        data = bytes(text)
        if len(data) > limits.max_bytes:
            raise SexprError("SEXPR_TOO_LARGE", f"input exceeds {limits.max_bytes} bytes")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            good = data[: exc.start].decode("utf-8")  # prefix before the bad byte is valid
            raise _error(good, "SEXPR_INVALID_UTF8", "input is not valid UTF-8", len(good)) from None
    elif isinstance(text, str):
        # Every character is 1-4 UTF-8 bytes: only encode when the bounds can't decide.
        if len(text) > limits.max_bytes or (
            len(text) * 4 > limits.max_bytes
            and len(text.encode("utf-8", "surrogatepass")) > limits.max_bytes
        ):
            raise SexprError("SEXPR_TOO_LARGE", f"input exceeds {limits.max_bytes} bytes")
    else:
        raise TypeError(f"expected str or bytes, got {type(text).__name__}")
    bad = _BAD_CHAR.search(text)
    if bad:
        what = "NUL character" if bad.group() == "\x00" else "lone surrogate"
        raise _error(text, "SEXPR_INVALID_CHARACTER", f"{what} not allowed", bad.start())
    return text


def _simple_unescape(body: str) -> str | None:
    """body with its escapes decoded when each is a backslash pair or one of
    _FAST_ESCAPES, else None (the caller reads the rest, or reports it). All C-level
    str.replace: turning each escaped backslash pair into a placeholder first (left to
    right) leaves every remaining backslash as the start of an escape. NUL is safe as
    placeholder: raw NUL never passes _decode."""
    if "\\" not in body:
        return body
    fast = body.replace("\\\\", "\0")
    for escape, char in _FAST_ESCAPES:
        fast = fast.replace(escape, char)
    return None if "\\" in fast else fast.replace("\0", "\\")


def _unescape(text: str, start: int, end: int) -> str:
    body = text[start:end]
    fast = _simple_unescape(body)
    if fast is not None:
        return fast

    # Slow exact path: \u{...} escapes, or a bad escape whose offset we must report.
    def replace(m: re.Match[str]) -> str:
        hex_digits, simple = m.group(1), m.group(2)
        if simple is not None:
            return _SIMPLE_ESCAPES[simple]
        if hex_digits is not None:
            cp = int(hex_digits, 16)
            if cp <= 0x10FFFF and not 0xD800 <= cp <= 0xDFFF:
                return chr(cp)
        raise _error(text, "SEXPR_BAD_ESCAPE", f"invalid escape {m.group()[:10]!r}", start + m.start())

    return _ESCAPE.sub(replace, body)


def _atom(text: str, token: str, pos: int) -> Node:
    if token[0] not in _NUMERIC_START:
        return Symbol(token)
    m = INT.fullmatch(token) or REF.fullmatch(token)
    if m is None:
        return Symbol(token)
    if len(m.group(1)) > MAX_DIGITS:
        # Also keeps int() clear of CPython's int/str conversion limit.
        raise _error(text, "SEXPR_INTEGER_RANGE", f"more than {MAX_DIGITS} digits", pos)
    return Ref(int(m.group(1))) if token[0] == "@" else int(token)


def _parse(text: str, limits: Limits) -> tuple[list[Node], list[int]]:
    """Return the top-level forms and their start offsets."""
    top: list[Node] = []
    starts: list[int] = []
    stack: list[list[Node]] = [top]  # innermost open list is stack[-1]
    opens: list[int] = []  # offsets of the unclosed '(' (parallel to stack[1:])
    nodes = 0
    pos = 0
    match = _TOKEN.match
    while True:
        m = match(text, pos)
        kind, pos, end = m.lastgroup, m.start(m.lastindex), m.end()
        if kind == "close":
            if not opens:
                raise _error(text, "SEXPR_UNBALANCED", "unexpected ')'", pos)
            stack.pop()
            opens.pop()
            pos = end
            continue
        if kind == "eof":
            break
        nodes += 1
        if nodes > limits.max_nodes:
            raise _error(text, "SEXPR_TOO_MANY_NODES", f"more than {limits.max_nodes} nodes", pos)
        if not opens:
            starts.append(pos)
        if kind == "open":
            if len(opens) >= limits.max_depth:
                raise _error(text, "SEXPR_TOO_DEEP", f"nesting deeper than {limits.max_depth}", pos)
            child: list[Node] = []
            stack[-1].append(child)
            stack.append(child)
            opens.append(pos)
        elif kind == "atom":
            stack[-1].append(_atom(text, text[pos:end], pos))
        elif kind == "string":
            stack[-1].append(_unescape(text, pos + 1, end - 1))
        else:
            raise _error(text, "SEXPR_UNTERMINATED_STRING", "string is never closed", pos)
        pos = end
    if opens:
        raise _error(text, "SEXPR_UNBALANCED", "'(' is never closed", opens[-1])
    return top, starts


# _TOKEN's alternatives as plain groups, for findall: (open, close, string,
# unterminated, atom), all empty at the end of the input.
_FAST_TOKEN = re.compile(_TOKEN.pattern.replace("?P<open>", "").replace("?P<close>", "")
                         .replace("?P<string>", "").replace("?P<unterminated>", "")
                         .replace("?P<atom>", "").replace("(?P<eof>\\Z)", "\\Z"),
                         re.VERBOSE | re.DOTALL)


def _parse_fast(text: str, limits: Limits, findall_chars: int = FAST_CHARS) -> list[Node] | None:
    """The forms of well-formed input, or None for anything else (an error, an escape
    other than the simple ones, a number the exact reader checks), which _parse then
    reads, finding what is wrong and where. About twice as fast as _parse, which asks a
    match object for a token's kind and offsets: here one findall (a tuple of groups per
    token) reads a short text, and each atom's node is made once.

    Past the node limit it raises SEXPR_TOO_MANY_NODES itself, where _parse would (it
    read nothing _parse refuses before that node): so a text over the limit is read once,
    and no further than the limit, not a second time by _parse."""
    top: list[Node] = []
    stack = [top]
    current = top
    nodes = 0
    atoms: dict[str, Node] = {}
    # findall holds a tuple per token at once: a longer text than `findall_chars` is
    # read a match at a time (groups: None where findall gives "").
    tokens = _FAST_TOKEN.findall(text) if len(text) <= findall_chars else \
        (m.groups() for m in _FAST_TOKEN.finditer(text))
    for k, (opened, closed, string, unterminated, atom) in enumerate(tokens):
        if atom:
            node = atoms.get(atom)
            if node is None:  # (immutable: one node serves every occurrence)
                node = atoms[atom] = Symbol(atom) if atom[0] not in _NUMERIC_START \
                    else _atom(text, atom, 0)
            current.append(node)
        elif opened:
            child: list[Node] = []
            current.append(child)
            stack.append(child)
            current = child
            if len(stack) > limits.max_depth + 1:
                return None
        elif closed:
            stack.pop()
            if not stack:
                return None
            current = stack[-1]
            continue
        elif string:
            body = _simple_unescape(string[1:-1])
            if body is None:
                return None
            current.append(body)
        elif unterminated:
            return None
        else:  # the end
            break
        nodes += 1
        if nodes > limits.max_nodes:
            raise _too_many_nodes(text, limits, k)
    if len(stack) != 1:
        return None
    return top


def _too_many_nodes(text: str, limits: Limits, k: int) -> SexprError:
    """SEXPR_TOO_MANY_NODES at the `k`th token (from 0): found again by a match
    iterator that C steps through, with no Python step per token."""
    m = next(islice(_FAST_TOKEN.finditer(text), k, None))
    return _error(text, "SEXPR_TOO_MANY_NODES", f"more than {limits.max_nodes} nodes",
                  m.start(m.lastindex))


def _forms(text: str, limits: Limits, one: bool) -> tuple[list[Node], list[int]]:
    """_parse's result; the forms' start offsets only where they are reported (`one`
    form expected, and more found: an error names where the second begins)."""
    try:
        forms = _parse_fast(text, limits)
    except SexprError as e:  # a number out of range: _parse reports it where it is
        if e.reason == "SEXPR_TOO_MANY_NODES":
            raise
        forms = None
    if forms is not None and (not one or len(forms) <= 1):
        return forms, []
    return _parse(text, limits)


def parse_many(text: str | bytes, limits: Limits = DEFAULT_LIMITS) -> list[Node]:
    """Parse every top-level form in ``text``."""
    return _forms(_decode(text, limits), limits, one=False)[0]


def parse_one(text: str | bytes, limits: Limits = DEFAULT_LIMITS) -> Node:
    """Parse ``text`` that must hold exactly one top-level form."""
    decoded = _decode(text, limits)
    forms, starts = _forms(decoded, limits, one=True)
    if not forms:
        raise _error(decoded, "SEXPR_EMPTY", "no form found", len(decoded))
    if len(forms) > 1:
        raise _error(decoded, "SEXPR_EXPECTED_ONE_FORM", f"expected one form, found {len(forms)}", starts[1])
    return forms[0]
