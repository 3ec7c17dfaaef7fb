"""DIST-05 deployment manifests: deploy/compose.yaml and deploy/k8s/*.yaml cannot run here,
so they are parsed and every command, flag, port, address and image they name is checked
against what exists: `morphz serve ROLE --help`, the serve flags' own checks, the
Services and ports they define, deploy/Dockerfile and deploy/probe.py, and the roles and
flags scripts/cluster starts. Every exposed listener runs with mutual TLS from a secret.
Each is checked as deployed with LMDB shards and as deployed on replicated PostgreSQL
(deploy/compose.postgres.yaml over compose.yaml; deploy/k8s/postgres/ for k8s/storage.yaml),
whose Patroni configuration real Patroni validates against a real etcd."""
from __future__ import annotations

import functools
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from morphz.services.cli.main import build_parser
from morphz.services.server.app import ServerConfig
from morphz.services.server.roles import check_addresses

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
IMAGE = f"morphz:{(ROOT / 'VERSION').read_text().strip()}"  # deploy/Dockerfile's, tagged
ROLES = ("storage", "transaction", "recall", "encoding")
# What kubelet puts in $(VAR) references (env from the pod's fields), for the checks.
POD_FIELDS = {"POD_NAME": "morphz-storage-0", "POD_IP": "10.0.0.7"}
TLS_FLAGS = {"--tls-cert", "--tls-key", "--tls-client-ca"}


VARIANTS = ("lmdb", "postgres")  # how storage keeps its store
COMPOSE_REPLACED = {"command", "entrypoint", "test"}  # an override file's value wins whole


def merged(base, over, key: str = ""):
    """`docker compose -f base -f over` for what these files use: mappings merged key by
    key, lists (secrets, depends_on, ...) joined, commands replaced."""
    if isinstance(base, dict) and isinstance(over, dict):
        return {**base, **{k: merged(base[k], v, k) if k in base else v for k, v in over.items()}}
    if isinstance(base, list) and isinstance(over, list) and key not in COMPOSE_REPLACED:
        return base + [x for x in over if x not in base]
    return over


def compose(variant: str = "lmdb") -> dict:
    c = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    if variant == "postgres":
        c = merged(c, yaml.safe_load((DEPLOY / "compose.postgres.yaml").read_text()))
    return c


def k8s_docs(variant: str = "lmdb") -> list[dict]:
    files = sorted((DEPLOY / "k8s").glob("*.yaml"))
    if variant == "postgres":  # its storage.yaml instead of k8s/storage.yaml
        files = [f for f in files if f.name != "storage.yaml"] + \
            sorted((DEPLOY / "k8s" / "postgres").glob("*.yaml"))
    return [d for f in files for d in yaml.safe_load_all(f.read_text()) if d]


def k8s_containers(variant: str = "lmdb") -> list[tuple[dict, dict]]:
    """(workload, container) of every pod template."""
    return [(d, c) for d in k8s_docs(variant) if d["kind"] in ("Deployment", "StatefulSet")
            for c in d["spec"]["template"]["spec"]["containers"]]


def entrypoint() -> list[str]:
    line = next(ln for ln in (DEPLOY / "Dockerfile").read_text().splitlines()
                if ln.startswith("ENTRYPOINT"))
    return yaml.safe_load(line.removeprefix("ENTRYPOINT"))


def serve_commands(variants=VARIANTS) -> list[tuple[str, list[str]]]:
    """(where, the morphz argv) of every container running the morphz image."""
    out = []
    for variant in variants:
        for name, svc in compose(variant)["services"].items():
            if svc.get("image") == IMAGE:
                out.append((f"compose:{name}", entrypoint() + svc["command"]))
        for workload, c in k8s_containers(variant):
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
            lease_ttl=args.lease_ttl, shard=args.shard, store=args.store, dsn=args.dsn))
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


def secret_names(svc: dict) -> set[str]:
    return {s if isinstance(s, str) else s["source"] for s in svc.get("secrets", [])}


