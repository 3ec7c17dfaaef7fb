"""The prompt `morphz_memory_guide`: how to keep memory in Morphz through these tools,
taught with the release example of the seeds (002: a test report digested into a
derived frame, the plan revised, the report retired) and the conflict rule."""
from __future__ import annotations

import mcp_types as types

NAME = "morphz_memory_guide"
DESCRIPTION = ("How to keep an agent's memory in Morphz with these tools: observations, "
               "the Mind's frames, context-tx transactions (worked release example), "
               "recall, and what to do on TX_CONFLICT.")

GUIDE = """\
You keep your memory in Morphz. It has three layers:
- the event history: every observation (user messages, tool results...) is an immutable
  event with a short ref @eN. Record one with morphz_observe; it returns its @eN.
- the Mind: frames (your beliefs, plans, conclusions), each with an id, a body of
  S-expressions, sources and named relations. You change it only with context-tx
  transactions (morphz_transact). Read it with morphz_frames / morphz_frame.
- the Context Encoding: what you should see on each turn (morphz_encoding), with the
  context revision you read and an activation id.

A transaction:

(context-tx
  (base-version N)                 ; required: the revision you read
  (reason "...")                   ; required when retiring, unprotecting or retiring a session
  (create ID BODY...)              ; a new frame
  (derive ID (from @eN ID...) BODY...)  ; a frame with its sources
  (revise ID BODY...)              ; REPLACES the whole body: restate every field you keep
  (relate SUBJECT NAME OBJECT)     (unrelate SUBJECT NAME OBJECT)
  (retire ID-or-@eN ...)           (restore ID-or-@eN ...)
  (protect ID-or-@eN ...)          (unprotect ID-or-@eN ...)
  (place ID (before G))  (checkpoint NAME)  (rollback NAME))

Every step is checked before anything changes; one invalid step rejects the whole
transaction. Retiring an observation takes it out of the next encoding at once (it stays
readable and searchable); retiring a frame starts an organizing window (8 ticks by
default) during which it stays visible and can be revised, restored or protected.

Worked example: a release.
1. The user asks: morphz_observe {"kind": "user-message", "text": "Ship v1 once the
   regression tests pass."} -> @e1. morphz_encoding shows it; revision 0.
2. You record your plan: morphz_transact {"tx": "(context-tx (base-version 0) (create
   release (goal ship-v1) (stage waiting-tests)))"} -> revision 1.
3. The test report arrives: morphz_observe {"kind": "tool-result", "text": "regression
   suite: 120 passed, 0 failed"} -> say @e4. Digest it in one transaction:

(context-tx
  (base-version 1)
  (reason "test results absorbed, continue the release")
  (derive test-result (from @e4) (tests passed))
  (revise release (goal ship-v1) (stage packaging))
  (relate test-result supports release)
  (retire @e4))

   derive keeps where "tests passed" came from (@e4); revise restates the goal because a
   revision replaces the whole body; relate records why the plan moved; retire takes the
   long report out of your active context - it stays in the history.
4. Later, to check the evidence: morphz_recall_search {"query": "regression suite"} finds
   @e4 (state retired); morphz_recall_traverse {"frame": "test-result"} walks to it;
   morphz_recall_read {"ref": "@e4"} gives its whole text; morphz_frame {"id": "release",
   "at_revision": 1} shows the plan before the change.

Conflicts: a transaction based on an old revision that touches something changed since
fails as a tool error starting TX_CONFLICT, naming the changed boundaries (e.g.
frame:release) and the latest revision. Do not resend it: reread those frames
(morphz_frame), merge both changes, and submit one transaction with base-version set to
the latest revision.

Errors always start with a reason code (FORBIDDEN, FRAME_NOT_FOUND, TX_CONFLICT...)
followed by JSON details. Long outputs come in pages: follow next_cursor (or
next_offset); nothing is cut silently. Secrets show as [secret REF].
"""


def prompt() -> types.Prompt:
    return types.Prompt(name=NAME, description=DESCRIPTION, arguments=[])


def messages() -> types.GetPromptResult:
    return types.GetPromptResult(description=DESCRIPTION, messages=[
        types.PromptMessage(role="user", content=types.TextContent(type="text", text=GUIDE))])
