// Sending one call: its deadline, the retry of what is safe to repeat, and the redirect
// to a context's owner. What is safe (as in the Python client): reads, and writes the
// server deduplicates by their request id; never a call a second try could act twice.
import { randomUUID } from "node:crypto";
import * as grpc from "@grpc/grpc-js";

import { MorphzError, fromServiceError, inputError } from "./errors";

// idempotent: a write whose repetition changes nothing more (cancelling a job).
export type Safety = "read" | "request_id" | "idempotent" | "never";

export interface RetryPolicy {
  /** Tries in all, the first included. */
  attempts: number;
  initialBackoffMs: number;
  maxBackoffMs: number;
  multiplier: number;
}

export const DEFAULT_TIMEOUT_MS = 30_000;
export const REBUILD_TIMEOUT_MS = 3_600_000;  // an index rebuild reads the whole context
export const DEFAULT_RETRY: RetryPolicy = { attempts: 5, initialBackoffMs: 200, maxBackoffMs: 5_000, multiplier: 2 };
export const NO_RETRY: RetryPolicy = { ...DEFAULT_RETRY, attempts: 1 };

/** `given` over the defaults, refused (as every bad argument) when it cannot work. */
export function retryPolicy(given: Partial<RetryPolicy> = {}): RetryPolicy {
  const p = { ...DEFAULT_RETRY, ...given };
  if (!(Number.isInteger(p.attempts) && p.attempts >= 1)) {
    throw inputError("retry attempts must be an integer >= 1", { field: "attempts" });
  }
  if (!(p.initialBackoffMs >= 0 && p.initialBackoffMs <= p.maxBackoffMs && p.multiplier >= 1)) {
    throw inputError("retry backoffs must satisfy 0 <= initialBackoffMs <= maxBackoffMs and multiplier >= 1", { field: "backoff" });
  }
  return p;
}

// Transport failures and refusals that come before any effect, each gone on a later try:
// the server unreachable or restarting, a deadline, an owner's lease not yet renewed, a
// busy server's limits, a write race the server itself says to retry.
const TRANSIENT = new Set(["UNAVAILABLE", "DEADLINE_EXCEEDED", "OWNERSHIP_LOST", "CONCURRENT_UPDATE",
  "CONCURRENT_RPC_LIMIT", "BYTES_IN_FLIGHT_LIMIT"]);
export const MAX_REDIRECTS = 2;  // an owner can change once more while a redirect is followed

export type UnaryMethod<Req, Res> = (
  request: Req,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
  callback: grpc.requestCallback<Res>,
) => grpc.ClientUnaryCall;

export interface Call {
  method: string;
  request: object;
  safety: Safety;
  timeoutMs?: number;  // undefined: the client's
}

export function retryable(call: Call, err: MorphzError): boolean {
  return call.safety !== "never" && TRANSIENT.has(err.reason);
}

/** The owner's address a NOT_OWNER refusal names: the write was refused unread, so it may
 * go there whatever its safety. */
export function redirect(err: MorphzError): string | undefined {
  const address = err.details.owner_address;
  return err.reason === "NOT_OWNER" && typeof address === "string" && address ? address : undefined;
}

export function* backoffs(policy: RetryPolicy): Generator<number> {
  let wait = policy.initialBackoffMs;
  for (let i = 1; i < policy.attempts; i++) {
    yield wait;
    wait = Math.min(wait * policy.multiplier, policy.maxBackoffMs);
  }
}

export function once<Res>(method: UnaryMethod<object, Res>, request: object, metadata: grpc.Metadata,
  timeoutMs: number): Promise<Res> {
  return new Promise((resolve, reject) => {
    method(request, metadata, { deadline: new Date(Date.now() + timeoutMs) }, (err, response) => {
      if (err) reject(fromServiceError(err));
      else resolve(response as Res);
    });
  });
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A fresh request id: what makes a write safe to retry. */
export function newRequestId(): string {
  return randomUUID().replace(/-/g, "");
}
