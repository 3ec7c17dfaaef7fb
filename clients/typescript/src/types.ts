// The messages the client returns and accepts, under short names (generated from the
// protos at build time: src/generated/).
export type { ContextStatus__Output as ContextStatus } from "./generated/morphz/api/transaction/v1/ContextStatus";
export type { AuditReport__Output as AuditReport } from "./generated/morphz/api/transaction/v1/AuditReport";
export type { RebuildReport__Output as RebuildReport } from "./generated/morphz/api/transaction/v1/RebuildReport";
export type { AppendEventRequest } from "./generated/morphz/api/transaction/v1/AppendEventRequest";
export type { AppendEventResponse__Output as AppendEventResponse } from "./generated/morphz/api/transaction/v1/AppendEventResponse";
export type { Event__Output as Event } from "./generated/morphz/api/transaction/v1/Event";
export type { Activation__Output as Activation } from "./generated/morphz/api/transaction/v1/Activation";
export type { CommitRequest } from "./generated/morphz/api/transaction/v1/CommitRequest";
export type { Transaction } from "./generated/morphz/api/transaction/v1/Transaction";
export type { Op } from "./generated/morphz/api/transaction/v1/Op";
export type { Receipt__Output as Receipt } from "./generated/morphz/api/transaction/v1/Receipt";
export type { Frame__Output as Frame } from "./generated/morphz/api/transaction/v1/Frame";
export type { FrameList__Output as FrameList } from "./generated/morphz/api/transaction/v1/FrameList";
export type { Evaluation } from "./generated/morphz/api/recall/v1/Evaluation";
export type { SearchResponse__Output as SearchResponse } from "./generated/morphz/api/recall/v1/SearchResponse";
export type { ReadResponse__Output as ReadResponse } from "./generated/morphz/api/recall/v1/ReadResponse";
export type { TraverseResponse__Output as TraverseResponse } from "./generated/morphz/api/recall/v1/TraverseResponse";
export type { IndexStatus__Output as IndexStatus } from "./generated/morphz/api/recall/v1/IndexStatus";
export type { CompileRequest } from "./generated/morphz/api/encoding/v1/CompileRequest";
export type { Encoding__Output as Encoding } from "./generated/morphz/api/encoding/v1/Encoding";
export type { SnapshotRecord__Output as SnapshotRecord } from "./generated/morphz/api/encoding/v1/SnapshotRecord";
export type { ReplayReport__Output as ReplayReport } from "./generated/morphz/api/encoding/v1/ReplayReport";
export type { CheckReport__Output as CheckReport } from "./generated/morphz/api/encoding/v1/CheckReport";
export type { ReadResult__Output as ReadResult } from "./generated/morphz/api/encoding/v1/ReadResult";
export type { SearchResult__Output as SearchResult } from "./generated/morphz/api/encoding/v1/SearchResult";
export type { Node__Output as TraverseNode } from "./generated/morphz/api/recall/v1/Node";
export type { Edge__Output as TraverseEdge } from "./generated/morphz/api/recall/v1/Edge";
