"""Every requirement id of the CONFORMANCE document and the profile or extension it
belongs to. The document itself ships inside the kit (CONFORMANCE.md beside this file, a
copy of the project's design/CONFORMANCE.md), so an outside implementer needs nothing
else: the repository's tests check that this map holds exactly the document's ids, and
that the copy is the project's document wherever that is at hand.

Profiles (seed 003 section 11) each include the ones before them: SC-Core holds CORE-*,
RECALL-* and AUDIT-*; SC-Durable adds DUR-*; SC-Concurrent adds CONC-*; SC-Distributed
adds DIST-*. The extensions are named separately in a report.
"""
from __future__ import annotations

import re
from importlib import resources
from types import MappingProxyType

PROFILES = ("SC-Core", "SC-Durable", "SC-Concurrent", "SC-Distributed")
EXTENSIONS = ("Security", "Hybrid", "Assembly", "MCP", "UI", "Soak", "Privacy", "Kit")

REQUIREMENTS = MappingProxyType({
    "CORE-01": "SC-Core",
    "CORE-02": "SC-Core",
    "CORE-03": "SC-Core",
    "CORE-04": "SC-Core",
    "CORE-05": "SC-Core",
    "CORE-06": "SC-Core",
    "CORE-07": "SC-Core",
    "CORE-08": "SC-Core",
    "CORE-09": "SC-Core",
    "CORE-10": "SC-Core",
    "CORE-11": "SC-Core",
    "CORE-12": "SC-Core",
    "CORE-13": "SC-Core",
    "CORE-14": "SC-Core",
    "CORE-15": "SC-Core",
    "CORE-16": "SC-Core",
    "CORE-17": "SC-Core",
    "CORE-18": "SC-Core",
    "CORE-19": "SC-Core",
    "CORE-20": "SC-Core",
    "CORE-21": "SC-Core",
    "CORE-22": "SC-Core",
    "CORE-23": "SC-Core",
    "CORE-24": "SC-Core",
    "CORE-25": "SC-Core",
    "CORE-26": "SC-Core",
    "RECALL-01": "SC-Core",
    "RECALL-02": "SC-Core",
    "RECALL-03": "SC-Core",
    "RECALL-04": "SC-Core",
    "RECALL-05": "SC-Core",
    "RECALL-06": "SC-Core",
    "RECALL-07": "SC-Core",
    "RECALL-08": "SC-Core",
    "RECALL-09": "SC-Core",
    "RECALL-10": "SC-Core",
    "RECALL-11": "SC-Core",
    "RECALL-12": "SC-Core",
    "RECALL-13": "SC-Core",
    "AUDIT-01": "SC-Core",
    "DUR-01": "SC-Durable",
    "DUR-02": "SC-Durable",
    "DUR-03": "SC-Durable",
    "DUR-04": "SC-Durable",
    "DUR-05": "SC-Durable",
    "DUR-06": "SC-Durable",
    "DUR-07": "SC-Durable",
    "DUR-08": "SC-Durable",
    "DUR-09": "SC-Durable",
    "CONC-01": "SC-Concurrent",
    "CONC-02": "SC-Concurrent",
    "CONC-03": "SC-Concurrent",
    "CONC-04": "SC-Concurrent",
    "CONC-05": "SC-Concurrent",
    "CONC-06": "SC-Concurrent",
    "CONC-07": "SC-Concurrent",
    "DIST-01": "SC-Distributed",
    "DIST-02": "SC-Distributed",
    "DIST-03": "SC-Distributed",
    "DIST-04": "SC-Distributed",
    "DIST-05": "SC-Distributed",
    "DIST-06": "SC-Distributed",
    "DIST-07": "SC-Distributed",
    "SEC-01": "Security",
    "SEC-02": "Security",
    "SEC-03": "Security",
    "SEC-04": "Security",
    "SEC-05": "Security",
    "SEC-06": "Security",
    "SEC-07": "Security",
    "SEC-08": "Security",
    "SEC-09": "Security",
    "HYB-01": "Hybrid",
    "HYB-02": "Hybrid",
    "HYB-03": "Hybrid",
    "HYB-04": "Hybrid",
    "HYB-05": "Hybrid",
    "HYB-06": "Hybrid",
    "HYB-07": "Hybrid",
    "HYB-08": "Hybrid",
    "ASM-01": "Assembly",
    "ASM-02": "Assembly",
    "ASM-03": "Assembly",
    "ASM-04": "Assembly",
    "ASM-05": "Assembly",
    "ASM-06": "Assembly",
    "MCP-01": "MCP",
    "MCP-02": "MCP",
    "UI-01": "UI",
    "UI-02": "UI",
    "UI-03": "UI",
    "SOAK-01": "Soak",
    "PRIV-01": "Privacy",
    "PRIV-02": "Privacy",
    "PRIV-03": "Privacy",
    "PRIV-04": "Privacy",
    "PRIV-05": "Privacy",
    "KIT-01": "Kit",
    "KIT-02": "Kit",
    "KIT-03": "Kit",
})

# Requirements that hold only for implementations offering a feature (their text says
# "With replicated storage ..."): an implementation may declare it does not offer the
# feature (`run --not-offered`); the case is then reported not-offered, the declaration is
# in the signed report, and the verdict does not count the case against the profile.
CONDITIONS = MappingProxyType({
    "DUR-08": "replicated-storage",
})


def included(profile: str) -> tuple[str, ...]:
    """The profiles a claim of `profile` covers (itself and every one below it); an
    extension covers only itself."""
    if profile in EXTENSIONS:
        return (profile,)
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}: one of {', '.join(PROFILES + EXTENSIONS)}")
    return PROFILES[:PROFILES.index(profile) + 1]


def ids_of(profiles: tuple[str, ...]) -> list[str]:
    return [rid for rid, p in REQUIREMENTS.items() if p in profiles]


def document() -> str:
    """CONFORMANCE.md, as shipped inside the kit."""
    return resources.files(__package__).joinpath("CONFORMANCE.md").read_text(encoding="utf-8")


def statements() -> dict[str, str]:
    """Each requirement id the document lists, in its order, with its line's text."""
    return dict(re.findall(r"^- ([A-Z]+-\d+) (.*)$", document(), re.MULTILINE))
