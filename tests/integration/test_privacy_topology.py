"""An erasure through the session's servers, in whichever topology they run (all in one
process, or storage, transaction, recall and encoding apart; on LMDB or, in CI's split
pass, on PostgreSQL): the transaction service erases and has storage rewrite its files
(the Reclaim RPC where storage is remote); recall, following the feed in its own
process, drops the erased words and rewrites its index (PRIV-01..03)."""
from __future__ import annotations

from morphz.services.recall.client import RecallClient
from morphz.services.transaction.core.erase_select import Selector
from morphz.shared.grpc.auth import PLAINTEXT
from tests.polling import until


def test_priv_01_03_an_erasure_reaches_storage_and_recall_in_any_topology(endpoints, mind):
    gone = mind.event("the courier code is MARZIPAN-3310", session="s1")
    kept = mind.event("the weather is mild", session="s2")
    mind.tx(f"(derive courier (from {gone['ref']}) (code MARZIPAN-3310))")
    channel = PLAINTEXT.channel(endpoints.recall)
    recall = RecallClient(channel, timeout=60)
    until(lambda: recall.search(mind.context, "marzipan")["results"], 120,
          "the index holds the words")
    done = mind.client.erase(mind.context, Selector(session="s1"), "asked")
    assert done["events"] == [gone["ref"]] and done["frames"] == ["courier"]
    assert done["reclaimed"]["engine"] in ("lmdb", "postgres")
    erasure = done["erasures"][0]
    assert mind.client.get_event(mind.context, gone["ref"])["text"] == f"[erased {erasure}]"
    assert mind.frame("courier")["body"] == f"[erased {erasure}]"
    assert mind.client.get_event(mind.context, kept["ref"])["text"] == "the weather is mild"
    report = mind.client.audit(mind.context)
    assert report["match"] and report["chain"]["erased"] == 2, report
    until(lambda: not recall.inspect(mind.context)["erasure_pending"]
          and recall.inspect(mind.context)["position"] >= done["commit_seq"], 120,
          "recall rewrote its index")
    assert not recall.search(mind.context, "marzipan", mode="lexical")["results"]
    assert recall.search(mind.context, "weather mild")["results"]
    channel.close()
