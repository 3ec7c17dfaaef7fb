"""DIST-05 deployment manifests: deploy/compose.yaml and deploy/k8s/*.yaml cannot run here,
so they are parsed and every command, flag, port, address and image they name is checked
against what exists: `morphz serve ROLE --help`, the serve flags' own checks, the
Services and ports they define, deploy/Dockerfile and deploy/probe.py, and the roles and
flags scripts/cluster starts. Every exposed listener runs with mutual TLS from a secret."""
from __future__ import annotations

import functools
import importlib.util
import pathlib
import re
import subprocess
import sys

import pytest
import yaml

from morphz.services.cli.main import build_parser
from morphz.services.server.app import ServerConfig
from morphz.services.server.roles import check_addresses

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
IMAGE = "morphz:0.1.0"
ROLES = ("storage", "transaction", "recall", "encoding")
# What kubelet puts in $(VAR) references (env from the pod's fields), for the checks.
POD_FIELDS = {"POD_NAME": "morphz-storage-0", "POD_IP": "10.0.0.7"}
TLS_FLAGS = {"--tls-cert", "--tls-key", "--tls-client-ca"}


def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def k8s_docs() -> list[dict]:
    return [d for f in sorted((DEPLOY / "k8s").glob("*.yaml"))
            for d in yaml.safe_load_all(f.read_text()) if d]


def k8s_containers() -> list[tuple[dict, dict]]:
    """(workload, container) of every pod template."""
    return [(d, c) for d in k8s_docs() if d["kind"] in ("Deployment", "StatefulSet")
            for c in d["spec"]["template"]["spec"]["containers"]]


def entrypoint() -> list[str]:
    line = next(ln for ln in (DEPLOY / "Dockerfile").read_text().splitlines()
                if ln.startswith("ENTRYPOINT"))
    return yaml.safe_load(line.removeprefix("ENTRYPOINT"))


def serve_commands() -> list[tuple[str, list[str]]]:
    """(where, the morphz argv) of every container running the morphz image."""
    out = []
    for name, svc in compose()["services"].items():
        if svc.get("image") == IMAGE:
            out.append((f"compose:{name}", entrypoint() + svc["command"]))
    for workload, c in k8s_containers():
        if c["image"] == IMAGE:
            out.append((f"k8s:{workload['metadata']['name']}", c["command"] + c["args"]))
    return out


def substituted(argv: list[str]) -> list[str]:
    return [re.sub(r"\$\((\w+)\)", lambda m: POD_FIELDS[m.group(1)], a) for a in argv]


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


