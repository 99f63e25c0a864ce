"""Validation of the pair files featurize reads: usable rows kept, the others quarantined by row.

``check_pairs`` reads ``pairs/<split>.parquet`` (or a ``skipped/<split>.parquet`` with ``carry``
columns) and sends every row with empty or non-normalised text or the wrong split to the
quarantine with the file, the 1-based row and the reason; rows in = rows kept + rows quarantined.
"""
from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.core.errors import InputError
from pipeline.storage.quarantine import Quarantine
from pipeline.storage.store import Store
from pipeline.text.textnorm import normalize

_TEXT = ("query", "doc_id", "title")


@dataclass
class CheckedPairs:
    """A pairs file after validation: usable rows (with ``pair_id`` = 0-based row) and quarantined ones."""

    relpath: str
    sha256: str
    rows_in: int
    clean: pa.Table
    rows_quarantined: int


def check_pairs(store: Store, relpath: str, split: str, quarantine: Quarantine, carry: Sequence[str] = (),
                missing_hint: str = "no pairs found; run `deepsent pairs` first") -> CheckedPairs:
    """Read one pairs file; rows with empty or non-normalised text or a wrong split are quarantined.

    ``carry`` names further columns (e.g. ``tier``) kept in ``clean`` beside query, doc_id, title.
    """
    uri = store.uri(relpath)
    if not store.exists(relpath):
        raise InputError(uri, missing_hint)
    data = store.read_bytes(relpath)
    try:
        table = pq.read_table(io.BytesIO(data))
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(uri, f"not a readable Parquet file: {exc}") from None
    missing = [c for c in (*_TEXT, *carry) if c not in table.column_names]
    if missing:
        raise InputError(uri, f"missing column(s) {missing}; expected the schema of pipeline.storage.schemas")
    reason = _reasons(table, split)
    bad = np.flatnonzero(reason != "")
    for i in bad:
        raw = json.dumps(table.slice(int(i), 1).to_pylist()[0], default=str, ensure_ascii=False)
        quarantine.add(relpath, int(i) + 1, str(reason[i]), raw)
    columns = [*_TEXT, *carry]
    clean = table.select(columns).append_column("pair_id", pa.array(np.arange(table.num_rows, dtype=np.int64)))
    schema = pa.schema([(c, pa.string()) for c in _TEXT] + [table.schema.field(c) for c in carry]
                       + [("pair_id", pa.int64())])
    clean = clean.filter(pa.array(reason == "")).cast(schema)
    return CheckedPairs(relpath, hashlib.sha256(data).hexdigest(), table.num_rows, clean, int(bad.size))


def _reasons(table: pa.Table, split: str) -> np.ndarray:
    """Why each row is unusable ("" for a usable row): the first failed check wins."""
    reason = np.full(table.num_rows, "", dtype=object)
    for column in ("doc_id", "query", "title"):
        values = table[column].cast(pa.string()).combine_chunks()
        empty = pc.fill_null(pc.equal(pc.utf8_length(values), 0), True).to_numpy(zero_copy_only=False)
        unnormalised = [t for t in pc.unique(values).drop_null().to_pylist() if normalize(t) != t]
        odd = pc.is_in(values, value_set=pa.array(unnormalised, pa.string())).to_numpy(zero_copy_only=False)
        reason = np.where((reason == "") & empty, f"empty {column}", reason)
        if column != "doc_id":
            reason = np.where((reason == "") & odd, f"{column} is not normalised text", reason)
    if "split" in table.column_names:
        wrong = pc.fill_null(pc.not_equal(table["split"], split), True).to_numpy(zero_copy_only=False)
        reason = np.where((reason == "") & wrong, f"split is not {split!r}", reason)
    return reason


def quarantine_clicked(skipped: CheckedPairs, clicked: pa.Table, quarantine: Quarantine) -> CheckedPairs:
    """Move the skipped rows whose (query, title) was clicked to the quarantine: a clicked title is no negative."""
    sep = "\x1f"
    keys = pc.binary_join_element_wise(skipped.clean["query"], skipped.clean["title"], sep)
    clicked_keys = pc.binary_join_element_wise(clicked["query"], clicked["title"], sep)
    hit = pc.is_in(keys, value_set=clicked_keys).to_numpy(zero_copy_only=False)
    for row in skipped.clean.filter(pa.array(hit)).to_pylist():
        quarantine.add(skipped.relpath, int(row["pair_id"]) + 1, "title is clicked for the query",
                       json.dumps(row, default=str, ensure_ascii=False))
    return CheckedPairs(skipped.relpath, skipped.sha256, skipped.rows_in, skipped.clean.filter(pa.array(~hit)),
                        skipped.rows_quarantined + int(hit.sum()))
