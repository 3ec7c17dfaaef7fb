"""Erasure end to end on LMDB (issue 55; docs/privacy.md): a phrase planted in a session's
events, in a frame derived from them (with a secret part), in a secret event and in an
encoding, erased by session with `morphz context erase`, is then found nowhere: no RPC,
the CLI, the server's log, the recall index's and vector files, the store's data file, a
backup taken afterwards. Audit reports `match` with the count erased, a projection
rebuild changes nothing, and everything else is unchanged byte for byte."""
from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest
import tantivy

from morphz.services.encoding.client import EncodingClient
from morphz.services.recall.client import RecallClient
from morphz.services.recall.index.tantivy_docs import SCHEMA
from morphz.services.transaction.core.erase_select import Selector
from tests.inspector import InspectorProcess
from tests.integration.test_cli import run_cli
from tests.pg import new_database
from tests.topology import ServerProcess
from tests.polling import until

PHRASE = "QUINCE-4471-ORCHARD"  # one token for the index, and easy to find as bytes
# The phrase, and each of its words as an index would hold it. The number is looked for
# only where no hex digit touches it: hex ids and digests hold "4471" by chance (a
# restored store failed the probe on the number alone, its phrase and words gone, in
# one run of six here and once in CI).
NEEDLES = (PHRASE.encode(), PHRASE.lower().encode(),
           re.compile(rb"(?<![0-9a-fA-F])4471(?![0-9a-fA-F])"), b"orchard", b"ORCHARD")
CTX, OTHER = "priv", "bystander"
# Each test starts servers of its own: the same under either --topology (run once).
pytestmark = pytest.mark.split_processes


def plant(c, enc: EncodingClient) -> dict:
    """The phrase in session s1's events (one secret), a frame derived from them with a
    secret part, a checkpoint, an encoding of s1; session s2 and context OTHER hold
    other text (the phrase's neighbours must survive)."""
    c.create_context(CTX)
    c.create_context(OTHER)
    c.append_event(OTHER, "s1", "user-message", "the bystander's own words stay")
    a = c.append_event(CTX, "s1", "user-message", f"my order code is {PHRASE}, call me")
    b = c.append_event(CTX, "s1", "external", f"vault note {PHRASE}", secret=True)
    keep = c.append_event(CTX, "s2", "user-message", "session two talks about the weather")
    act = c.activate(CTX, "s1")
    c.commit(CTX, f"""(context-tx (base-version 0) (reason "remember the order")
      (derive order (from {a['ref']} {b['ref']}) (code "{PHRASE}") (secret pin "{PHRASE}")))""",
             session="s1", activation=act["id"])
    c.commit(CTX, f"""(context-tx (base-version 1) (derive weather (from {keep['ref']})
      (sky clear)) (relate order about weather) (checkpoint before-erasure))""")
    snapshot = enc.compile(CTX, "s1", budget_bytes=65536)
    return {"a": a, "b": b, "keep": keep, "snapshot": snapshot}


def files_holding(root: Path, needles=NEEDLES) -> list[str]:
    """Every file under `root` whose bytes hold one of the needles."""
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path.relative_to(root)}: {n!r}" for n in needles
                      if (n.search(data) if isinstance(n, re.Pattern) else n in data)]
    return found


def index_terms(data: Path) -> list[str]:
    """The phrase's words in the term dictionary of any recall index generation in the
    data folder (tantivy compresses its term dictionary: a byte search misses them; a
    document deleted but not merged away keeps its terms there)."""
    found = []
    for meta in (data / "recall").rglob("meta.json"):
        searcher = tantivy.Index(SCHEMA, path=str(meta.parent), reuse=True).searcher()
        found += [f"{meta.parent.relative_to(data)}: {t}" for word in ("quince", "orchard")
                  for t in searcher.terms_with_prefix("terms", word)]
    return found


def inspector_pages(srv, tmp_path: Path, snapshot: str) -> str:
    """What `morphz ui` answers for the context's views (revealing secrets where a
    view can), as one text."""
    ui = InspectorProcess(["--server", srv.address], tmp_path / "ui.log")
    try:
        out = []
        for view, q in (("context", "audit=1"), ("mind", "reveal=1"),
                        ("frame", "id=order&reveal=1"), ("frame", "id=order&revision=1"),
                        ("timeline", "reveal=1"), ("search", "q=" + PHRASE),
                        ("search", "q=order+code"), ("encoding", f"snapshot={snapshot}"),
                        ("activations", ""), ("diff", "from=1&to=2&reveal=1")):
            with urllib.request.urlopen(f"{ui.url}/api/{view}?context={CTX}&{q}") as r:
                out.append(r.read().decode())
        return "\n".join(out)
    finally:
        ui.stop()


