"""morphz.client's occurred_at and append_events (RECALL-11) against a real server on
loopback: the field travels, a time without an offset is refused, a batch sent again
applies nothing twice."""
from __future__ import annotations

import pytest

from morphz.client import InvalidInputError


def test_recall_11_python_client_appends_and_reads_the_occurred_time(mz, cx):
    r = mz.append_event(cx, session="s1", kind="user-message", text="imported",
                        occurred_at="2019-03-01T09:30:00+08:00")
    ev = mz.event(cx, r.ref)
    assert ev.occurred_at == "2019-03-01T09:30:00.000000+08:00" and ev.time != ev.occurred_at
    with pytest.raises(InvalidInputError) as info:
        mz.append_event(cx, session="s1", kind="user-message", text="naive",
                        occurred_at="2019-03-01T09:30:00")
    assert info.value.reason == "CONTEXT_INPUT_INVALID"
    assert info.value.details["field"] == "occurred_at"


def test_recall_11_python_client_batch_applies_each_event_once(mz, cx):
    events = [{"session": "s1", "kind": "user-message", "text": f"line {i}",
               "occurred_at": f"2019-03-01T09:3{i}:00Z", "request_id": f"batch-line-{i}"}
              for i in range(3)]
    first = mz.append_events(cx, events)
    assert [e.replayed for e in first.events] == [False] * 3
    again = mz.append_events(cx, events + [dict(events[0], text="line 3",
                                                request_id="batch-line-3")])
    assert [e.replayed for e in again.events] == [True, True, True, False]
    assert [e.ref for e in again.events][:3] == [e.ref for e in first.events]
    assert mz.status(cx).event_count == 1 + 4
