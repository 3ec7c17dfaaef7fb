// Tx: a builder for one context-tx in its structured form (transaction.proto's
// Transaction), the same transaction the DSL text would say; the Python client's Tx
// with camelCase names.
//
//   const tx = new Tx(1, "tests passed, go on")
//     .derive("test-result", "(tests passed)", { sources: ["@e4"] })
//     .revise("release", "(goal ship-v1) (stage packaging)")
//     .relate("test-result", "supports", "release")
//     .retire("@e4");
//
// Bodies are S-expression text (`quote` makes a string literal of any text). Shapes the
// server would refuse for certain (derive without sources, an op without targets, place
// without exactly one anchor) are refused here already; the rest is the server's to judge.
import { inputError } from "./errors";
import type { Transaction } from "./generated/morphz/api/transaction/v1/Transaction";
import type { Op } from "./generated/morphz/api/transaction/v1/Op";

const U64_MAX = 2n ** 64n - 1n;
const ESCAPED: Record<string, string> = { '"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r" };

/** `text` as a DSL string literal (escapes as the server's reader reads them). */
export function quote(text: string): string {
  return `"${text.replace(/["\\\x00-\x1f\x7f]/g, (ch) => ESCAPED[ch] ?? `\\u{${ch.charCodeAt(0).toString(16)}}`)}"`;
}

export type Place = { before: string } | { after: string } | { first: true } | { last: true };

function checkU64(name: string, value: number | undefined): void {
  if (value !== undefined && !(Number.isSafeInteger(value) && value >= 0 && BigInt(value) <= U64_MAX)) {
    throw inputError(`${name} must be an integer 0..2^64-1`, { field: name });
  }
}

export class Tx {
  private readonly ops: Op[] = [];

  constructor(readonly baseVersion: number, readonly reason = "", readonly options: { baseTick?: number } = {}) {
    checkU64("base_version", baseVersion);
    checkU64("base_tick", options.baseTick);
  }

  // -- frames ---------------------------------------------------------------------------
  create(frameId: string, body: string): this {
    return this.add({ create: { frameId, body } });
  }

  derive(frameId: string, body: string, options: { sources: string[] }): this {
    const sources = [...(options?.sources ?? [])];
    if (!sources.length) {
      throw inputError("derive needs sources (its from clause)", { op_index: this.ops.length, field: "derive.sources" });
    }
    return this.add({ derive: { frameId, body, sources } });
  }

  /** sources undefined: keep the frame's sources; a list replaces them ([] clears them,
   * the text form's `(from)`). */
  revise(frameId: string, body: string, options: { sources?: string[] } = {}): this {
    if (options.sources === undefined) return this.add({ revise: { frameId, body } });
    const sources = [...options.sources];
    return this.add({ revise: { frameId, body, sources, clearSources: !sources.length } });
  }

  // -- lifecycle ------------------------------------------------------------------------
  retire(...targets: string[]): this {
    return this.targets("retire", targets);
  }

  restore(...targets: string[]): this {
    return this.targets("restore", targets);
  }

  protect(...targets: string[]): this {
    return this.targets("protect", targets);
  }

  unprotect(...targets: string[]): this {
    return this.targets("unprotect", targets);
  }

  // -- relations and order --------------------------------------------------------------
  relate(subject: string, name: string, object: string): this {
    return this.add({ relate: { subject, name, object } });
  }

  unrelate(subject: string, name: string, object: string): this {
    return this.add({ unrelate: { subject, name, object } });
  }

  place(frameId: string, where: Place): this {
    const given = Object.entries(where ?? {}).filter(([, v]) => v !== undefined && v !== false);
    if (given.length !== 1 || !["before", "after", "first", "last"].includes(given[0][0])) {
      throw inputError("place needs exactly one of before, after, first, last", { op_index: this.ops.length, field: "place.where" });
    }
    return this.add({ place: { frameId, [given[0][0]]: given[0][1] } });
  }

  // -- checkpoints and sessions ---------------------------------------------------------
  checkpoint(name: string): this {
    return this.add({ checkpoint: name });
  }

  rollback(name: string): this {
    return this.add({ rollback: name });
  }

  dropCheckpoint(name: string): this {
    return this.add({ dropCheckpoint: name });
  }

  retireSession(session: string): this {
    return this.add({ retireSession: session });
  }

  restoreSession(session: string): this {
    return this.add({ restoreSession: session });
  }

  // -- output ---------------------------------------------------------------------------
  /** The structured form (CommitRequest.structured). */
  toProto(): Transaction {
    const tx: Transaction = { baseVersion: this.baseVersion, reason: this.reason, ops: this.ops.map((o) => ({ ...o })) };
    if (this.options.baseTick !== undefined) tx.baseTick = this.options.baseTick;
    return tx;
  }

  /** The DSL text of the same transaction. */
  text(): string {
    const parts = [`(base-version ${this.baseVersion})`];
    if (this.options.baseTick !== undefined) parts.push(`(base-tick ${this.options.baseTick})`);
    if (this.reason) parts.push(`(reason ${quote(this.reason)})`);
    for (const op of this.ops) parts.push(opText(op));
    return `(context-tx\n  ${parts.join("\n  ")})`;
  }

  toString(): string {
    return this.text();
  }

  private targets(op: "retire" | "restore" | "protect" | "unprotect", targets: string[]): this {
    if (!targets.length) {
      throw inputError(`${op} needs at least one target`, { op_index: this.ops.length, field: `${op}.targets` });
    }
    return this.add({ [op]: { targets: [...targets] } });
  }

  private add(op: Op): this {
    this.ops.push(op);
    return this;
  }
}

const DSL_NAMES: Record<string, string> = {
  dropCheckpoint: "drop-checkpoint", retireSession: "retire-session", restoreSession: "restore-session",
};

function opText(op: Op): string {
  const [kind, value] = Object.entries(op).find(([k, v]) => k !== "op" && v !== undefined && v !== null)!;
  const name = DSL_NAMES[kind] ?? kind;
  const v = value as Record<string, unknown>;
  switch (kind) {
    case "create": case "derive": case "revise": {
      const sources = (v.sources as string[] | undefined) ?? [];
      const head = [name, v.frameId as string];
      if (sources.length || v.clearSources) head.push(`(from${sources.map((s) => ` ${s}`).join("")})`);
      if (v.body) head.push(v.body as string);
      return `(${head.join(" ")})`;
    }
    case "retire": case "restore": case "protect": case "unprotect":
      return `(${name} ${(v.targets as string[]).join(" ")})`;
    case "relate": case "unrelate":
      return `(${name} ${v.subject} ${v.name} ${v.object})`;
    case "place": {
      const [where, anchor] = Object.entries(v).find(([k]) => k !== "frameId")!;
      return where === "first" || where === "last" ? `(place ${v.frameId} ${where})` : `(place ${v.frameId} (${where} ${anchor}))`;
    }
    default:
      return `(${name} ${value as string})`;
  }
}
