"""The soak's checks and its report: what the run must show (SOAK-01, issue 58), judged
from the ledger, the processes' samples and the history read back at the end, as one
JSON object and a table."""
from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from typing import Optional

WARM_UP = 600.0  # seconds from a process's birth: its memory and open files are judged after
JUDGED_LIFE = 300.0  # a process is judged only if it lives this long after its warm-up
SERIES_EVERY = 60.0  # seconds between the points of each process's series in the report
SHORT = 1200.0   # a run shorter than this is not long enough to judge them
FLAT = 0.10      # growth allowed after warm-up
FD_SLACK = 4     # open files: connections come and go; a few either way is no leak
P50_RATIO = 3.0  # the normal principal's p50 outside fault windows, over the quiet one
TIMED = ("append", "commit", "search", "encode", "status")
# What a write of a former owner meets: refused (storage's fencing token, the lease).
FENCING = ("FENCED", "NOT_OWNER", "OWNERSHIP_LOST")


def p50(values: list[float]) -> Optional[float]:
    return statistics.median(values) if values else None


def exactly_once(events: list[Optional[dict]], acked: list[dict]) -> tuple[int, int]:
    """(acknowledged requests missing from the history, requests applied more than once)."""
    applied = Counter(ev["request_id"] for ev in events if ev and ev.get("request_id"))
    ids = {a["request_id"] for a in acked}
    return sum(1 for rid in ids if rid not in applied), sum(1 for n in applied.values() if n > 1)


def flatness(series: dict[str, list[tuple[float, int, int, int]]], births: dict[str, float],
             duration: float) -> dict:
    """Per process incarnation (NAME#N, born at `births` s from the start), from samples
    (s, RSS, open files, anonymous RSS): judged from its own warm-up (WARM_UP from its
    birth: a restarted process fills its caches again) to its last sample, if that window
    lasts JUDGED_LIFE or more. Its memory is its anonymous RSS (what it allocated; the
    rest of RSS is mapped files, LMDB's data among them, which grow with the data) and
    its open files, at the window's start and end; flat if neither grew by more than FLAT
    (open files: or by FD_SLACK). Every incarnation is listed with its life and its series,
    one point a minute (s, RSS MiB, anonymous MiB, open files), so a reader sees the curve."""
    warm = WARM_UP if duration >= SHORT else duration / 3
    least = JUDGED_LIFE if duration >= SHORT else duration / 4
    out = {}
    for name, samples in series.items():
        if not samples:
            continue
        born = births.get(name, samples[0][0])
        row = {"born_s": round(born), "last_s": round(samples[-1][0]),
               "series": downsample(samples)}
        out[name] = row
        judged = [s for s in samples if s[0] >= born + warm]
        if len(judged) < 6 or judged[-1][0] - judged[0][0] < least:
            row["judged"] = None  # too short a life after its warm-up to judge
            continue
        first = [statistics.median(s[k] for s in judged[:3]) for k in (1, 2, 3)]
        last = [statistics.median(s[k] for s in judged[-3:]) for k in (1, 2, 3)]
        anon_growth = (last[2] - first[2]) / first[2]
        fd_growth = (last[1] - first[1]) / max(first[1], 1)
        row.update(judged=[round(judged[0][0]), round(judged[-1][0])],
                   anon_mib=[_mib(first[2]), _mib(last[2])],
                   rss_mib=[_mib(first[0]), _mib(last[0])],
                   fds=[first[1], last[1]], anon_growth=round(anon_growth, 3),
                   rss_growth=round((last[0] - first[0]) / first[0], 3),
                   fd_growth=round(fd_growth, 3),
                   flat=anon_growth <= FLAT and (fd_growth <= FLAT or
                                                 last[1] - first[1] <= FD_SLACK))
    kinds = {name.split("#")[0] for name in out}
    unjudged = sorted(k for k in kinds if not any(
        p["judged"] for n, p in out.items() if n.split("#")[0] == k))
    return {"judged": duration >= SHORT, "warm_up_s": round(warm),
            "judged_life_s": round(least), "processes": out, "unjudged_kinds": unjudged}


