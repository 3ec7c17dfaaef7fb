"""Short event references (`@e42`) as the rest of Morphz writes them."""
from __future__ import annotations

import re

_REF = re.compile(r"@e(\d{1,19})\Z")


def is_ref(text: str) -> bool:
    return _REF.match(text) is not None


def ref_seq(text: str) -> int:
    return int(_REF.match(text).group(1))
