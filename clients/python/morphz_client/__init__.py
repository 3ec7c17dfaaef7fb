"""morphz.client: the Morphz client library for agent runtimes.

Client (synchronous) and AsyncClient (asyncio) call the transaction, recall and encoding
services over gRPC; Tx builds a context-tx in its structured form; every failure is a
MorphzError carrying the server's stable reason and details. Replies are the protobuf
messages of protos/morphz/api. It depends on the generated stubs only.
"""
from morphz.client.aio import AsyncClient
from morphz.client.calls import Evaluation
from morphz.client.client import Client
from morphz.client.errors import (AbortedError, AlreadyExistsError, AuthError, ConflictError,
                                  DataLossError, InternalError, InvalidInputError, LimitError,
                                  MorphzError, NotFoundError, PreconditionError,
                                  UnavailableError)
from morphz.client.options import NO_RETRY, Credentials, RetryPolicy
from morphz.client.tx import Tx, quote

__all__ = ["AbortedError", "AlreadyExistsError", "AsyncClient", "AuthError", "Client",
           "ConflictError", "Credentials", "DataLossError", "Evaluation", "InternalError",
           "InvalidInputError", "LimitError", "MorphzError", "NO_RETRY", "NotFoundError",
           "PreconditionError", "RetryPolicy", "Tx", "UnavailableError", "quote"]
