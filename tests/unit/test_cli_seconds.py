"""SEC-03: the CLI's seconds flags refuse bad values without echoing them back whole."""
from __future__ import annotations

import pytest

from morphz.services.cli.main import build_parser

LONG = "9x" * 500


@pytest.mark.parametrize("argv", [
    ["context", "status", "c", "--timeout", LONG],
    ["serve", "--recall-idle", LONG],
    ["serve", "--recall-idle", "-1"],
    ["serve", "--recall-idle", "nan"],
    ["serve", "--recall-idle", "86401"],
], ids=["timeout-not-a-number", "idle-not-a-number", "idle-negative", "idle-nan",
        "idle-past-a-day"])
def test_sec_03_a_bad_seconds_flag_is_refused_with_a_short_echo(argv, capsys):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert argv[-1][:40] in err and len(err) < 200


def test_sec_03_recall_idle_takes_zero_to_a_day():
    assert build_parser().parse_args(["serve", "--recall-idle", "0"]).recall_idle == 0
    assert build_parser().parse_args(["serve"]).recall_idle == 30
    assert build_parser().parse_args(["serve", "--recall-idle", "86400"]).recall_idle == 86400
