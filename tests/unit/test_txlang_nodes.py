"""The structured form counts a transaction's nodes as the text form does (SEC-06: one
limit, whichever form the transaction comes in)."""
from morphz.services.transaction.convert import tx_from_proto, tx_to_proto
from morphz.services.transaction.core.txlang import (
    header_nodes, parse_body, parse_text, text_nodes)
from morphz.shared import sexpr

OPS = [
    "(create a)", "(create a (goal ship-v1) (stage (nested \"s\" 1 @e2)))",
    "(create a (from b) (x))",
    "(derive d (from @e1 a) (tests passed))", "(derive d (from a))",
    "(revise a (v 2))", "(revise a)", "(revise a (from) (v 2))", "(revise a (from @e1 b c))",
    "(retire a @e1)", "(restore a)", "(protect @e1)", "(unprotect a b c)",
    "(relate a supports b)", "(unrelate a supports b)",
    "(place a first)", "(place a last)", "(place a (before b))", "(place a (after b))",
    "(checkpoint cp)", "(rollback cp)", "(drop-checkpoint cp)",
    "(retire-session s2)", "(restore-session s3)",
]


def count(text: str) -> int:
    stack, n = [sexpr.parse_many(text)], 0
    while stack:
        for node in stack.pop():
            n += 1
            if isinstance(node, list):
                stack.append(node)
    return n


def structured_count(text: str) -> int:
    tx = parse_text(text)
    return header_nodes(tx) + sum(text_nodes(o) + parse_body(getattr(o, "body", ""))[1]
                                  for o in tx.ops)


def test_sec_06_structured_node_count_is_the_text_forms():
    needs_reason = ("(retire ", "(unprotect ", "(retire-session ")
    for header in ("(base-version 3)", '(base-version 3) (reason "why \\"not\\"")'):
        usable = OPS if "reason" in header else [o for o in OPS if not o.startswith(needs_reason)]
        for ops in [[o] for o in usable] + [usable]:
            text = f"(context-tx {header} {' '.join(ops)})"
            assert structured_count(text) == count(text), text
            # ... and the structured form takes every one of them back as the same Tx.
            assert tx_from_proto(tx_to_proto(parse_text(text))) == parse_text(text), text