@functools.cache
def help_flags(role: str) -> frozenset[str]:
    """The flags `morphz serve ROLE --help` lists (the real command, run)."""
    out = subprocess.run([sys.executable, "-m", "morphz.services.cli.main", "serve", role,
                          "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return frozenset(re.findall(r"(--[a-z][a-z-]*)", out.stdout))


@functools.cache
def probe_flags() -> frozenset[str]:
    out = subprocess.run([sys.executable, str(DEPLOY / "probe.py"), "--help"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return frozenset(re.findall(r"--[a-z][a-z-]*", out.stdout))


def cluster_processes() -> list:
    spec = importlib.util.spec_from_file_location("cluster_script", ROOT / "scripts" / "cluster.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PROCESSES


def test_dist_05_every_serve_command_is_a_valid_morphz_serve_with_listed_flags():
    commands = serve_commands()
    assert {argv[2] for _, argv in commands} == set(ROLES)
    for where, argv in commands:
        assert argv[:2] == ["morphz", "serve"] and argv[2] in ROLES, where
        flags = [a for a in argv[3:] if a.startswith("--")]
        assert set(flags) <= help_flags(argv[2]), (where, set(flags) - help_flags(argv[2]))
        # The CLI parses it and the role's own checks accept it (the flags that go together).
        args = build_parser().parse_args(substituted(argv[1:]))
        check_addresses(args.role, ServerConfig(
            data_dir=args.data, listen=args.listen, storage=args.storage, transaction=args.transaction,
            etcd=args.etcd, instance=args.instance, advertise=args.advertise,
            lease_ttl=args.lease_ttl, shard=args.shard))
        # Listening beyond loopback: only with mutual TLS.
        assert flag(argv, "--listen").startswith("0.0.0.0:") and TLS_FLAGS <= set(flags), where


def test_dist_05_the_manifests_run_the_roles_and_flags_scripts_cluster_runs():
    deployed: dict[str, set[str]] = {}
    for _, argv in serve_commands():
        deployed.setdefault(argv[2], set()).update(a for a in argv if a.startswith("--"))
    for name, role, calls, extra in cluster_processes():
        if role == "etcd":
            continue
        used = {f"--{f}" for f in calls} | {a for a in extra if a.startswith("--")}
        assert used <= deployed[role], (name, used - deployed[role])


def test_dist_05_compose_ports_addresses_images_and_secrets_exist():
    c = compose()
    services, secrets = c["services"], c["secrets"]
    for svc in services.values():
        image = svc["image"]
        if image == IMAGE:  # built from the repository by deploy/Dockerfile
            assert svc["build"]["dockerfile"] == "deploy/Dockerfile"
            assert (ROOT / svc["build"]["dockerfile"]).is_file()
        else:
            assert re.fullmatch(r"[\w./-]+:v?\d+(\.\d+)+", image), image  # pinned
    for where, argv in serve_commands():
        if not where.startswith("compose:"):
            continue
        svc = services[where.removeprefix("compose:")]
        port = flag(argv, "--listen").rsplit(":", 1)[1]
        assert all(p.rsplit(":", 1)[1] == port for p in svc.get("ports", [])), where
        assert svc["healthcheck"]["test"][:4] == ["CMD", "python", "/app/deploy/probe.py",
                                                  f"127.0.0.1:{port}"], where
        for name in ("--etcd", "--transaction", "--advertise"):
            if name in argv:  # names a service of this file, on a port it listens on
                host, target = flag(argv, name).rsplit(":", 1)
                assert host in services, (where, name)
                assert target in " ".join(map(str, services[host]["command"])), (where, name)
        for name in TLS_FLAGS:  # read from the secrets compose mounts
            path = flag(argv, name)
            assert path.removeprefix("/run/secrets/") in secrets, (where, path)
            assert path.removeprefix("/run/secrets/") in svc["secrets"]
    for s in secrets.values():
        assert s["file"].startswith("./tls/")  # made by scripts/dev-certs, not committed
    assert (DEPLOY / "otel-collector.yaml").is_file()
    collector = services["otel-collector"]["volumes"][0].split(":")[0]
    assert (DEPLOY / collector).is_file()


def test_dist_05_kubernetes_ports_probes_addresses_images_and_secrets_exist():
    docs = k8s_docs()
    service_ports = {d["metadata"]["name"]: {p["port"]: p["targetPort"] for p in d["spec"]["ports"]}
                     for d in docs if d["kind"] == "Service"}
    kinds = {d["metadata"]["name"]: d["kind"] for d in docs if d["kind"] != "Service"}
    assert kinds["morphz-storage"] == "StatefulSet" and kinds["etcd"] == "StatefulSet"
    assert all(kinds[n] == "Deployment" for n in
               ("morphz-transaction", "morphz-recall", "morphz-encoding", "otel-collector"))
    compose_images = {s["image"] for s in compose()["services"].values()}
    for workload, c in k8s_containers():
        where = workload["metadata"]["name"]
        assert c["image"] in compose_images, where  # the one Dockerfile, or pinned ones
        pod = workload["spec"]["template"]["spec"]
        if c["image"] != IMAGE:
            continue
        argv = c["command"] + c["args"]
        port = int(flag(argv, "--listen").rsplit(":", 1)[1])
        assert [p["containerPort"] for p in c["ports"]] == [port], where
        assert service_ports[where] == {port: port}, where  # the Service reaches it
        for probe in ("readinessProbe", "livenessProbe"):  # gRPC health over mTLS
            cmd = c[probe]["exec"]["command"]
            assert cmd[:3] == ["python", "/app/deploy/probe.py", f"127.0.0.1:{port}"], where
            assert (DEPLOY / "probe.py").is_file()
            assert {a for a in cmd if a.startswith("--")} <= probe_flags()
            # Liveness asks only that the process answer: a transaction instance without
            # its etcd lease is NOT_SERVING (out of the endpoints), not to be restarted.
            assert ("--live" in cmd) == (probe == "livenessProbe"), (where, probe)
        mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        secret_volumes = {v["name"] for v in pod["volumes"] if "secret" in v}
        for name in TLS_FLAGS:
            path = flag(argv, name)
            assert mounts.get(path.rsplit("/", 1)[0]) in secret_volumes, (where, path)
        for name in ("--etcd", "--transaction"):
            if name in argv:
                host, target = flag(argv, name).rsplit(":", 1)
                assert int(target) in service_ports[host], (where, name)
        if "--shard" in argv:  # a shard per pod, each with its own volume
            assert workload["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == \
                mounts["/data"]
            host = flag(argv, "--advertise").split(":")[0].split(".", 1)[1]
            assert host == workload["spec"]["serviceName"] and host in service_ports
    # The collector the services export to exists, on the port they name.
    assert 4317 in service_ports["otel-collector"]


def test_dist_05_the_image_does_not_serve_beyond_loopback_by_default():
    text = (DEPLOY / "Dockerfile").read_text()
    assert entrypoint() == ["morphz"]
    cmd = yaml.safe_load(next(ln for ln in text.splitlines() if ln.startswith("CMD"))[3:])
    assert flag(cmd, "--listen").startswith("127.0.0.1:")


@pytest.mark.parametrize("role", ROLES)
def test_dist_05_help_lists_the_serve_flags(role):
    assert {"--listen", "--data", "--etcd", "--tls-cert"} <= help_flags(role)