def downsample(samples: list[tuple[float, int, int, int]], every: float = SERIES_EVERY) -> list:
    """One sample each `every` seconds (the first of each span, and the last of all):
    [s, RSS MiB, anonymous MiB, open files]."""
    kept, next_at = [], float("-inf")
    for i, (t, rss, fds, anon) in enumerate(samples):
        if t >= next_at or i == len(samples) - 1:
            kept.append([round(t), _mib(rss), _mib(anon), fds])
            next_at = t + every
    return kept


def _mib(n: float) -> float:
    return round(n / 2**20, 1)


def latencies(ops: list[tuple[str, float, float]], quiet: list[tuple[float, float]],
              windows: list[tuple[float, float]], t0: float, *, judged: bool) -> dict:
    """p50 (ms) of each timed op in the quiet windows (the normal load alone: no abuser,
    no fault; the first before anything else, then one every few minutes, so the baseline
    grows with the data as the load does) and under load outside fault windows, and
    their ratio. `judged`: the run is long enough for the ratio to be a verdict (a short
    run's quiet baseline is seconds long, on a machine whose other work it does not
    control: its ratio is shown, not judged)."""
    def within(t: float, spans: list[tuple[float, float]]) -> bool:
        return any(a <= t <= b for a, b in spans)
    base, loaded = defaultdict(list), defaultdict(list)
    for name, sent, seconds in ops:
        t = sent - t0
        if within(t, quiet):
            base[name].append(seconds)
        elif not within(t, windows):
            loaded[name].append(seconds)
    quiet = base
    rows = {"all": _row([s for n in TIMED for s in quiet[n]],
                        [s for n in TIMED for s in loaded[n]])}
    for name in TIMED:
        rows[name] = _row(quiet[name], loaded[name])
    # The principal's p50 is over all its timed calls; each op's is shown beside it (an
    # encoding is an expensive call: it is paced, by design, while cheap calls are served).
    return {"ops": rows, "ratio": rows["all"]["ratio"], "judged": judged}


def _row(quiet: list[float], loaded: list[float]) -> dict:
    q, l_ = p50(quiet), p50(loaded)
    return {"quiet_p50_ms": round(q * 1000, 1) if q else None,
            "p50_ms": round(l_ * 1000, 1) if l_ else None,
            "ratio": round(l_ / q, 2) if q and l_ else None,
            "quiet_n": len(quiet), "n": len(loaded)}


def recoveries(runs: list) -> dict:
    by_kind = defaultdict(list)
    for r in runs:
        by_kind[r.kind].append(r)
    out = {}
    for kind, rs in sorted(by_kind.items()):
        times = [r.recovery() for r in rs if r.recovery() is not None]
        out[kind] = {"faults": len(rs), "recovered": len(times),
                     "p50_s": round(p50(times), 2) if times else None,
                     "max_s": round(max(times), 2) if times else None,
                     "errors": [r.error for r in rs if r.error][:3]}
    return out


def verdict(report: dict) -> list[str]:
    """What failed (empty: SOAK-01 holds for this run)."""
    failed = []
    h = report["history"]
    if h["lost"] or h["duplicated"] or h["problems"]:
        failed.append(f"history: {h['lost']} lost, {h['duplicated']} duplicated, "
                      f"{len(h['problems'])} problems")
    if h["unsettled"]:
        failed.append(f"{h['unsettled']} writes never settled")
    if not all(report["audits"].values()):
        failed.append("audits: " + ", ".join(c for c, ok in report["audits"].items() if not ok))
    if report["ledger_audits"].get("mismatch"):
        failed.append(f"{report['ledger_audits']['mismatch']} audits during the run mismatched")
    if report["internal"]["count"]:
        failed.append(f"{report['internal']['count']} INTERNAL")
    if report["read_your_writes"].get("missed"):
        failed.append(f"{report['read_your_writes']['missed']} read-your-writes searches missed")
    if report["resources"]["judged"]:
        grew = [n for n, p in report["resources"]["processes"].items()
                if p["judged"] and not p["flat"]]
        if grew:
            failed.append(f"memory or open files grew: {', '.join(grew)}")
    ratio = report["latency"]["ratio"]
    if report["latency"]["judged"] and ratio is not None and ratio > P50_RATIO:
        failed.append(f"p50 outside fault windows {ratio:.1f}x the quiet one")
    unrecovered = [k for k, r in report["recovery"].items() if r["recovered"] < r["faults"]]
    if unrecovered:
        failed.append(f"no write after: {', '.join(unrecovered)}")
    return failed


