"""The gRPC wire, shared by every service: what a request passes before its servicer
(guard.py: decoding, sizes and bytes in flight, with field_limits.py and
stalled_replies.py; auth.py: the caller; admission.py: expensive calls' budgets;
tracing.py), the error contract (errors.py: MorphzError <-> status and ErrorInfo), a
call's deadline (deadline.py), protobuf messages <-> plain dicts (protojson.py), jobs as
messages (job_messages.py) and what clients share (client.py). Cores import none of it:
their transport is given (tests/unit/test_architecture_imports.py)."""
