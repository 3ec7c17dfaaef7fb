"""morphz-conformance: run the kit against a target, verify a report, make a key pair.

    morphz-conformance run --profile SC-Concurrent --target 127.0.0.1:7070 \\
        [--start-cmd CMD] [--stop-cmd CMD] [--kill-cmd CMD] --report FILE [--sign KEY]
    morphz-conformance verify FILE --key PUB
    morphz-conformance keygen --private KEY --public PUB
    morphz-conformance list [--profile P] [--text]

`run` exits 0 when every case it ran passed, 1 when one failed or could not run. Usage
errors and failures of the kit itself print {"error": {...}} as JSON and exit 2.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Optional

from morphz_conformance import __version__
from morphz_conformance.mapping import (CONDITIONS, EXTENSIONS, PROFILES, REQUIREMENTS, included,
                                       statements)


def _error(reason: str, message: str, code: int = 2) -> int:
    print(json.dumps({"error": {"reason": reason, "message": message}}), file=sys.stderr)
    return code


def _parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="morphz-conformance", description=__doc__.splitlines()[0])
    top.add_argument("--version", action="version", version=__version__)
    sub = top.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a profile's cases against a target")
    run.add_argument("--profile", required=True, choices=PROFILES + EXTENSIONS)
    run.add_argument("--extension", action="append", default=[], choices=EXTENSIONS,
                     help="also run an extension's cases (repeatable)")
    run.add_argument("--target", required=True, metavar="HOST:PORT")
    run.add_argument("--encoding-target", default="", metavar="HOST:PORT",
                     help="the encoding service, where it is not at --target")
    run.add_argument("--recall-target", default="", metavar="HOST:PORT",
                     help="the recall service, where it is not at --target")
    run.add_argument("--lease-stop-cmd", default="", help="SC-Distributed: command that makes "
                     "the lease service (etcd) unreachable, e.g. pauses it")
    run.add_argument("--lease-start-cmd", default="", help="SC-Distributed: command that "
                     "makes it reachable again")
    run.add_argument("--second-target", default="", metavar="HOST:PORT",
                     help="SC-Distributed: a second transaction instance over the same store")
    run.add_argument("--storage-shard", action="append", default=[], metavar="NAME=HOST:PORT",
                     help="where contexts are placed on several stores: the storage API "
                     "serving shard NAME (a context's status names its shard); the storage "
                     "hooks go there (repeatable)")
    run.add_argument("--second-recall-target", default="", metavar="HOST:PORT",
                     help="DIST-06: a second recall replica following the same change feed")
    run.add_argument("--second-recall-kill-cmd", default="", help="DIST-06: command that "
                     "SIGKILLs the second recall replica")
    run.add_argument("--second-recall-start-cmd", default="", help="DIST-06: command that "
                     "starts it again on its data (and returns, or keeps running)")
    run.add_argument("--otlp-receiver", default="", metavar="HOST:PORT",
                     help="DIST-07: the kit receives spans over OTLP/gRPC here; start the "
                     "target's processes exporting to it (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="
                     "http://HOST:PORT)")
    run.add_argument("--storage-target", default="", metavar="HOST:PORT",
                     help="Morphz's internal storage API (serve --storage-listen): lets "
                     "AUDIT-01 tamper with a stored frame (else that case is not applicable)")
    run.add_argument("--start-cmd", default="", help="command that starts the target (the "
                     "kit runs it at the start and whenever a case restarts the target); "
                     "with --stop-cmd and --kill-cmd it must start the target in the "
                     "background and return (the kit waits for it to end)")
    run.add_argument("--stop-cmd", default="", help="command that stops the target "
                     "(default with --start-cmd: SIGTERM to the process the kit started)")
    run.add_argument("--kill-cmd", default="", help="command that SIGKILLs the target "
                     "(default with --start-cmd: SIGKILL to the process the kit started)")
    run.add_argument("--small-store-start-cmd", default="", help="DUR-07: command that "
                     "starts the target with little storage space (e.g. a small quota); the "
                     "case fills it, then restarts the target with --start-cmd")
    run.add_argument("--other-embedder-start-cmd", default="", help="HYB-02: command that "
                     "starts the target on its data embedding with another embedder")
    run.add_argument("--default-embedder-start-cmd", default="", help="HYB-04/05: command "
                     "that starts the target on its data with its default embedder")
    run.add_argument("--mcp-cmd", default="", help="MCP extension: command that starts the "
                     "implementation's MCP server over stdio, reaching the target (the "
                     "caller's token in $MORPHZ_TOKEN); needs morphz-conformance[mcp]")
    run.add_argument("--inspector-url", default="", metavar="URL", help="UI extension: the "
                     "implementation's web inspector, reading the target (e.g. "
                     "http://127.0.0.1:7090)")
    run.add_argument("--inspector-token-file", default="", help="UI extension: the inspector "
                     "token acting as the kit's principal (none: the inspector's own)")
    run.add_argument("--inspector-second-token-file", default="", help="UI extension: the "
                     "inspector token of a principal holding no grant on the kit's contexts")
    run.add_argument("--older-rules-start-cmd", default="", help="DUR-05: command that "
                     "starts the target on its data deciding under an earlier rules version")
    run.add_argument("--backup-cmd", default="", help="DUR-06: command that takes an online "
                     "backup of the running target's store")
    run.add_argument("--restore-cmd", default="", help="DUR-06: command that, the target "
                     "stopped, replaces its data by that backup (then --start-cmd starts it)")
    run.add_argument("--promote-standby-cmd", default="", help="DUR-08: command that loses "
                     "the primary store and promotes a standby replica")
    run.add_argument("--not-offered", action="append", default=[], metavar="FEATURE",
                     choices=sorted(set(CONDITIONS.values())), help="declare that the implementation "
                     "does not offer FEATURE: the requirements that hold only with it are "
                     "reported not-offered, and the declaration is in the report")
    run.add_argument("--target-log", default="", help="where a target the kit starts writes "
                     "its output (default: discarded; PRIV-01 reads it)")
    run.add_argument("--target-data", default="", metavar="DIR", help="PRIV-03: the folder "
                     "the target keeps its data in on this machine (searched as bytes)")
    run.add_argument("--report", required=True, metavar="FILE")
    run.add_argument("--sign", default="", metavar="KEY", help="Ed25519 private key (PEM)")
    run.add_argument("--implementation", default="morphz", help="name in the report")
    run.add_argument("--implementation-version", default="", help="version in the report")
    run.add_argument("--token-file", default="", help="file holding a bearer token for the "
                     "target (read, sent, never written anywhere); or $MORPHZ_TOKEN")
    run.add_argument("--second-token-file", default="", help="SEC-01: a second principal's "
                     "bearer token (one holding no grant on the kit's contexts)")
    run.add_argument("--tls-ca", default="", help="PEM file of the CA to trust (TLS on)")
    run.add_argument("--timeout", type=float, default=30.0, help="each call's deadline (s)")
    run.add_argument("--only", action="append", default=[], metavar="ID|CASE",
                     help="run only these cases (the report is marked partial)")
    run.add_argument("--quiet", action="store_true", help="no progress lines")

    verify = sub.add_parser("verify", help="check a report's signature")
    verify.add_argument("file")
    verify.add_argument("--key", required=True, metavar="PUB", help="Ed25519 public key (PEM)")

    keygen = sub.add_parser("keygen", help="make an Ed25519 key pair (PEM, as openssl writes)")
    keygen.add_argument("--private", required=True, metavar="FILE")
    keygen.add_argument("--public", required=True, metavar="FILE")

    listing = sub.add_parser("list", help="the requirements and the kit's cases for them")
    listing.add_argument("--profile", choices=PROFILES + EXTENSIONS, default="")
    listing.add_argument("--text", action="store_true",
                         help="each requirement's text too (from the CONFORMANCE.md inside the kit)")
    return top


def main(argv: Optional[list[str]] = None) -> int:
    from morphz_conformance.control import ControlError
    args = _parser().parse_args(argv)
    try:
        return {"run": _run, "verify": _verify, "keygen": _keygen, "list": _list}[
            args.command](args)
    except ControlError as e:
        return _error("TARGET_CONTROL_FAILED", str(e))
    except (OSError, ValueError) as e:
        return _error("KIT_INPUT_INVALID", f"{type(e).__name__}: {e}")


def _run(args) -> int:
    from morphz_conformance.control import Commands
    from morphz_conformance.driver import Implementation
    from morphz_conformance.grpc_driver import GrpcDriver
    from morphz_conformance.registry import all_cases
    from morphz_conformance.report import dump, load_private, sign
    from morphz_conformance.runner import (FAIL, NOT_APPLICABLE, NOT_OFFERED, build_report,
                                           now, run, select, summary_table)

    private = load_private(args.sign) if args.sign else None  # fail before any case runs
    token = ""
    if args.token_file:
        with open(args.token_file, encoding="utf-8") as f:
            token = f.read().strip()
    token = token or os.environ.get("MORPHZ_TOKEN", "")
    second_token = ""
    if args.second_token_file:
        with open(args.second_token_file, encoding="utf-8") as f:
            second_token = f.read().strip()
    inspector_tokens = {}
    for who, path in (("self", args.inspector_token_file),
                      ("other", args.inspector_second_token_file)):
        if path:
            with open(path, encoding="utf-8") as f:
                inspector_tokens[who] = f.read().strip()
    secrets = {t for t in (token, second_token, *inspector_tokens.values()) if t}
    tls_ca = open(args.tls_ca, "rb").read() if args.tls_ca else None
    driver = GrpcDriver(args.target, encoding_target=args.encoding_target,
                        recall_target=args.recall_target,
                        storage_target=args.storage_target, token=token,
                        tls_ca=tls_ca, timeout=args.timeout,
                        commands=Commands(
                            start=args.start_cmd, stop=args.stop_cmd, kill=args.kill_cmd,
                            lease_stop=args.lease_stop_cmd, lease_start=args.lease_start_cmd,
                            start_small=args.small_store_start_cmd,
                            start_other_embedder=args.other_embedder_start_cmd,
                            start_default_embedder=args.default_embedder_start_cmd,
                            start_older_rules=args.older_rules_start_cmd,
                            backup=args.backup_cmd, restore=args.restore_cmd,
                            promote_standby=args.promote_standby_cmd,
                            second_recall_kill=args.second_recall_kill_cmd,
                            second_recall_start=args.second_recall_start_cmd),
                        target_log=args.target_log or None, second_target=args.second_target,
                        second_token=second_token, mcp_command=args.mcp_cmd,
                        inspector_url=args.inspector_url, inspector_tokens=inspector_tokens,
                        implementation=Implementation(args.implementation,
                                                      args.implementation_version),
                        storage_shards=_shards(args.storage_shard),
                        second_recall_target=args.second_recall_target,
                        otlp_receiver=args.otlp_receiver, data_dir=args.target_data)
    known = all_cases()
    case_ids = {c.id for c in known}
    cases = select(known, args.profile, args.extension, args.only)
    out = None if args.quiet else sys.stdout
    started, t0 = now(), time.monotonic()
    try:
        if args.start_cmd:
            driver.start()
        results = run(driver, cases, out, secrets, frozenset(args.not_offered))
    finally:
        driver.close()
    report = build_report(results, profile=args.profile, extensions=args.extension,
                          driver=driver, target=_public_target(args.target), started=started,
                          ms=int((time.monotonic() - t0) * 1000), partial=bool(args.only),
                          secrets=secrets, case_ids=case_ids,
                          not_offered=frozenset(args.not_offered))
    if private is not None:
        report = sign(report, private)
    with open(args.report, "w", encoding="utf-8") as f:
        f.write(dump(report))
    print(summary_table(results, included(args.profile), args.extension, case_ids))
    s = report["summary"]
    print(f"verdict: {report['verdict']}  ({s['pass']} passed, {s['fail']} failed, "
          f"{s[NOT_APPLICABLE]} not applicable, {s[NOT_OFFERED]} not offered, "
          f"{len(s['uncovered'])} ids without a case)"
          f"  report: {args.report}{' (signed)' if private else ''}")
    return 1 if any(r.outcome in (FAIL, NOT_APPLICABLE) for r in results) else 0


def _verify(args) -> int:
    from morphz_conformance.report import VerifyError, load_public, verify
    with open(args.file, encoding="utf-8") as f:
        try:
            report = json.load(f)
        except ValueError as e:
            return _error("REPORT_INVALID", f"not a JSON report: {e}", 1)
    try:
        verify(report, load_public(args.key))
    except VerifyError as e:
        return _error("SIGNATURE_INVALID", str(e), 1)
    print(json.dumps({"verified": True, "profile": report.get("profile"),
                      "verdict": report.get("verdict"),
                      "key_id": report["signature"]["key_id"]}))
    return 0


def _keygen(args) -> int:
    from morphz_conformance.report import keygen
    print(json.dumps({"private": args.private, "public": args.public,
                      "key_id": keygen(args.private, args.public)}))
    return 0


def _list(args) -> int:
    from morphz_conformance.registry import all_cases
    by_id: dict[str, list[str]] = {}
    for c in all_cases():
        by_id.setdefault(c.id, []).append(c.name)
    scope = included(args.profile) if args.profile else PROFILES + EXTENSIONS
    text = statements() if args.text else {}
    for rid, profile in REQUIREMENTS.items():
        if profile in scope:
            print(f"{rid:<10} {profile:<15} {', '.join(by_id.get(rid, [])) or '(case missing)'}")
            if rid in text:
                print(f"{'':<10} {text[rid]}")
    return 0


def _shards(pairs: list[str]) -> dict[str, str]:
    shards = {}
    for pair in pairs:
        name, sep, address = pair.partition("=")
        if not (sep and name and address):
            raise ValueError(f"--storage-shard {pair!r}: NAME=HOST:PORT")
        shards[name] = address
    return shards


def _public_target(target: str) -> str:
    """The target as a report may show it: no user:password@ part."""
    return target.rpartition("@")[2]


if __name__ == "__main__":
    sys.exit(main())
