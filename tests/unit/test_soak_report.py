"""SOAK-01's memory and open-files judgment (scripts/soaking/report.py): each process
incarnation is judged after its own warm-up, from its birth, and only if it lives long
enough after it; the series stays in the report."""
from __future__ import annotations

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("soak_report",
                                               ROOT / "scripts" / "soaking" / "report.py")
R = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(R)

MIB = 1 << 20
HOUR = 3600.0


def life(born: float, end: float, anon_at, fds_at=lambda t: 40, files_at=lambda t: 60) -> list:
    """Samples every 10 s from `born` to `end`: (s, RSS bytes, open files, anonymous RSS
    bytes); RSS is the anonymous part and `files_at` MiB of mapped files."""
    return [(t, int((anon_at(t) + files_at(t)) * MIB), fds_at(t), int(anon_at(t) * MIB))
            for t in [born + 10 * k for k in range(int((end - born) // 10) + 1)]]


def warming(born: float, start_mib: float, top_mib: float):
    """RSS that climbs for the first WARM_UP seconds of a life, then stays."""
    return lambda t: start_mib + (top_mib - start_mib) * min(1.0, (t - born) / R.WARM_UP)


def test_soak_01_a_restarted_process_is_judged_after_its_own_warm_up():
    # Born at 20 min, warming up to twice its size over 10 minutes, then flat for 20.
    series = {"transaction#2": life(1200, 3000, warming(1200, 115, 230))}
    res = R.flatness(series, {"transaction#2": 1200.0}, HOUR)
    p = res["processes"]["transaction#2"]
    assert p["judged"][0] >= 1200 + R.WARM_UP, p["judged"]
    assert p["flat"] and abs(p["anon_growth"]) < 0.01, p
    assert p["born_s"] == 1200 and p["last_s"] == 3000
    assert res["unjudged_kinds"] == []


def test_soak_01_growth_after_the_warm_up_fails_the_run():
    grows = lambda t: 100 + 40 * t / HOUR  # noqa: E731 - leaks the whole hour
    series = {"server#1": life(-5, HOUR, grows)}
    res = R.flatness(series, {"server#1": -5.0}, HOUR)
    assert res["processes"]["server#1"]["judged"] and not res["processes"]["server#1"]["flat"]
    assert "server#1" in " ".join(R.verdict(_report(res)))


def test_soak_01_a_short_life_is_not_judged_and_its_kind_is_named():
    # Killed 12 minutes after its birth: its warm-up leaves 2 minutes, under JUDGED_LIFE.
    series = {"encoding#1": life(-5, 700, lambda t: 190 + t / 10),
              "encoding#2": life(700, 1420, lambda t: 150 + t / 10),
              "etcd#1": life(-5, HOUR, lambda t: 60)}
    births = {"encoding#1": -5.0, "encoding#2": 700.0, "etcd#1": -5.0}
    res = R.flatness(series, births, HOUR)
    assert res["processes"]["encoding#2"]["judged"] is None
    assert res["processes"]["etcd#1"]["flat"]
    assert res["unjudged_kinds"] == ["encoding"]
    assert R.verdict(_report(res)) == []  # what was not judged does not fail the run


def test_soak_01_open_files_may_come_and_go_by_a_few():
    fds = lambda t: 20 + (4 if t > 2400 else 0)  # noqa: E731 - 20% more, but only 4
    res = R.flatness({"storage#1": life(-5, HOUR, lambda t: 160, fds)},
                     {"storage#1": -5.0}, HOUR)
    assert res["processes"]["storage#1"]["flat"]
    res = R.flatness({"storage#1": life(-5, HOUR, lambda t: 160, lambda t: 20 + t // 300)},
                     {"storage#1": -5.0}, HOUR)
    assert not res["processes"]["storage#1"]["flat"]


def test_soak_01_mapped_files_growing_with_the_data_are_not_the_processs_memory():
    # LMDB's data file, mapped (on tmpfs in the soak): 100 -> 400 MiB of RSS over the hour
    # while what the server allocated stays.
    series = {"server#1": life(-5, HOUR, lambda t: 200, files_at=lambda t: 100 + t / 12)}
    p = R.flatness(series, {"server#1": -5.0}, HOUR)["processes"]["server#1"]
    assert p["flat"] and p["rss_growth"] > 0.5 and p["anon_growth"] == 0.0, p


def test_soak_01_the_report_keeps_each_life_a_point_a_minute():
    samples = life(-5, HOUR, lambda t: 100 + t / 100)
    res = R.flatness({"server#1": samples}, {"server#1": -5.0}, HOUR)
    series = res["processes"]["server#1"]["series"]
    assert 60 <= len(series) <= 62
    assert series[0] == [-5, 159.9, 99.9, 40] and series[-1][0] == round(samples[-1][0])
    assert all(60 <= b[0] - a[0] <= 70 for a, b in zip(series, series[1:-1]))


def _report(resources: dict) -> dict:
    """The rest of a report that passes, around `resources`."""
    return {"history": {"lost": 0, "duplicated": 0, "problems": [], "unsettled": 0},
            "audits": {"c": True}, "ledger_audits": {}, "internal": {"count": 0},
            "read_your_writes": {"found": 1}, "resources": resources,
            "latency": {"ratio": 1.0, "judged": True}, "recovery": {}}


def _faults_module():
    import sys
    sys.path.insert(0, str(ROOT / "scripts" / "soaking"))
    spec = importlib.util.spec_from_file_location("soak_faults",
                                                  ROOT / "scripts" / "soaking" / "faults.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_soak_01_the_first_half_of_a_long_soak_kills_no_process_then_every_kind_comes():
    import random
    F = _faults_module()
    kinds = ["kill:server", "pause:server", "disk-full", "net-slow"]
    schedule = F.Schedule(kinds, random.Random(7), spared=1800.0)
    early = [schedule.next(t) for t in range(90, 1800, 60)]
    late = [schedule.next(t) for t in range(1800, 3580, 60)]
    assert not any(k.startswith("kill:") for k in early)
    assert set(early) == {"pause:server", "disk-full", "net-slow"}
    assert set(late[:4]) == set(kinds)  # a fresh cycle of every kind from the first late one
    assert late.count("kill:server") >= len(late) // 4
    # A short soak (CI's) spares nothing: every kind within each cycle from the start.
    short = F.Schedule(kinds, random.Random(7))
    assert set(short.next(t) for t in range(4)) == set(kinds)
