"""SEC-04, the one redacted form (shared/mind/secrets.py) on the shapes it meets."""
from __future__ import annotations

from morphz.shared.mind import records as R
from morphz.shared.mind import secrets


def test_SEC_04_a_secret_part_anywhere_in_a_body_is_replaced_by_its_marker():
    body = '(a (b (secret "x" (y 1)))) (secret) (c "(secret z)")'
    assert secrets.frame_body("f", body) == \
        '(a (b "[secret f]")) "[secret f]" (c "(secret z)")'
    assert secrets.frame_body("f", body, reveal=True) == body
    assert secrets.has_secret(body) and not secrets.has_secret('(c "(secret z)")')


def test_SEC_04_a_transaction_text_names_the_frame_each_op_writes():
    text = ('(context-tx (base-version 3) (create a (k (secret "1"))) '
            '(revise b (from @e2) (secret "2")) (reason "r"))')
    assert secrets.event_text(9, R.CONTEXT_TX, text, {}) == (
        '(context-tx (base-version 3) (create a (k "[secret a]")) '
        '(revise b (from @e2) "[secret b]") (reason "r"))')


def test_SEC_04_a_secret_event_text_shows_only_its_ref():
    assert secrets.event_text(4, "user-message", "pw", {"secret": True}) == "[secret @e4]"
    assert secrets.event_text(4, "user-message", "pw", {"secret": True}, reveal=True) == "pw"
    # Only a transaction's text is read as DSL; an input's text is shown as stored.
    assert secrets.event_text(5, "user-message", '(secret "x")', {}) == '(secret "x")'
