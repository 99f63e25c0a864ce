"""A saved trigram vocabulary read back like a flag: every field checked, one InputError naming the file.

``vocab.json`` (:meth:`pipeline.features.trigram.TrigramVocab.save`) comes back from the store or from a
model folder; a file that is not JSON, or whose trigrams, counts or ``min_count`` are not what the writer
writes, stops with the file and the field instead of a traceback deep in the encoder.
"""
from __future__ import annotations

import json
from typing import Any

from pipeline.core.errors import InputError
from pipeline.storage.artifacts import is_count, is_positive_int
from pipeline.storage.store import Store


def read_vocab_json(store: Store, relpath: str) -> Any:
    """The JSON stored at ``relpath``; an InputError naming it when it is missing or not JSON text."""
    where = store.uri(relpath)
    if not store.exists(relpath):
        raise InputError(where, "missing")
    try:
        return json.loads(store.read_bytes(relpath).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(where, f"not a JSON vocabulary ({type(exc).__name__})") from None


def checked_fields(data: Any, source: str) -> tuple[list[str], list[int] | None, int]:
    """(trigrams, counts, min_count) of a saved vocabulary, each checked; an InputError naming ``source`` and
    the field otherwise."""
    if not isinstance(data, dict) or "trigrams" not in data:
        raise InputError(source, "carries no trigram vocabulary")
    trigrams, counts, min_count = data["trigrams"], data.get("counts"), data.get("min_count", 1)
    if not isinstance(trigrams, list) or not all(isinstance(t, str) and t for t in trigrams):
        raise InputError(source, "trigrams: not a list of non-empty texts")
    if len(set(trigrams)) != len(trigrams):
        raise InputError(source, "trigrams: a trigram appears twice")
    if counts is not None and (not isinstance(counts, list) or len(counts) != len(trigrams)
                               or not all(is_count(c) for c in counts)):
        raise InputError(source, f"counts: not a list of {len(trigrams):,} non-negative integers")
    if not is_positive_int(min_count):
        raise InputError(source, f"min_count: {min_count!r} is not a positive integer")
    return trigrams, counts, min_count
