"""AUDIT-01: audit replays the events and reports a tampered projection, never repairs it."""
from __future__ import annotations

import json

import grpc

from morphz.shared.storage.api import Write
from morphz.services.storage.client import StorageClient


def test_audit_01_replay_matches_then_reports_tampering(mind, endpoints):
    mind.tx("(create release (goal ship-v1) (stage waiting-tests)) (create other (x))")
    ev = mind.event("report", kind="tool-result")
    mind.activate()
    mind.tx(f"(derive test-result (from {ev['ref']}) (tests passed)) "
            f"(relate test-result supports release) (retire {ev['ref']} other)", reason="r")
    report = mind.client.audit(mind.context)
    assert report["match"] and report["events_replayed"] == mind.status()["event_count"]
    assert all(p["match"] for p in report["projections"])

    channel = grpc.insecure_channel(endpoints.storage)
    storage = StorageClient(channel)
    with storage.reader(mind.context) as r:
        seq = r.commit_seq
        frame = json.loads(r.get("frames", ("release",)))
    frame["body"] = "(goal ship-v1) (stage shipped)"
    storage.commit(mind.context, seq, [Write("frames", ("release",), json.dumps(frame).encode())])
    channel.close()

    report = mind.client.audit(mind.context)
    assert not report["match"]
    bad = {p["projection"]: p for p in report["projections"] if not p["match"]}
    assert list(bad) == ["frames"] and bad["frames"]["differences"] == ["release: differs"]
    # Reported, not silently repaired.
    assert mind.frame("release")["body"] == "(goal ship-v1) (stage shipped)"
    assert not mind.client.audit(mind.context)["match"]