@pytest.mark.parametrize("variant", VARIANTS)
def test_dist_05_compose_ports_addresses_images_and_secrets_exist(variant):
    c = compose(variant)
    services, secrets = c["services"], c["secrets"]
    for svc in services.values():
        image = svc["image"]
        if image == IMAGE:  # built from the repository by deploy/Dockerfile
            assert svc["build"]["dockerfile"] == "deploy/Dockerfile"
        else:
            assert re.fullmatch(r"[\w./-]+:v?\d+(\.\d+)+", image), image  # pinned
        if "build" in svc:  # an image of this repository's, from its Dockerfile
            assert (ROOT / svc["build"]["dockerfile"]).is_file()
    for where, argv in serve_commands([variant]):
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
            assert path.removeprefix("/run/secrets/") in secret_names(svc)
    ignored = (ROOT / ".gitignore").read_text().split()
    for s in secrets.values():  # TLS by scripts/dev-certs, passwords by hand: not committed
        assert s["file"].startswith(("./tls/", "./secrets/"))
        assert "deploy/" + s["file"].removeprefix("./").split("/")[0] + "/" in ignored
    assert (DEPLOY / "otel-collector.yaml").is_file()
    collector = services["otel-collector"]["volumes"][0].split(":")[0]
    assert (DEPLOY / collector).is_file()


@pytest.mark.parametrize("variant", VARIANTS)
def test_dist_05_kubernetes_ports_probes_addresses_images_and_secrets_exist(variant):
    docs = k8s_docs(variant)
    service_ports = {d["metadata"]["name"]: {p["port"]: p["targetPort"] for p in d["spec"]["ports"]}
                     for d in docs if d["kind"] == "Service"}
    kinds = {d["metadata"]["name"]: d["kind"] for d in docs if d["kind"] != "Service"}
    assert kinds["morphz-storage"] == "StatefulSet" and kinds["etcd"] == "StatefulSet"
    assert all(kinds[n] == "Deployment" for n in
               ("morphz-transaction", "morphz-recall", "morphz-encoding", "otel-collector"))
    compose_images = {s["image"] for s in compose(variant)["services"].values()}
    for workload, c in k8s_containers(variant):
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


def test_dist_05_the_image_installs_the_wheels_not_the_source_tree():
    """The image installs what users install: a first stage builds the client's and the
    server's wheels (their builds generate the stubs) and wheels of every dependency; the
    image itself installs the server from those wheels alone, with only ICU's runtime
    library from the system (PyICU was compiled against the builder's ICU of the same
    Debian release)."""
    text = (DEPLOY / "Dockerfile").read_text()
    stages = re.split(r"^FROM ", text, flags=re.M)[1:]
    assert len(stages) == 2
    builder, image = stages
    base = builder.split()[0]
    assert image.split()[0] == base and base.endswith("-bookworm")
    for built in ("python -m build --wheel --outdir /wheels clients/python",
                  "python -m build --wheel --outdir /wheels .",
                  "python -m pip wheel --no-cache-dir --wheel-dir /wheels --find-links /wheels "
                  "/wheels/morphz-*.whl"):
        assert built in builder, built
    assert "libicu-dev" in builder and "libicu72" in image and "libicu-dev" not in image
    assert "pip install --no-cache-dir --no-index --find-links /wheels morphz" in image
    assert "COPY . ." not in image and "gen_protos" not in text
    ignored = (ROOT / ".dockerignore").read_text().split()  # nothing a checkout set up
    assert {".venv", "**/build", "**/node_modules", "deploy/secrets"} <= set(ignored)
    assert not re.search(r"pip install[^\n]* \.(\s|$)", text)


@pytest.mark.parametrize("role", ROLES)
def test_dist_05_help_lists_the_serve_flags(role):
    assert {"--listen", "--data", "--etcd", "--tls-cert"} <= help_flags(role)


# -- storage on replicated PostgreSQL: Patroni members and the shards' DSNs -----------------
POSTGRES = DEPLOY / "postgres"
PATRONI_IMAGE_DOCKERFILE = "deploy/postgres/Dockerfile"


def patroni_config() -> dict:
    return yaml.safe_load((POSTGRES / "patroni.yml").read_text())


def dsn_of(argv: list[str]) -> dict[str, str]:
    from psycopg.conninfo import conninfo_to_dict  # libpq's own parser (PQconninfoParse)
    return conninfo_to_dict(flag(argv, "--dsn"))


