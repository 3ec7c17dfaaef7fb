"""Capacity accounting: sizes, the token estimate and the pressure level. Pressure is
a signal to the agent (CORE-25); nothing here changes what is rendered."""
from __future__ import annotations

from dataclasses import dataclass

from morphz.services.encoding.core.options import (
    ELEVATED_PERMILLE, MAINTENANCE_PERMILLE, Budget)

NORMAL, ELEVATED, MAINTENANCE = "normal", "elevated", "maintenance"
MAINTENANCE_HINT = "retire observations, condense frames or write successors"


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate: ~4 ASCII characters per token, one token per other
    character (CJK text is close to one token per character)."""
    return tokens_of(len(text), len(text.encode("ascii", "ignore")))


def tokens_of(chars: int, ascii_chars: int) -> int:
    return -(-ascii_chars // 4) + (chars - ascii_chars)


@dataclass(frozen=True)
class Pressure:
    used_bytes: int
    limit_bytes: int
    used_tokens: int
    limit_tokens: int
    maintenance_permille: int = MAINTENANCE_PERMILLE

    @property
    def permille(self) -> int:
        ratios = [self.used_bytes * 1000 // self.limit_bytes]
        if self.limit_tokens:
            ratios.append(self.used_tokens * 1000 // self.limit_tokens)
        return max(ratios)

    @property
    def level(self) -> str:
        p = self.permille
        if p >= self.maintenance_permille:
            return MAINTENANCE
        return ELEVATED if p >= ELEVATED_PERMILLE else NORMAL

    @property
    def deferred(self) -> bool:
        """Past the maintenance threshold new external actions wait for maintenance."""
        return self.level == MAINTENANCE

    def view(self) -> dict:
        return {"used_bytes": self.used_bytes, "limit_bytes": self.limit_bytes,
                "used_tokens": self.used_tokens, "limit_tokens": self.limit_tokens,
                "permille": self.permille, "level": self.level,
                "external_actions_deferred": self.deferred}


def pressure_of(used_bytes: int, used_tokens: int, budget: Budget,
                maintenance_permille: int = MAINTENANCE_PERMILLE) -> Pressure:
    return Pressure(used_bytes, budget.bytes, used_tokens, budget.tokens, maintenance_permille)
