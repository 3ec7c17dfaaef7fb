// Plain-text renderings for people reading an agent loop's output (the CLI's layout).
import type { Receipt } from "./types";

export function formatReceipt(r: Receipt): string {
  const lines = [`revision ${r.revision}${r.replayed ? " (replayed)" : ""}${r.rebased ? ` (rebased from ${r.rebasedFrom})` : ""}`];
  for (const res of r.results) {
    const extra = [];
    if (res.frameRevision) extra.push(`frame revision ${res.frameRevision}`);
    if (res.dueTick) extra.push(`due tick ${res.dueTick}`);
    lines.push(`#${res.index} ${res.op} ${res.target} -> ${res.outcome}${extra.length ? ` (${extra.join(", ")})` : ""}`);
  }
  lines.push(`event ${r.eventRef}, cognitive tick ${r.cognitiveTick}`);
  const cap = r.capacity;
  if (cap) {
    lines.push(`released now: ${cap.releasedNowBytes} bytes [${cap.releasedNow.join(", ")}]`);
    lines.push(`released after window: ${cap.releasedAfterWindowBytes} bytes [${cap.releasedAfterWindow.join(", ")}]`);
  }
  return lines.join("\n");
}
