"""The kit's cases, one module per profile; MODULES is the order a run takes them in."""
from morphz_conformance.cases import concurrent, core, durable, kit, recall

MODULES = (core, recall, durable, concurrent, kit)
