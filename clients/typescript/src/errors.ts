// The error model: every failed call rejects with a MorphzError carrying the server's
// stable `reason` (google.rpc.ErrorInfo, domain "morphz"), the gRPC `code` name and the
// ErrorInfo metadata as `details`. Callers branch on `reason`, never on `message`.
import * as grpc from "@grpc/grpc-js";
import * as protobuf from "protobufjs";

const DOMAIN = "morphz";
const STATUS_TRAILER = "grpc-status-details-bin";
const ERROR_INFO_URL = "type.googleapis.com/google.rpc.ErrorInfo";

// google.rpc.Status and google.rpc.ErrorInfo, as the server's grpc_status packs them.
const RPC = protobuf.Root.fromJSON(<protobuf.INamespace>{
  nested: {
    google: {
      nested: {
        protobuf: { nested: { Any: { fields: { typeUrl: { type: "string", id: 1 }, value: { type: "bytes", id: 2 } } } } },
        rpc: {
          nested: {
            Status: {
              fields: {
                code: { type: "int32", id: 1 },
                message: { type: "string", id: 2 },
                details: { rule: "repeated", type: "google.protobuf.Any", id: 3 },
              },
            },
            ErrorInfo: {
              fields: {
                reason: { type: "string", id: 1 },
                domain: { type: "string", id: 2 },
                metadata: { keyType: "string", type: "string", id: 3 },
              },
            },
          },
        },
      },
    },
  },
});
const STATUS = RPC.lookupType("google.rpc.Status");
const ERROR_INFO = RPC.lookupType("google.rpc.ErrorInfo");

export type Details = Record<string, unknown>;

export class MorphzError extends Error {
  /** The stable reason code (e.g. TX_CONFLICT, FRAME_NOT_FOUND, UNAVAILABLE). */
  readonly reason: string;
  /** The gRPC status code's name (e.g. ABORTED, NOT_FOUND). */
  readonly code: string;
  /** What was offending: op index, ref, changed boundaries... (JSON values decoded). */
  readonly details: Details;

  constructor(reason: string, message: string, code: string, details: Details = {}) {
    super(message);
    this.name = "MorphzError";
    this.reason = reason;
    this.code = code;
    this.details = details;
  }

  toJSON(): { reason: string; code: string; message: string; details: Details } {
    return { reason: this.reason, code: this.code, message: this.message, details: this.details };
  }
}

// One subclass per gRPC code the server's error table gives a reason, as the Python
// client has them: `instanceof NotFoundError` catches FRAME_NOT_FOUND and
// EVENT_NOT_FOUND alike. Transport failures are UnavailableError.

/** INVALID_ARGUMENT: the request itself is wrong (parse errors, bad names, limits). */
export class InvalidInputError extends MorphzError {}
/** NOT_FOUND: a context, frame, event, session, snapshot... does not exist. */
export class NotFoundError extends MorphzError {}
/** ALREADY_EXISTS: CONTEXT_EXISTS, FRAME_EXISTS, IDEMPOTENCY_MISMATCH... */
export class AlreadyExistsError extends MorphzError {}
/** FAILED_PRECONDITION: a rule of the Mind refused the change as it stands. */
export class PreconditionError extends MorphzError {}
/** ABORTED: a concurrent change got in first; reread and try again. */
export class AbortedError extends MorphzError {}

export interface ChangedBoundary {
  boundary: string;
  revision: number;
  tick?: number;
}

/** TX_CONFLICT: boundaries the transaction reads or writes changed after its base-version. */
export class ConflictError extends AbortedError {
  get changed(): ChangedBoundary[] {
    const changed = this.details.changed;
    return Array.isArray(changed) ? (changed as ChangedBoundary[]) : [];
  }

  /** The changed boundaries' names, e.g. ["frame:release"]. */
  get boundaries(): string[] {
    return this.changed.filter((c) => c && typeof c === "object").map((c) => c.boundary);
  }

  get base(): number | undefined {
    return this.details.base as number | undefined;
  }

  get latest(): number | undefined {
    return this.details.latest as number | undefined;
  }
}

/** RESOURCE_EXHAUSTED: a server limit or budget (details name it). */
export class LimitError extends MorphzError {}
/** Not reached or no answer in time: whether a write happened is unknown unless it
 * carried a request id (then retrying it is safe). */
export class UnavailableError extends MorphzError {}
/** UNAUTHENTICATED or PERMISSION_DENIED. */
export class AuthError extends MorphzError {}
/** DATA_LOSS: a stored record is corrupt. */
export class DataLossError extends MorphzError {}
/** INTERNAL and anything unexpected. */
export class InternalError extends MorphzError {}

const BY_CODE: Record<string, typeof MorphzError> = {
  INVALID_ARGUMENT: InvalidInputError,
  NOT_FOUND: NotFoundError,
  ALREADY_EXISTS: AlreadyExistsError,
  FAILED_PRECONDITION: PreconditionError,
  ABORTED: AbortedError,
  RESOURCE_EXHAUSTED: LimitError,
  UNAVAILABLE: UnavailableError,
  DEADLINE_EXCEEDED: UnavailableError,
  CANCELLED: UnavailableError,
  UNAUTHENTICATED: AuthError,
  PERMISSION_DENIED: AuthError,
  DATA_LOSS: DataLossError,
};

export function makeError(reason: string, message: string, code: string, details: Details = {}): MorphzError {
  const Class = reason === "TX_CONFLICT" ? ConflictError : BY_CODE[code] ?? InternalError;
  const err = new Class(reason, message, code, details);
  err.name = Class.name;
  return err;
}

/** Bad input caught before anything is sent (the server's own reason for it). */
export function inputError(message: string, details: Details = {}): MorphzError {
  return makeError("CONTEXT_INPUT_INVALID", message, "INVALID_ARGUMENT", details);
}

function codeName(code: number): string {
  return grpc.status[code] ?? `CODE_${code}`;
}

function maybeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** The MorphzError a failed gRPC call stands for. */
export function fromServiceError(err: grpc.ServiceError): MorphzError {
  const code = codeName(err.code);
  for (const raw of err.metadata?.get(STATUS_TRAILER) ?? []) {
    const found = ourError(raw, code);
    if (found) return found;
  }
  // A failure gRPC itself reports (no server answer), or a trailer that is not ours or
  // does not decode (a proxy's, say): named after its code, never a decoding exception.
  return makeError(code, err.details || code, code);
}

function ourError(raw: string | Buffer, code: string): MorphzError | undefined {
  if (typeof raw === "string") return undefined;  // a -bin trailer is always bytes
  let status, info;
  try {
    status = STATUS.toObject(STATUS.decode(raw), { defaults: true });
    for (const any of status.details as { typeUrl: string; value: Uint8Array }[]) {
      if (any.typeUrl !== ERROR_INFO_URL) continue;
      const decoded = ERROR_INFO.toObject(ERROR_INFO.decode(any.value), { defaults: true });
      if (decoded.domain === DOMAIN) {
        info = decoded;
        break;
      }
    }
  } catch {
    return undefined;
  }
  if (!info) return undefined;
  const details: Details = {};
  for (const [key, value] of Object.entries(info.metadata as Record<string, string>)) {
    details[key] = maybeJson(value);
  }
  return makeError(info.reason, status.message, code, details);
}
