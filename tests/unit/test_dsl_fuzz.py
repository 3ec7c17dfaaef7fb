"""SEC-03 for the context-tx parser alone, in process: MORPHZ_FUZZ_PARSER_CASES random
and mutated texts (default 60,000; the texts of tests/integration/test_fuzz.py's
generator) each give a transaction or a MorphzError with a registered reason, never any
other exception, and no refusal echoes more than a short form of the text. MORPHZ_FUZZ_SEED
replays a run."""
from __future__ import annotations

import os
import random

from morphz.services.transaction.core.txlang import parse_text
from morphz.shared.errors import MorphzError
from tests.integration.test_fuzz import SEED, dsl_text

CASES = int(os.environ.get("MORPHZ_FUZZ_PARSER_CASES", "60000"))
MAX_MESSAGE = 400  # a refusal's fixed words plus the short echoes shared/limits.py allows


def test_sec_03_the_parser_answers_every_fuzzed_text_with_a_transaction_or_a_reason():
    print(f"MORPHZ_FUZZ_SEED={SEED} MORPHZ_FUZZ_PARSER_CASES={CASES}")
    rng = random.Random(SEED)
    parsed = refused = 0
    for i in range(CASES):
        # Now and then one long unknown word: what a refusal echoes must stay short.
        text = dsl_text(rng) if i % 100 else f"(context-tx (base-version 0) ({'z' * 5000}))"
        try:
            parse_text(text)
            parsed += 1
        except MorphzError as e:
            assert len(e.message) <= MAX_MESSAGE and all(
                len(str(v)) <= MAX_MESSAGE for v in e.details.values()), (text[:200], e)
            refused += 1
        except Exception as e:  # noqa: BLE001 - what this test exists to catch
            raise AssertionError(f"{type(e).__name__} on {text!r}") from e
    print(f"{CASES} texts: {parsed} parsed, {refused} refused")
    assert parsed and refused  # both paths were exercised