def check_dsn(where: str, argv: list[str], members: list[str], databases: set[str]) -> str:
    """The shard's DSN: every member, on Patroni's PostgreSQL port, as the role
    post-bootstrap.sh makes, in a database it makes; connecting to the primary only.
    Returns the passfile it names."""
    assert flag(argv, "--store") == "postgres", where
    d = dsn_of(argv)
    port = patroni_config()["postgresql"]["listen"].rsplit(":", 1)[1]
    assert d["host"].split(",") == members and d["port"].split(",") == [port] * len(members)
    # libpq tries each host in turn and keeps the one accepting writes: after a failover,
    # the promoted standby; a demoted member still running is skipped.
    assert d["target_session_attrs"] == "read-write", where
    role = re.search(r"CREATE ROLE (\w+) LOGIN", (POSTGRES / "post-bootstrap.sh").read_text())
    assert d["user"] == role.group(1), where
    assert substituted([d["dbname"]])[0] in databases or d["dbname"] in databases, where
    assert "password" not in d, where  # from an owner-only passfile, never in argv
    return d["passfile"]


def patroni_env(env: dict[str, str], member: str, pg_port: int, etcd: str) -> None:
    assert env["PATRONI_NAME"] == member
    assert env["PATRONI_POSTGRESQL_CONNECT_ADDRESS"] == f"{member}:{pg_port}"
    assert env["PATRONI_RESTAPI_CONNECT_ADDRESS"].rsplit(":", 1) == \
        [member, patroni_config()["restapi"]["listen"].rsplit(":", 1)[1]]
    assert env["PATRONI_ETCD3_HOSTS"] == etcd  # the etcd Morphz already runs


def test_dist_05_patroni_promotes_only_a_synchronous_standby_and_waits_without_one():
    cfg = patroni_config()
    dcs = cfg["bootstrap"]["dcs"]
    # A commit is acknowledged once a standby has flushed it; only that standby is ever
    # promoted; with no standby the primary waits instead of acknowledging alone.
    assert dcs["synchronous_mode"] is True and dcs["synchronous_mode_strict"] is True
    assert dcs["synchronous_node_count"] == 1
    assert dcs["postgresql"]["parameters"]["synchronous_commit"] == "on"
    assert cfg["namespace"] != "/morphz/"  # its keys beside Morphz's own in the shared etcd
    # The image: Debian's PostgreSQL 15 and Patroni, the files the config and entrypoint name.
    dockerfile = (POSTGRES / "Dockerfile").read_text()
    assert "postgresql-15" in dockerfile and " patroni" in dockerfile
    assert cfg["postgresql"]["bin_dir"] == "/usr/lib/postgresql/15/bin"
    entry = yaml.safe_load(next(ln for ln in dockerfile.splitlines()
                                if ln.startswith("ENTRYPOINT")).removeprefix("ENTRYPOINT"))
    copied = {}
    for line in dockerfile.splitlines():
        if line.startswith("COPY "):
            *sources, dest = line.split()[1:]
            for src in sources:
                assert (ROOT / src).is_file(), src
                copied[dest.rstrip("/") + ("/" + src.rsplit("/", 1)[1] if dest.endswith("/")
                                            else "")] = ROOT / src
    for path in (entry[0], cfg["bootstrap"]["post_bootstrap"]):
        assert path in copied and os.access(copied[path], os.X_OK), path
    assert f"patroni {next(p for p in copied if p.endswith('.yml'))}" in \
        copied[entry[0]].read_text()
    for script in (copied[entry[0]], copied[cfg["bootstrap"]["post_bootstrap"]]):
        out = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr


def test_dist_05_compose_postgres_members_and_storage_dsns_agree():
    c = compose("postgres")
    services = c["services"]
    members = [n for n, s in services.items()
               if s.get("build", {}).get("dockerfile") == PATRONI_IMAGE_DOCKERFILE]
    assert len(members) >= 2  # a primary and a synchronous standby
    pg_port = int(patroni_config()["postgresql"]["listen"].rsplit(":", 1)[1])
    etcd_port = flag(services["etcd"]["command"], "--listen-client-urls").rsplit(":", 1)[1]
    databases = set()
    for m in members:
        env = services[m]["environment"]
        patroni_env(env, m, pg_port, f"etcd:{etcd_port}")
        assert "etcd" in services[m]["depends_on"]
        databases |= set(env["MORPHZ_PG_DATABASES"].split())
        targets = {s["target"] for s in services[m]["secrets"]}
        assert {"postgres.password", "replicator.password", "rewind.password",
                "morphz.pgpass"} <= targets  # what entrypoint.sh reads
    storage = [(w, a) for w, a in serve_commands(["postgres"])
               if w.startswith("compose:") and a[2] == "storage"]
    assert len(storage) == 2
    used = set()
    for where, argv in storage:
        svc = services[where.removeprefix("compose:")]
        passfile = check_dsn(where, argv, members, databases)
        assert passfile.removeprefix("/run/secrets/") in \
            {s["target"] for s in svc["secrets"] if isinstance(s, dict)}, where
        assert set(members) <= set(svc["depends_on"]), where
        used.add(dsn_of(argv)["dbname"])
    assert len(used) == len(storage)  # a database of its own per shard