def cli(srv, *args: str) -> tuple[int, dict]:
    proc = run_cli("context", *args, "--format=json", address=srv.address, timeout=120)
    return proc.returncode, json.loads(proc.stdout)


def test_priv_01_02_03_erasing_a_session_leaves_the_phrase_nowhere(server_process, tmp_path):
    srv = server_process({"MORPHZ_EMBEDDER": "hashing"}).start()
    c = srv.client()
    with srv.channel() as ch:
        enc = EncodingClient(ch, timeout=60)
        recall = RecallClient(ch, timeout=60)
        planted = plant(c, enc)
        assert PHRASE in enc.replay(CTX, planted["snapshot"]["snapshot"])["text"]
        until(lambda: recall.search(CTX, PHRASE)["results"], 30, "the index holds the phrase")
        other_before = _rows(srv, c, OTHER)
        assert files_holding(Path(srv.data_dir) / "store") and \
            index_terms(Path(srv.data_dir)), "the test's probes find the phrase before"

        code, dry = cli(srv, "erase", CTX, "--session", "s1", "--dry-run")
        assert code == 0 and dry["dry_run"] and not dry["erasures"], dry
        assert dry["events"] == [planted["a"]["ref"], planted["b"]["ref"]]
        assert dry["frames"] == ["order"] and dry["checkpoints"] == ["before-erasure"]
        assert dry["snapshots"] == [planted["snapshot"]["snapshot"]]
        code, refused = cli(srv, "erase", CTX, "--session", "s1")
        assert code == 1 and refused["error"]["details"]["field"] == "reason"

        code, done = cli(srv, "erase", CTX, "--session", "s1", "--reason", "user asked")
        assert code == 0 and done["erasures"] and done["recall"]["purged"], done
        assert done["events"] == dry["events"] and done["reclaimed"]["engine"] == "lmdb"

        report = c.audit(CTX)
        assert report["match"] and report["chain"]["erased"] == 3, report  # 2 events, 1 tx
        assert c.rebuild_projections(CTX)["rewritten"] == {}
        ev = c.get_event(CTX, planted["a"]["ref"], reveal_secrets=True)
        erasure = done["erasures"][0]
        assert ev["text"] == f"[erased {erasure}]"
        assert ev["erased"] == {"erasure": erasure, "by": ev["erased"]["by"],
                                "reason": "user asked", "at": ev["erased"]["at"]}
        frame = c.get_frame(CTX, "order", reveal_secrets=True)
        assert frame["body"] == f"[erased {erasure}]" and frame["erased"]["erasure"] == erasure
        assert frame["relations"] and frame["sources"] == [planted["a"]["ref"],
                                                            planted["b"]["ref"]]
        assert c.get_frame(CTX, "weather")["body"] == "(sky clear)"
        seen = json.dumps([c.list_frames(CTX, reveal_secrets=True),
                           c.get_event(CTX, planted["b"]["ref"], reveal_secrets=True),
                           recall.search(CTX, PHRASE), recall.search(CTX, "order code"),
                           recall.read(CTX, planted["a"]["ref"]),
                           recall.traverse(CTX, "order"),
                           enc.compile(CTX, "s1", budget_bytes=65536),
                           enc.replay(CTX, planted["snapshot"]["snapshot"])])
        assert PHRASE not in seen and "4471" not in seen
        assert _rows(srv, c, OTHER) == other_before
        pages = inspector_pages(srv, tmp_path, planted["snapshot"]["snapshot"])
        assert PHRASE not in pages and "4471" not in pages and f"[erased {erasure}]" in pages
        # A replay of the encoding shows the erased state the projections hold, and says
        # why its text differs from the one frozen; the snapshot is no longer current.
        replay = enc.replay(CTX, planted["snapshot"]["snapshot"])
        assert not replay["match"] and f"@e1: erased by {erasure}" in replay["problems"]
        assert f"frame order: body erased by {erasure}" in replay["problems"]
        assert {(d["key"], d["reason"]) for d in replay["dependencies"]["changed"]} >= {
            ("@e1", "source_erased"), ("@e2", "source_erased"), ("order", "frame_erased")}
    c.close()
    assert srv.stop() == 0
    assert not files_holding(Path(srv.data_dir)), files_holding(Path(srv.data_dir))
    assert not index_terms(Path(srv.data_dir))
    assert PHRASE not in srv.stderr()


