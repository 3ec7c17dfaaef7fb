"""Certificates for the authentication tests: a CA and its certificates made by
scripts/dev-certs (the openssl command line tool), and what the script does not make."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from morphz.shared.grpc.auth import ClientAuth

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Certs:
    dir: Path

    def path(self, name: str) -> str:
        return str(self.dir / name)

    def client(self, name: str = "client", token: str = "") -> ClientAuth:
        """TLS verifying this CA's servers, presenting certificate NAME.crt."""
        return ClientAuth.from_files(ca=self.path("ca.crt"), cert=self.path(f"{name}.crt"),
                                     key=self.path(f"{name}.key"), token=token)

    def anonymous(self, token: str = "") -> ClientAuth:
        """TLS verifying this CA's servers, presenting no certificate."""
        return ClientAuth.from_files(ca=self.path("ca.crt"), token=token)

    def server_flags(self, name: str = "server", mutual: bool = True) -> list[str]:
        flags = ["--tls-cert", self.path(f"{name}.crt"), "--tls-key", self.path(f"{name}.key")]
        return flags + (["--tls-client-ca", self.path("ca.crt")] if mutual else
                        ["--tls-ca", self.path("ca.crt")])


def dev_certs(directory: Path, *principals: str) -> Certs:
    subprocess.run([str(ROOT / "scripts" / "dev-certs"), str(directory), *principals],
                   check=True, capture_output=True, timeout=60)
    return Certs(Path(directory))


def nameless(certs: Certs, name: str = "nameless") -> str:
    """A client certificate of the CA whose subject has no common name and which has no
    alternative names: it names no principal. Returns NAME (NAME.crt, NAME.key)."""
    key, csr, crt = (certs.path(f"{name}.{ext}") for ext in ("key", "csr", "crt"))
    ext = certs.path(f"{name}.ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=critical,CA:FALSE\nextendedKeyUsage=clientAuth\n")
    for argv in (["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt",
                  "ec_paramgen_curve:P-256", "-out", key],
                 ["openssl", "req", "-new", "-key", key, "-out", csr, "-subj", "/O=no-name"],
                 ["openssl", "x509", "-req", "-in", csr, "-CA", certs.path("ca.crt"),
                  "-CAkey", certs.path("ca.key"), "-CAcreateserial", "-CAserial",
                  certs.path(f"{name}.srl"), "-out", crt, "-days", "2", "-extfile", ext]):
        subprocess.run(argv, check=True, capture_output=True, timeout=60)
    return name
