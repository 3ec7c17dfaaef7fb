// The Morphz services' gRPC constructors, loaded at run time from the protos the build
// copied into proto/ (scripts/gen.js), with the same options the generated types in
// src/generated/ were made with: camelCase fields, 64-bit integers as numbers (revisions,
// sequences and byte counts stay far below 2^53), defaults filled in, oneofs named.
import * as path from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

import type { ProtoGrpcType as TransactionProto } from "./generated/transaction";
import type { ProtoGrpcType as RecallProto } from "./generated/recall";
import type { ProtoGrpcType as EncodingProto } from "./generated/encoding";

export const PROTO_DIR = path.resolve(__dirname, "..", "..", "proto");

const OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_DIR],
};

/** The gRPC package definition of one proto file under proto/. */
export function load<T>(file: string): T {
  return grpc.loadPackageDefinition(protoLoader.loadSync(file, OPTIONS)) as unknown as T;
}

export interface Services {
  transaction: TransactionProto["morphz"]["api"]["transaction"]["v1"]["TransactionService"];
  recall: RecallProto["morphz"]["api"]["recall"]["v1"]["RecallService"];
  encoding: EncodingProto["morphz"]["api"]["encoding"]["v1"]["EncodingService"];
}

/** The public services' client constructors. */
export function services(): Services {
  return {
    transaction: load<TransactionProto>("morphz/api/transaction/v1/transaction.proto")
      .morphz.api.transaction.v1.TransactionService,
    recall: load<RecallProto>("morphz/api/recall/v1/recall.proto").morphz.api.recall.v1.RecallService,
    encoding: load<EncodingProto>("morphz/api/encoding/v1/encoding.proto")
      .morphz.api.encoding.v1.EncodingService,
  };
}