def table(report: dict) -> str:
    lines = [f"soak {report['topology']}  seed {report['seed']}  "
             f"{report['minutes']:g} min  faults every {report['fault_every_s']:g} s",
             f"  acknowledged writes {report['history']['acknowledged']}, lost "
             f"{report['history']['lost']}, duplicated {report['history']['duplicated']}, "
             f"refused {report['history']['refused']}, resent {report['resends']}; "
             f"history problems {len(report['history']['problems'])} (stale writes "
             f"{len(report['history']['problems'])}; fenced or ownership refusals "
             f"{sum(report['errors'].get(r, 0) for r in FENCING)})",
             f"  audits match {sum(report['audits'].values())}/{len(report['audits'])}; "
             f"INTERNAL {report['internal']['count']}; read-your-writes found "
             f"{report['read_your_writes'].get('found', 0)}, missed "
             f"{report['read_your_writes'].get('missed', 0)}",
             "  fault kind              n  recovered  p50 s   max s"]
    for kind, r in report["recovery"].items():
        lines.append(f"  {kind:<22} {r['faults']:>2}  {r['recovered']:>9}  "
                     f"{_f(r['p50_s']):>6}  {_f(r['max_s']):>6}")
    lines.append("  op        quiet p50 ms  p50 ms  ratio"
                 f"{'' if report['latency']['judged'] else '  (run too short to judge)'}")
    for name, r in report["latency"]["ops"].items():
        lines.append(f"  {name:<9} {_f(r['quiet_p50_ms']):>12}  {_f(r['p50_ms']):>6}  "
                     f"{_f(r['ratio']):>5}")
    res = report["resources"]
    lines.append(f"  memory and open files, each process from {res['warm_up_s']} s after "
                 f"its birth if it lived {res['judged_life_s']} s more"
                 f"{'' if res['judged'] else ' (run too short to judge)'}:")
    lines.append("  process          life s       judged s     anonymous MiB"
                 "            (RSS MiB)        fds")
    for name, p in res["processes"].items():
        life = f"{p['born_s']:>5}-{p['last_s']:<5}"
        if not p["judged"]:
            lines.append(f"  {name:<16} {life}  not judged (too short a life)")
            continue
        lines.append(f"  {name:<16} {life} {p['judged'][0]:>5}-{p['judged'][1]:<5}  "
                     f"{p['anon_mib'][0]:>6} -> {p['anon_mib'][1]:>6} "
                     f"({p['anon_growth']:+.1%})  ({p['rss_mib'][0]:>6} -> "
                     f"{p['rss_mib'][1]:>6})  {p['fds'][0]:>4} -> {p['fds'][1]:>4}")
    if res["unjudged_kinds"]:
        lines.append(f"  no incarnation judged: {', '.join(res['unjudged_kinds'])}")
    for kind, why in report["not_injected"].items():
        lines.append(f"  not injected: {kind}: {why}")
    lines.append("  " + ("PASS" if not report["failed"] else "FAIL: " + "; ".join(
        report["failed"])))
    return "\n".join(lines)


def _f(v) -> str:
    return "-" if v is None else f"{v:g}" if isinstance(v, int) else f"{v:.2f}"