def _rows(srv, c, context: str) -> list:
    """Everything a reader gets of a context: its events and frames, as answered."""
    status = c.status(context)
    return [c.get_event(context, f"@e{i}", reveal_secrets=True)
            for i in range(status["event_count"])] + [c.list_frames(context)]


def test_priv_03_a_backup_taken_before_an_erasure_restored_after_does_not_bring_it_back(
        tmp_path):
    """The erasure log kept beside the store names what each erasure took (by record
    digest); `morphz restore` refuses without it (or an explicit --without-erasures), and
    with it applies those erasures again to what the older backup holds."""
    from tests.integration.test_backup import backup as backup_via_cli, restored
    srv = ServerProcess(tmp_path / "data", {"MORPHZ_EMBEDDER": "hashing"},
                        args=["--storage-listen", "127.0.0.1:0"]).start()
    try:
        c = srv.client()
        with srv.channel() as ch:
            planted = plant(c, EncodingClient(ch, timeout=60))
        backup = tmp_path / "before.backup"
        backup_via_cli(backup, srv.storage_address)
        done = c.erase(CTX, Selector(session="s1"), "user asked")
        c.close()
    finally:
        assert srv.stop() == 0
    log = tmp_path / "data" / "store" / "erasures.jsonl"
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(line["context"], [s for s, _ in line["events"]]) for line in lines] == [
        (CTX, [1, 2, 5])]  # the two events, and the transaction whose bodies it took
    proc = run_cli("restore", "--from", str(backup), "--data", str(tmp_path / "refused"))
    assert proc.returncode == 1 and json.loads(proc.stdout)["error"]["reason"] == \
        "ERASURE_LOG_REQUIRED"
    as_taken = restored(backup, tmp_path / "as-taken")
    assert files_holding(tmp_path / "as-taken") and as_taken["erasures_reapplied"] == []
    again = restored(backup, tmp_path / "restored", "--erasures", str(log))
    (reapplied,) = again["erasures_reapplied"]
    assert reapplied["events"] == done["events"] and reapplied["logged_commit"] == \
        lines[0]["commit_seq"]
    assert not files_holding(tmp_path / "restored"), files_holding(tmp_path / "restored")
    back = ServerProcess(tmp_path / "restored", {"MORPHZ_EMBEDDER": "hashing"}).start()
    try:
        c = back.client()
        report = c.audit(CTX)
        assert report["match"] and report["chain"]["erased"] == 3, report
        ev = c.get_event(CTX, planted["a"]["ref"], reveal_secrets=True)
        assert ev["text"] == f"[erased {reapplied['erasures'][0]}]"
        assert "re-applied after a restore" in ev["erased"]["reason"]
        assert c.get_frame(CTX, "order")["erased"]
        c.close()
    finally:
        assert back.stop() == 0
    kept = (tmp_path / "restored" / "store" / "erasures.jsonl").read_text().splitlines()
    assert kept[0] == log.read_text().splitlines()[0] and len(kept) == 2


def test_priv_03_on_postgresql_the_erased_rows_are_vacuumed_out_of_its_data_files(
        postgres_server, tmp_path):
    """A server on PostgreSQL: after the erasure no file of the database (its tables,
    their TOAST and indexes, as of a checkpoint) holds the phrase; before it they did."""
    database = new_database(postgres_server)
    srv = ServerProcess(tmp_path / "data", {"MORPHZ_EMBEDDER": "hashing"},
                        args=["--store", "postgres", "--dsn", postgres_server.dsn(database)])
    srv.start()
    try:
        c = srv.client()
        with srv.channel() as ch:
            plant(c, EncodingClient(ch, timeout=60))
        files = _database_files(postgres_server, database)
        postgres_server.psql("CHECKPOINT")
        assert files_holding(files, (PHRASE.encode(),)), "the probe finds it before"
        done = c.erase(CTX, Selector(session="s1"), "user asked")
        assert done["reclaimed"]["engine"] == "postgres"
        assert c.audit(CTX)["match"]
        c.close()
    finally:
        assert srv.stop() == 0
    postgres_server.psql("CHECKPOINT")
    assert not files_holding(_database_files(postgres_server, database), (PHRASE.encode(),))
    assert (tmp_path / "data" / "erasures.jsonl").read_text().count(CTX) == 1


def _database_files(server, database: str) -> Path:
    """The folder of the database's relation files."""
    oid = server.psql(f"SELECT oid FROM pg_database WHERE datname = '{database}'").strip()
    return Path(server.data_dir) / "base" / oid
