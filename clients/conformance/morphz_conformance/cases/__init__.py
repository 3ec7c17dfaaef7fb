"""The kit's cases, one module per profile; MODULES is the order a run takes them in."""
from morphz_conformance.cases import (assembly, concurrent, core, durable, hybrid, kit,
                                      recall, security)

MODULES = (core, recall, durable, concurrent, security, hybrid, assembly, kit)
