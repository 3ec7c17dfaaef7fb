"""A gRPC health check for container probes: exit 0 if the server at ADDRESS reports
SERVING, 1 otherwise; with --live, exit 0 if it answers at all (a liveness probe: a
transaction instance that lost its etcd lease reports NOT_SERVING, and should leave the
Service's endpoints, not be restarted). With --tls-ca (and a client certificate, for mutual TLS) it
connects over TLS, checking the server's certificate for the name --server-name (the
probe dials 127.0.0.1; scripts/dev-certs names localhost)."""
from __future__ import annotations

import argparse
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="probe.py", description=__doc__)
    p.add_argument("address", metavar="HOST:PORT")
    p.add_argument("--tls-ca", metavar="PEM", default="")
    p.add_argument("--tls-cert", metavar="PEM", default="")
    p.add_argument("--tls-key", metavar="PEM", default="")
    p.add_argument("--server-name", default="localhost")
    p.add_argument("--timeout", type=float, default=3.0)
    p.add_argument("--live", action="store_true",
                   help="succeed on any answer, SERVING or not (liveness)")
    args = p.parse_args(argv)
    if args.tls_ca:
        def read(path: str) -> bytes | None:
            with open(path, "rb") as f:
                return f.read()
        creds = grpc.ssl_channel_credentials(
            read(args.tls_ca), read(args.tls_key) if args.tls_key else None,
            read(args.tls_cert) if args.tls_cert else None)
        channel = grpc.secure_channel(args.address, creds, options=[
            ("grpc.ssl_target_name_override", args.server_name)])
    else:
        channel = grpc.insecure_channel(args.address)
    with channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=args.timeout)
        except grpc.RpcError as e:
            print(f"probe: {args.address}: {e.code().name}", file=sys.stderr)
            return 1
    serving = reply.status == health_pb2.HealthCheckResponse.SERVING
    if args.live:
        return 0
    if not serving:
        print(f"probe: {args.address}: {health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}",
              file=sys.stderr)
    return 0 if serving else 1


if __name__ == "__main__":
    sys.exit(main())
