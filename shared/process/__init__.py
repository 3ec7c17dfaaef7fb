"""What a server process runs on, beside its domain: its memory given back to the system
(memory.py), the cycle collector kept short (collector.py) or paused for one big piece
of work (cycles.py), files written durably (durable_files.py), tracing set up from the
environment (telemetry.py, otel_env.py) and the fault points of the crash tests
(faults.py). Nothing here imports gRPC (tests/unit/test_architecture_imports.py)."""
