"""DUR-07, the space alarm on its own (services/storage/space.py): a refusal names what
is left, the log says so once per interval however many writes are refused, and the
alarm stays until twice the reserve is free (no flapping at the brim)."""
from __future__ import annotations

import logging

import pytest

from morphz.services.storage.space import Space
from morphz.shared.errors import MorphzError

MiB = 1 << 20


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_dur_07_refusals_are_logged_once_per_interval_and_the_alarm_has_hysteresis(
        tmp_path, caplog):
    clock, heard = Clock(), []
    space = Space(str(tmp_path), quota=16 * MiB, reserve=MiB, log_interval=60, clock=clock)
    space.listen(heard.append)
    caplog.set_level(logging.WARNING, logger="morphz.storage")
    space.check(10 * MiB, 14 * MiB, adds=True)  # within quota - reserve: let through
    for _ in range(1000):
        with pytest.raises(MorphzError) as info:
            space.check(14 * MiB, 16 * MiB, adds=True)  # past quota - reserve
    assert info.value.reason == "STORAGE_FULL" and info.value.details["cause"] == "quota"
    assert info.value.details["free_bytes"] == MiB  # 16 - 1 (reserve) - 14
    assert len(caplog.records) == 1  # raised: one line, not a thousand
    clock.now += 61
    with pytest.raises(MorphzError):
        space.check(14 * MiB, 14 * MiB + 4096, adds=True)
    assert len(caplog.records) == 2 and "1000 write transaction(s)" in caplog.records[1].message
    # Writes that add nothing (deletions) use the reserve, and do not clear the alarm.
    space.check(14 * MiB, 15 * MiB + 512 * 1024, adds=False)
    space.committed(adds=False)
    assert space.alarm is not None
    # Room below quota - reserve, but not twice the reserve: refused while the alarm is up.
    with pytest.raises(MorphzError):
        space.check(14 * MiB - 2048, 14 * MiB + 2048, adds=True)
    space.check(12 * MiB, 12 * MiB + 4096, adds=True)  # twice the reserve free: let through
    space.committed(adds=True)
    assert space.alarm is None and [a is None for a in heard] == [True, False, True]
    assert "resumed" in caplog.records[-1].message