def test_dist_05_kubernetes_postgres_members_and_storage_dsns_agree():
    docs = k8s_docs("postgres")
    sets = {d["metadata"]["name"]: d for d in docs if d["kind"] == "StatefulSet"}
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    pg = sets["morphz-postgres"]
    headless = services[pg["spec"]["serviceName"]]
    assert headless["spec"]["clusterIP"] == "None"
    pg_port = int(patroni_config()["postgresql"]["listen"].rsplit(":", 1)[1])
    assert {p["port"] for p in headless["spec"]["ports"]} >= {pg_port}
    assert pg["spec"]["replicas"] >= 2
    (container,) = pg["spec"]["template"]["spec"]["containers"]
    assert container["image"] in {s["image"] for s in compose("postgres")["services"].values()}
    env = {e["name"]: e.get("value") for e in container["env"]}
    member = f"$(POD_NAME).{headless['metadata']['name']}"
    etcd = services["etcd"]["spec"]["ports"][0]["port"]
    patroni_env({**env, "PATRONI_NAME": member}, member, pg_port, f"etcd:{etcd}")
    assert env["PATRONI_NAME"] == "$(POD_NAME)"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert env["MORPHZ_PG_SECRETS"] == mounts["secrets"]
    assert mounts["data"] == os.path.dirname(patroni_config()["postgresql"]["data_dir"])
    members = [f"{pg['metadata']['name']}-{i}.{headless['metadata']['name']}"
               for i in range(pg["spec"]["replicas"])]
    shards = sets["morphz-storage"]
    (storage,) = shards["spec"]["template"]["spec"]["containers"]
    argv = storage["command"] + storage["args"]
    # Each shard pod's database (dbname=$(POD_NAME)) is one the first primary makes.
    shard_dbs = {f"morphz-storage-{i}" for i in range(shards["spec"]["replicas"])}
    assert shard_dbs <= set(env["MORPHZ_PG_DATABASES"].split())
    assert dsn_of(argv)["dbname"] == "$(POD_NAME)"
    passfile = check_dsn("k8s:morphz-storage", argv, members, {"$(POD_NAME)"})
    smounts = {m["mountPath"]: m["name"] for m in storage["volumeMounts"]}
    volume = next(v for v in shards["spec"]["template"]["spec"]["volumes"]
                  if v["name"] == smounts[os.path.dirname(passfile)])
    assert volume["secret"]["defaultMode"] == 0o400  # libpq ignores a readable passfile
    assert {i["path"] for i in volume["secret"]["items"]} == {os.path.basename(passfile)}


def test_dist_05_patroni_accepts_the_config(etcd, tmp_path):
    """Real Patroni (Debian's, installed by scripts/bootstrap) validates deploy/postgres's
    configuration as a member's environment completes it, against a real etcd."""
    patroni = shutil.which("patroni")
    assert patroni, "patroni is not installed: scripts/bootstrap installs it"
    env = dict(os.environ, PATRONI_NAME="postgres-1", PATRONI_ETCD3_HOSTS=etcd.address,
               # a member's own name (Patroni refuses loopback addresses for connect_address)
               PATRONI_RESTAPI_CONNECT_ADDRESS="postgres-1:8008",
               PATRONI_POSTGRESQL_CONNECT_ADDRESS="postgres-1:5432",
               PATRONI_SUPERUSER_PASSWORD="s", PATRONI_REPLICATION_PASSWORD="r",
               PATRONI_REWIND_PASSWORD="w")
    out = subprocess.run([patroni, "--validate-config", str(POSTGRES / "patroni.yml")],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    # ... and refuses one it should: the check is real.
    broken = tmp_path / "patroni.yml"
    cfg = patroni_config()
    del cfg["postgresql"]["authentication"]["replication"]
    broken.write_text(yaml.safe_dump(cfg))
    out = subprocess.run([patroni, "--validate-config", str(broken)], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
