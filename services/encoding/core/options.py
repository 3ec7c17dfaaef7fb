"""Compile options and the server-side limits every request is checked against."""
from __future__ import annotations

from dataclasses import dataclass, field

from morphz.shared.errors import MorphzError
from morphz.shared.names import check_lookup, check_name

DEFAULT_BUDGET_BYTES = 1 << 20
MAX_BUDGET_BYTES = 16 << 20          # replies stay well under the 64 MiB message cap
MIN_BUDGET_BYTES = 1 << 10
MAX_BUDGET_TOKENS = 8 << 20
DEFAULT_PREVIEW_BYTES = 4096
MIN_PREVIEW_BYTES = 64
MAX_PREVIEW_BYTES = 1 << 20
MAX_MUST_READ = 256
MAX_BINDINGS = 64
MAX_BINDING_VALUE = 4096
MAX_PROFILE_BYTES = 64 << 10
MAX_MODEL_CHARS = 256
# Pressure levels by used/limit (the larger of the byte and token ratios), in permille.
ELEVATED_PERMILLE = 750
MAINTENANCE_PERMILLE = 900



def bad(message: str, **details: object) -> MorphzError:
    return MorphzError("CONTEXT_INPUT_INVALID", message, **details)


@dataclass(frozen=True)
class Budget:
    bytes: int = DEFAULT_BUDGET_BYTES
    tokens: int = 0  # 0: no token budget
    preview_bytes: int = DEFAULT_PREVIEW_BYTES

    @staticmethod
    def make(bytes_: int = 0, tokens: int = 0, preview_bytes: int = 0) -> "Budget":
        b = bytes_ or DEFAULT_BUDGET_BYTES
        if not MIN_BUDGET_BYTES <= b <= MAX_BUDGET_BYTES:
            raise bad(f"budget must be {MIN_BUDGET_BYTES}..{MAX_BUDGET_BYTES} bytes",
                      field="budget_bytes", value=b)
        if not 0 <= tokens <= MAX_BUDGET_TOKENS:
            raise bad(f"token budget must be 0..{MAX_BUDGET_TOKENS}", field="budget_tokens")
        p = preview_bytes or DEFAULT_PREVIEW_BYTES
        if not MIN_PREVIEW_BYTES <= p <= MAX_PREVIEW_BYTES:
            raise bad(f"preview threshold must be {MIN_PREVIEW_BYTES}..{MAX_PREVIEW_BYTES} "
                      "bytes", field="preview_bytes", value=p)
        return Budget(b, tokens, p)


@dataclass(frozen=True)
class Environment:
    """What the runtime binds for one evaluation (runtime facts, recorded as given)."""
    model: str = ""
    profile: str = ""  # the bound harness definition; "" renders as none
    bindings: dict = field(default_factory=dict)
    capabilities: bool = False

    @staticmethod
    def make(model: str = "", profile: str = "", bindings: dict | None = None,
             capabilities: bool = False) -> "Environment":
        if len(model) > MAX_MODEL_CHARS:
            raise bad(f"model name exceeds {MAX_MODEL_CHARS} characters", field="model")
        if len(profile.encode()) > MAX_PROFILE_BYTES:
            raise bad(f"evaluation profile exceeds {MAX_PROFILE_BYTES} bytes",
                      field="evaluation_profile")
        bindings = dict(bindings or {})
        if len(bindings) > MAX_BINDINGS:
            raise bad(f"at most {MAX_BINDINGS} bindings", field="bindings")
        for k, v in bindings.items():
            check_name(k, "binding name")
            if not isinstance(v, str) or len(v) > MAX_BINDING_VALUE:
                raise bad(f"binding {k} must be a string of at most {MAX_BINDING_VALUE} "
                          "characters", field="bindings", binding=k)
        return Environment(model, profile, dict(sorted(bindings.items())), bool(capabilities))


def check_must_read(items: list[str]) -> list[str]:
    if len(items) > MAX_MUST_READ:
        raise bad(f"at most {MAX_MUST_READ} must-read items", field="must_read")
    out: list[str] = []
    for it in items:
        check_lookup(it, "must_read item")
        if it not in out:
            out.append(it)
    return out
