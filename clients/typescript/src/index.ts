export { Client, FRAME_PAGE_BYTES } from "./client";
export type { ClientOptions, JobKind, Evaluation, TxInput, AppendEventOptions, SearchOptions, FramesOptions, TraverseOptions, CompileOptions, ListSnapshotsOptions, Right, EraseOptions } from "./client";
export {
  MorphzError, InvalidInputError, NotFoundError, AlreadyExistsError, PreconditionError, AbortedError, ConflictError,
  LimitError, UnavailableError, AuthError, DataLossError, InternalError, fromServiceError,
} from "./errors";
export type { Details, ChangedBoundary } from "./errors";
export { Tx, quote } from "./tx";
export type { Place } from "./tx";
export { DEFAULT_RETRY, NO_RETRY, DEFAULT_TIMEOUT_MS } from "./call";
export type { RetryPolicy } from "./call";
export type { Credentials } from "./options";
export type * from "./types";
