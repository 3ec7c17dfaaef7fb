"""morphz-conformance: the SC profiles' conformance kit (seed 003 section 11).

Black-box cases, each named by its CONFORMANCE id, run through a `Driver`
(driver.py) against any implementation; the reference driver speaks Morphz's gRPC API
(grpc_driver.py). Reports are JSON, signed with Ed25519 (report.py). The requirements'
text, CONFORMANCE.md, ships inside the package (mapping.document())."""
from importlib import metadata

try:
    __version__ = metadata.version("morphz-conformance")  # VERSION, at build time
except metadata.PackageNotFoundError:  # run from a source tree never installed
    __version__ = "0+unknown"
