"""What a context's tantivy index holds: its schema (our own ICU terms, joined by spaces
and split again by tantivy's whitespace tokenizer), the documents written to it and how
one is made a tantivy document or the JSON text add_json takes. Documents are keyed
(`e:<seq>`, `f:<frame id>`) so indexing a change is an upsert and re-applying it changes
nothing; the `__meta__` document holds the context version the index covers."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Optional, Union

import tantivy

from morphz.shared.values import HitKey

META_KEY = "__meta__"
_TOKENIZER = "morphz_terms"


def _schema() -> tantivy.Schema:
    b = tantivy.SchemaBuilder()
    b.add_text_field("key", stored=True, tokenizer_name="raw", index_option="basic")
    b.add_text_field("kind", tokenizer_name="raw", index_option="basic")
    b.add_text_field("session", tokenizer_name="raw", index_option="basic")
    b.add_text_field("terms", tokenizer_name=_TOKENIZER, index_option="freq")
    b.add_integer_field("time", indexed=True, fast=True)
    # Events' seq (-1 for frames): hits of events need no stored-document fetch.
    b.add_integer_field("seq", fast=True)
    b.add_text_field("meta", stored=True, tokenizer_name="raw", index_option="basic")
    return b.build()


SCHEMA = _schema()


@dataclass
class Doc:
    key: str
    kind: str          # "event" | "frame"
    terms: Union[str, list[str]]  # a list, or already joined by spaces
    time_us: Optional[int]
    session: str = ""


def open_index(path: str, create: bool) -> tantivy.Index:
    if create:
        os.makedirs(path, exist_ok=True)
    index = tantivy.Index(SCHEMA, path=path, reuse=True)
    index.register_tokenizer(
        _TOKENIZER, tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build())
    index.config_reader(reload_policy="manual")
    return index


def document(d: Doc) -> tantivy.Document:
    doc = tantivy.Document(
        key=d.key, kind=d.kind, session=d.session,
        terms=d.terms if isinstance(d.terms, str) else " ".join(d.terms),
        seq=HitKey.parse(d.key).seq)
    if d.time_us is not None:
        doc.add_integer("time", d.time_us)
    return doc


_STR = json.encoder.encode_basestring  # a JSON string literal (non-ASCII kept as is)


def doc_json(d: Doc) -> str:
    """`d` as the JSON document tantivy's add_json takes: built where the Doc is made
    (a rebuild's worker processes), it makes adding it the cheapest call there is.
    Assembled by hand: json.dumps of the dict cost as much as parsing the event."""
    terms = d.terms if isinstance(d.terms, str) else " ".join(d.terms)
    seq = HitKey.parse(d.key).seq
    time = "" if d.time_us is None else f',"time":{int(d.time_us)}'
    return (f'{{"key":{_STR(d.key)},"kind":{_STR(d.kind)},"session":{_STR(d.session)},'
            f'"terms":{_STR(terms)},"seq":{seq}{time}}}')


