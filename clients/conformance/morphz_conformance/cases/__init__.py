"""The kit's cases, one module per profile; MODULES is the order a run takes them in."""
from morphz_conformance.cases import (assembly, concurrent, core, distributed, durable,
                                      hybrid, kit, mcp, privacy, recall, security, soak,
                                      ui)

MODULES = (core, recall, durable, concurrent, distributed, security, hybrid, assembly, mcp,
           ui, privacy, soak, kit)
