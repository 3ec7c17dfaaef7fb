"""The services' reply converters (issue 56) build, field by field, the message the
generic walk they replaced built from a result's plain form (json_format.ParseDict of
the dict, None left unset): the same message and the same bytes, with each optional
field both present and absent. Hand-made results, one of each shape the replies hold."""
from __future__ import annotations

import pytest
from google.protobuf import json_format

from morphz.api.recall.v1 import recall_pb2 as rpb
from morphz.api.transaction.v1 import transaction_pb2 as tpb
from morphz.services.recall import convert as RC
from morphz.services.recall.core import results as RR
from morphz.services.transaction import convert as TC
from morphz.services.transaction.core import results as TR
from morphz.services.transaction.core.export import ExportedEvent, ExportPage
from morphz.shared.grpc.protojson import _drop_none

RETENTION = TR.RetentionView("(retention (kinds tool-result) (days 3))", ("tool-result",), 3,
                             "@e4", "2030-01-01T00:00:00+00:00", 3600)
ERASED = TR.ErasedNote("@e9", "alice", "gdpr", "2030-01-01T00:00:00+00:00")
RECLAIMED = TR.Reclaimed("lmdb", 4096, 1024, 12)
SESSION = TR.SessionStatus("s1", "active", "normal", 2, 1, 0)


def _frame(retire, erased):
    return TR.FrameResult("f", 3, "(body)", ("@e1",), "retiring", True, retire, 1, 7, False,
                          9, (TR.Relation("f", "supports", "g"),), erased)


def _event(**optional):
    return TR.EventResult(5, "id5", "user-message", "2030-01-01T00:00:00+00:00", "c", "s1",
                          "alice", ("@e1", "@e2"), "hello", "r1", False,
                          "2030-01-01T00:00:00+00:00", "@e5", "active", False, **optional)


def _index_status(feed, last_rebuild):
    vectors = RR.VectorLegStatus("hashing", 4, 384, 4, 2, "sha", 100, True, 9, 0, 3, 2, 1, 2,
                                 1, 12.5, 0.1)
    return RR.IndexStatus("c", 4, 3, 1, 20, 9, 9, 0, *feed, last_rebuild,
                          RR.RebuildProgress(False, 0, 0), 2048, "/idx", vectors, "hashing",
                          "", 0)


TRANSACTION = [
    (TC.status_to_proto, tpb.ContextStatus, TR.StatusResult(
        "c", 4, 2, 8, {"active": 3, "retired": 1}, (SESSION,), 12, 13, "s0")),
    (TC.status_to_proto, tpb.ContextStatus, TR.StatusResult(
        "c", 4, 2, 8, {}, (), 12, 13, "s0", "node-1", "10.0.0.1:7000", 6, RETENTION)),
    (TC.activation_to_proto, tpb.Activation, TR.ActivationResult(
        "a1", "s1", ("@e1",), "@e1", 3, True, ("f",), False, ())),
    (TC.frame_to_proto, tpb.Frame, _frame(None, None)),
    (TC.frame_to_proto, tpb.Frame, _frame(TR.RetireView(1, 2, 5, "done", 3, 2), ERASED)),
    (TC.frame_list_to_proto, tpb.FrameList, TR.FrameListResult(
        3, (_frame(None, None), _frame(None, ERASED)), "next")),
    (TC.event_to_proto, tpb.Event, _event()),
    (TC.event_to_proto, tpb.Event, _event(activation="a1", call="k1", target_session="s2",
                                          erased=ERASED)),
    (TC.event_to_proto, tpb.Event, _event(activation="")),  # present though empty
    (TC.audit_to_proto, tpb.AuditReport, TR.AuditResult(
        "c", False, 12, (TR.ProjectionCheck("frames", False, ("f differs",)),),
        TR.ChainCheck(True, 12, "", "", 1), "")),
    (TC.rebuild_to_proto, tpb.RebuildReport, TR.RebuildResult(
        "c", 12, {"frames": 3}, ("x",), ("y",))),
    (TC.policy_to_proto, tpb.Policy, TR.PolicyResult(
        "c", (TR.Grant("bob", "read", "*"),), "@e3")),
    (TC.policy_to_proto, tpb.Policy, TR.PolicyResult("c", (), "@e3", RETENTION)),
    (TC.erasure_to_proto, tpb.Erasure, TR.ErasureResult(
        "c", True, (), ("@e2",), ("@e3",), ("f",), ("f@2",), ("cp",), ("snap",))),
    (TC.erasure_to_proto, tpb.Erasure, TR.ErasureResult(
        "c", False, ("@e9",), ("@e2",), (), (), (), (), (), 14, RECLAIMED)),
    (TC.export_page_to_proto, tpb.ExportPage, ExportPage(
        (ExportedEvent("user-message", "s1", "alice", "hi", "2030-01-01T00:00:00+00:00",
                       False, False, "@e1"),), 1, 4, {"action": 3})),
    (TC.deleted_to_proto, tpb.ContextDeleted, TR.DeleteResult("c", 12)),
    (TC.deleted_to_proto, tpb.ContextDeleted, TR.DeleteResult("c", 12, RECLAIMED)),
    (TC.context_list_to_proto, tpb.ContextList, TR.ContextList(("a", "b"))),
    (TC.append_batch_to_proto, tpb.AppendEventsResponse, TR.AppendBatchResult((
        TR.AppendResult("@e1", 1, "i1"),
        TR.AppendResult("@e2", 2, "i2", session="s1", activation="", call="k",
                        commit_seq=7)))),
]

HIT = RR.Hit("event", "@e1", "i1", "active", 1.5, "t", "s1", "user-message", "hi", 0, "t",
             "occurred", None, 2)
RECALL = [
    (RC.search_to_proto, rpb.SearchResponse, RR.SearchResult((HIT,), "cur", 9, 0, 0, "")),
    (RC.search_to_proto, rpb.SearchResponse, RR.SearchResult(
        (), "", 9, 1, 1, "no_match", 8, 1, "@e10")),
    (RC.read_to_proto, rpb.ReadResponse, RR.ReadResult(
        "event", "@e1", "i1", "active", "t", "s1", "user-message", 0, None, 0, "hi", 2, 2,
        False)),
    (RC.read_to_proto, rpb.ReadResponse, RR.ReadResult(
        "event", "@e1", "i1", "active", "t", "s1", "user-message", 0, "t0", 0, "hi", 2, 2,
        False, "@e12")),
    (RC.traverse_to_proto, rpb.TraverseResponse, RR.TraverseResult(
        "f", "both", 2, "v1", (RR.Node(kind="frame", id="f", sources=("@e1",)),
                               RR.Node(kind="event", ref="@e1", missing=True)),
        (RR.Edge("source", "f", "@e1", ""),), 300, "")),
    (RC.status_to_proto, rpb.IndexStatus, _index_status((None, None, None, None), None)),
    (RC.status_to_proto, rpb.IndexStatus, _index_status(
        (5, 9, 4, 1), RR.RebuildInfo("2030-01-01T00:00:00+00:00", 30, 4))),
]


@pytest.mark.parametrize("convert, cls, result", TRANSACTION + RECALL,
                         ids=[f"{c.__name__}-{i}" for i, (c, _, _) in
                              enumerate(TRANSACTION + RECALL)])
def test_a_converter_builds_the_message_the_plain_walk_built(convert, cls, result):
    walked = json_format.ParseDict(_drop_none(result.plain()), cls())
    built = convert(result)
    assert built == walked
    assert built.SerializeToString() == walked.SerializeToString()
