"""The read model's Mind (view.py): frames and their versions, named relations, the
projection order and checkpoints.

Frames come in projection order (`in_placement_order`): the placed ones as `place` left
them, then the rest by id, as ListFrames shows them.
"""
from __future__ import annotations

import json
from typing import Iterator, Optional, TypeVar

from morphz.shared.mind import records as R
from morphz.shared.mind.view_rows import UNREAD, ViewRows

T = TypeVar("T")


class FrameReads(ViewRows):
    def frame(self, frame_id: str) -> Optional[R.Frame]:
        f = self._frames.get(frame_id, UNREAD)
        if f is UNREAD:
            f = self._frames[frame_id] = R.loads(R.Frame, self._get("frames", (frame_id,)))
        return f

    def frames(self) -> Iterator[R.Frame]:
        for _, raw in self._scan("frames"):
            yield R.loads(R.Frame, raw)

    def frame_states(self) -> Iterator[str]:
        """Each frame's state, bodies undecoded."""
        for raw in self._scan_values("frames"):
            yield R.frame_state(raw)

    def frame_ids(self, after: Optional[str] = None) -> Iterator[str]:
        """Every frame's id, in order (those after the id `after`), bodies unread."""
        for (fid,) in self._scan_keys("frames", None if after is None else (after,)):
            yield fid

    def frames_in_order(self) -> list[R.Frame]:
        """Every frame in projection order: the placed ones as `place` left them, then
        the rest by id (as ListFrames shows them)."""
        return [R.loads(R.Frame, raw) for _, raw in self.frame_rows_in_order()]

    def frame_rows_in_order(self) -> list[tuple[str, bytes]]:
        """frames_in_order as (frame id, stored row), undecoded."""
        return self.in_placement_order({k[0]: (k[0], raw) for k, raw in self._scan("frames")})

    def frame_rows(self) -> list[bytes]:
        """Every frame's stored row, undecoded and keys unread: for a reader that keeps
        what it made of a row from one request to the next (encoding's RowCache), and
        orders what it made with in_placement_order."""
        return list(self._scan_values("frames"))

    def in_placement_order(self, by_id: dict[str, T]) -> list[T]:
        """The values of `by_id` (frame id -> what was made of that frame) in projection
        order: the placed frames as `place` left them, then the rest by id."""
        order = [fid for fid in self.order() if fid in by_id]
        placed = set(order)
        if len(placed) < len(by_id):  # placed is a subset: equal sizes, no others
            order += sorted(fid for fid in by_id if fid not in placed)
        return [by_id[fid] for fid in order]

    def frame_at(self, frame_id: str, revision: int) -> Optional[R.Frame]:
        """The frame as it stood at context revision `revision` (committed state only)."""
        for _, raw in self._reader.scan("frame_versions", (frame_id,),
                                        after=(frame_id, revision + 1), limit=1, reverse=True):
            return R.loads(R.Frame, raw)
        return None

    def frame_versions(self) -> Iterator[R.Frame]:
        """Every stored version of every frame: by frame id, then context revision (an
        erasure's plan reads them all)."""
        for _, raw in self._scan("frame_versions"):
            yield R.loads(R.Frame, raw)

    def last_version(self, frame_id: str) -> Optional[R.Frame]:
        rows = list(self._scan("frame_versions", (frame_id,)))
        return R.loads(R.Frame, rows[-1][1]) if rows else None

    def prefetch_frame_views(self, frame_ids: list[str], *, max_bytes: int) -> None:
        """Read ahead what views of these frames read: their rows (about `max_bytes` at
        most) and their relations both ways, in one round trip each where the store is
        remote (a page of a frame listing)."""
        self.prefetch_tables({"frames": [(fid,) for fid in frame_ids]}, max_bytes=max_bytes)
        self.prefetch_scans([(table, (fid,)) for fid in frame_ids
                             for table in ("relations", "relations_in")])

    # -- keyed by their stored form, for a cache that outlives a request (encoding) ------
    def frame_cache_keys(self) -> list[bytes]:
        """Every frame's cache key (its stored form: equal keys are equal frames, a
        changed frame has a new key), in no particular order; frame_of_key decodes one."""
        return self.frame_rows()

    @staticmethod
    def frame_of_key(key: bytes) -> R.Frame:
        return R.loads(R.Frame, key)

    # -- relations, order and checkpoints ---------------------------------------------
    def has_relation(self, s: str, name: str, o: str) -> bool:
        return self._get("relations", (s, name, o)) is not None

    def relations_from(self, s: str) -> list[tuple[str, str, str]]:
        return [k for k, _ in self._scan("relations", (s,))]

    def relations_to(self, o: str) -> list[tuple[str, str, str]]:
        return [(s, n, o2) for (o2, n, s), _ in self._scan("relations_in", (o,))]

    def relations(self) -> list[tuple[str, str, str]]:
        return [k for k, _ in self._scan("relations")]

    def has_relations(self) -> bool:
        """Whether any relation exists (one row read at most)."""
        return self._exists("relations")

    def order(self) -> list[str]:
        return [raw.decode() for raw in self._scan_values("order")]

    def order_after(self, rank: Optional[int] = None) -> Iterator[tuple[int, str]]:
        """(rank, frame id) of the order's entries past `rank` (all: None), in order: a
        page of a listing reads from where the last one ended, not the whole order."""
        for (r,), raw in self._scan("order", after=None if rank is None else (rank,)):
            yield r, raw.decode()

    def unplaced_frame_ids(self, after: Optional[str] = None) -> Iterator[str]:
        """Ids of the frames the order does not name (past the id `after`), by id: the
        frames' keys merged with the ranks' (both by frame id), no row read or held."""
        ranked = self._scan_keys("order_rank", None if after is None else (after,))
        next_ranked = next(ranked, None)
        for fid in self.frame_ids(after):
            while next_ranked is not None and next_ranked[0] < fid:
                next_ranked = next(ranked, None)
            if next_ranked is None or next_ranked[0] != fid:
                yield fid

    def checkpoint(self, name: str) -> Optional[R.Checkpoint]:
        return R.loads(R.Checkpoint, self._get("checkpoints", (name,)))

    def checkpoints(self) -> Iterator[R.Checkpoint]:
        for _, raw in self._scan("checkpoints"):
            yield R.loads(R.Checkpoint, raw)

    def checkpoint_revisions(self) -> list[list]:
        """[name, revision] of every checkpoint, without decoding the Minds they hold."""
        return [[k[0], json.loads(raw)["revision"]] for k, raw in self._scan("checkpoints")]
