"""The named faults a database error becomes (never INTERNAL)."""
from __future__ import annotations

from morphz.shared.errors import MorphzError


def unavailable(e: BaseException, doing: str) -> MorphzError:
    """The named fault for a database error (never INTERNAL)."""
    state = getattr(e, "sqlstate", None)
    return MorphzError("STORAGE_UNAVAILABLE", f"PostgreSQL could not {doing}: "
                       f"{str(e).strip()[:300] or type(e).__name__}",
                       sqlstate=state, error=type(e).__name__)


def no_context(context: str) -> MorphzError:
    return MorphzError("CONTEXT_NOT_FOUND", f"context {context[:80]} has nothing committed",
                       context=context[:80])
