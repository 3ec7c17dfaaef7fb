// How a failed call's status becomes a MorphzError: the structured detail when it is
// ours, the gRPC code otherwise, and never an exception of its own for a trailer that
// does not decode (a proxy's, a truncated one).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";

import { InternalError, UnavailableError } from "../src";
import { fromServiceError } from "../src/errors";

function failure(code: grpc.status, details: string, trailer?: Buffer): grpc.ServiceError {
  const metadata = new grpc.Metadata();
  if (trailer) metadata.set("grpc-status-details-bin", trailer);
  return Object.assign(new Error(details), { code, details, metadata });
}

test("client_an_undecodable_status_trailer_falls_back_to_the_grpc_code", () => {
  for (const trailer of [Buffer.from([0xff, 0xff, 0xff, 0x0f]), Buffer.from("not a status"), Buffer.alloc(0)]) {
    const err = fromServiceError(failure(grpc.status.UNAVAILABLE, "upstream went away", trailer));
    assert.ok(err instanceof UnavailableError, String(err));
    assert.deepEqual([err.reason, err.code, err.message], ["UNAVAILABLE", "UNAVAILABLE", "upstream went away"]);
  }
  const none = fromServiceError(failure(grpc.status.INTERNAL, ""));
  assert.ok(none instanceof InternalError);
  assert.equal(none.reason, "INTERNAL");
});
