"""Protobuf <-> domain for the storage service: keys, change-feed pages and backup
manifests, both ways, for its servicer and its client alike."""
from __future__ import annotations

from dataclasses import asdict

from morphz.api.common.v1 import common_pb2
from morphz.api.storage.v1 import storage_pb2 as pb
from morphz.services.storage.backup import Manifest
from morphz.shared.errors import MorphzError
from morphz.shared.storage.api import Key
from morphz.shared.storage.feed import Change, FeedPage


def key_from_proto(parts) -> Key:
    out = []
    for p in parts:
        which = p.WhichOneof("part")
        if which is None:
            raise MorphzError("STORAGE_KEY_INVALID", "empty key part")
        out.append(getattr(p, which))
    return tuple(out)


def key_to_proto(key: Key) -> list[common_pb2.KeyPart]:
    return [common_pb2.KeyPart(number=k) if isinstance(k, int) else common_pb2.KeyPart(text=k)
            for k in key]


def change_to_proto(c: Change) -> pb.Change:
    return pb.Change(position=c.position, context=c.context, commit_seq=c.commit_seq,
                     events=c.events, frames=c.frames, erased=c.erased,
                     erased_frames=c.erased_frames, deleted=c.deleted)


def page_to_proto(page: FeedPage) -> pb.WatchResponse:
    return pb.WatchResponse(changes=[change_to_proto(c) for c in page.changes], head=page.head,
                            store=page.store)


def page_from_proto(r: pb.WatchResponse) -> FeedPage:
    return FeedPage([Change(c.position, c.context, c.commit_seq, tuple(c.events),
                            tuple(c.frames), tuple(c.erased), tuple(c.erased_frames),
                            c.deleted)
                     for c in r.changes], r.head, r.store)


def manifest_to_proto(m: Manifest) -> pb.BackupManifest:
    return pb.BackupManifest(**asdict(m))


def manifest_from_proto(m: pb.BackupManifest) -> Manifest:
    return Manifest(feed_head=m.feed_head, contexts=m.contexts, taken_at=m.taken_at,
                    size=m.size, sha256=m.sha256, store=m.store, version=m.version)
