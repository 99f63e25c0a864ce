"""One catalogue landing file, read as a stream (:mod:`.stream`, the click readers' rules), every row checked.

A row is kept as a :class:`CatalogRow` or rejected with its reason (the quarantine's) as a :class:`Rejected`, in
line order; a day's files are read within :data:`CATALOG_DAY` (:func:`day_rows`). Besides the readers' own policies (line and field sizes, UTF-8, empty files:
:mod:`pipeline.ingest.formats.records`):

* ``product_id``: a string of at most :data:`MAX_ID_CHARS` characters, kept as given, so it must be written one way
  only (:func:`check_id`): no hidden character (control, format or separator: NUL, a line break, U+200B; see
  :data:`pipeline.text.textnorm.HIDDEN_CATEGORIES`), no space at either end, and in Unicode NFKC form (``ｐ１``,
  an NFD accent or a ligature is refused, not rewritten). Two rows name the same product only when their ids are
  the same string; case counts (``P1`` is not ``p1``);
* ``op``: ``upsert`` or ``retire`` (any case, spaces around ignored); empty, null or absent is ``upsert``;
  a snapshot lists the live products, so a ``retire`` there is rejected;
* ``title`` (an upsert's): at most :data:`MAX_TITLE_CHARS` characters with something visible (not only spaces and
  hidden characters such as U+200B) and no C0 control character or DEL but whitespace (NUL, ESC; tabs and line
  breaks normalisation turns into spaces), normalised as click titles are (:func:`pipeline.text.textnorm.normalize`)
  with the raw text kept beside it. C1 controls (U+0080-U+009F) are kept: real feeds have them in titles decoded
  with the wrong code page (the Home Depot titles do), and ``deepsent search`` prints every hidden character escaped;
* every other column with a value (not null, not empty) is an attribute: a JSON object, keys sorted, at most
  :data:`MAX_FIELD_CHARS` characters.
"""
from __future__ import annotations

import itertools
import json
import posixpath
import unicodedata
from typing import Any, Iterator, Mapping, NamedTuple

from pipeline.core.errors import InputError
from pipeline.core.readable import readable_bytes
from pipeline.ingest.catalog.stream import landing_records
from pipeline.ingest.formats import RowError
from pipeline.ingest.formats.records import MAX_FIELD_CHARS, MAX_LINE_BYTES, check_string, preview
from pipeline.storage.schemas import CATALOG_LANDING_COLUMNS, CATALOG_OPS
from pipeline.storage.store import Store
from pipeline.text.bounded_files import FileBounds
from pipeline.text.textnorm import blank, hidden_char, normalize

#: How much of one day's catalogue files deepsent reads. A day's catalogue is held in memory, about 1 KB a row at its
#: peak when ids and titles are a few dozen characters (its file is read in pieces: :mod:`.stream`), so the day's
#: rows and bytes are bounded; a line is bounded as the click readers bound it (over it: quarantined unread).
CATALOG_DAY = FileBounds("the catalogue files of one day", 1_000_000_000, 2_000_000, MAX_LINE_BYTES)
_MOST = (f"the most deepsent reads of {CATALOG_DAY.what} (it holds the day's catalogue in memory); nothing was "
         "written: spread the deltas over more days (a snapshot this large is a catalogue too large to hold)")
#: A data file whose name starts with this is part of the day's snapshot; any other is a delta.
SNAPSHOT_PREFIX = "snapshot"
MAX_TITLE_CHARS = 1024
MAX_ID_CHARS = 256
_NAMED = frozenset((*CATALOG_LANDING_COLUMNS, "op"))
_NO_ATTRIBUTES = "{}"


class CatalogRow(NamedTuple):
    """A row that passed the checks (a retirement has empty titles and no attributes)."""

    line: int
    raw: str
    product_id: str
    retire: bool
    title_raw: str
    title: str
    attributes: str


class Rejected(NamedTuple):
    """A row that did not: its line, the reason and its source text."""

    line: int
    reason: str
    raw: str


def is_snapshot(path: str) -> bool:
    """Whether the file at ``path`` is part of a snapshot (its name starts with SNAPSHOT_PREFIX)."""
    return posixpath.basename(path).startswith(SNAPSHOT_PREFIX)


def day_rows(store: Store, paths: list[str]) -> list[tuple[str, Iterator[CatalogRow | Rejected]]]:
    """Each of a day's files with its rows (:func:`catalog_rows`), read within :data:`CATALOG_DAY`: files of more
    bytes stop the day before any is read, more rows stop it at the row that passes the bound (an InputError
    naming the file and the row)."""
    size = sum(store.size(p) for p in paths)
    if size > CATALOG_DAY.max_bytes:
        raise InputError(store.uri(posixpath.dirname(paths[0])), f"{readable_bytes(size)} of files, more than "
                         f"{readable_bytes(CATALOG_DAY.max_bytes)}, {_MOST}")
    taken = itertools.count(1)
    return [(path, _counted(store, path, catalog_rows(store, path), taken)) for path in paths]


def _counted(store: Store, path: str, rows: Iterator[CatalogRow | Rejected],
             taken: Iterator[int]) -> Iterator[CatalogRow | Rejected]:
    for row in rows:
        if next(taken) > CATALOG_DAY.max_lines:
            raise InputError(store.uri(path), f"more than {CATALOG_DAY.max_lines:,} rows, {_MOST}", row=row.line)
        yield row


def catalog_rows(store: Store, path: str) -> Iterator[CatalogRow | Rejected]:
    """Every row of one catalogue file, checked, in line order, as it is read; a file no row of which can be read
    is an InputError naming it."""
    snapshot = is_snapshot(path)
    for record in landing_records(store, path):
        try:
            if record.error is not None or record.values is None:
                raise RowError(record.error or "no values")
            row: CatalogRow | Rejected = CatalogRow(record.line, record.raw, *check_row(record.values, snapshot))
        except RowError as exc:
            row = Rejected(record.line, str(exc), record.raw)
        yield row


def check_row(values: Mapping[str, Any], snapshot: bool) -> tuple[str, bool, str, str, str]:
    """``(product_id, retire, title_raw, title, attributes)`` of a row; RowError with the reason."""
    product_id = check_id(_text(values, "product_id", MAX_ID_CHARS))
    op = values.get("op")
    if op is not None and not (isinstance(op, str) and op.strip().lower() in ("", *CATALOG_OPS)):
        raise RowError(f"field op: expected {' or '.join(CATALOG_OPS)}, got {preview(op)}")
    if op is not None and op.strip().lower() == "retire":
        if snapshot:
            raise RowError("field op: 'retire' in a snapshot, which lists the live products (leave a retired one out)")
        return product_id, True, "", "", "{}"
    title_raw = _text(values, "title", MAX_TITLE_CHARS)
    control = _control(title_raw)
    if control is not None:
        raise RowError(f"field title: control character {_named(control)}; a title is text")
    if blank(title_raw):
        raise RowError(f"field title: nothing visible (only spaces and {_named(hidden_char(title_raw))})")
    title = normalize(title_raw)
    if not title:
        raise RowError("field title: empty after normalisation")
    return product_id, False, title_raw, title_raw if title == title_raw else title, attributes(values)


def check_id(product_id: str) -> str:
    """``product_id`` when it is written one way only (see the module's docstring); RowError naming the rule."""
    hidden = hidden_char(product_id)
    if hidden is not None:
        raise RowError(f"field product_id: hidden character {_named(hidden)} in {preview(product_id)}; an id is "
                       "visible text")
    if product_id != product_id.strip():
        raise RowError(f"field product_id: spaces around {preview(product_id)}; an id is written without them")
    if not unicodedata.is_normalized("NFKC", product_id):
        raise RowError(f"field product_id: {preview(product_id)} is not in Unicode NFKC form (which writes it "
                       f"{preview(unicodedata.normalize('NFKC', product_id))}); an id is written one way only")
    return product_id


def _control(text: str) -> str | None:
    """The first C0 control character or DEL of ``text`` that is not whitespace (NUL, ESC), or None."""
    if text.isprintable():
        return None
    return next((c for c in text if (c < " " or c == "\x7f") and not c.isspace()), None)


def _named(char: str | None) -> str:
    """A character as ``U+200B ZERO WIDTH SPACE``."""
    if char is None:
        return "nothing else"
    return f"U+{ord(char):04X}" + (f" {unicodedata.name(char)}" if unicodedata.name(char, "") else "")


def attributes(values: Mapping[str, Any]) -> str:
    """The row's other columns with a value, as a JSON object with sorted keys; RowError when it cannot be one."""
    extra = {name: value for name, value in values.items() if name not in _NAMED and value is not None and value != ""}
    if not extra:
        return _NO_ATTRIBUTES  # one string for every product without attributes
    try:
        text = json.dumps(extra, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise RowError("attributes: not valid Unicode (a lone surrogate escape)") from None
    except ValueError as exc:
        raise RowError(f"attributes: {exc}") from None
    if len(text) > MAX_FIELD_CHARS:
        raise RowError(f"attributes: {len(text)} characters as JSON, over the limit of {MAX_FIELD_CHARS}")
    return text


def _text(values: Mapping[str, Any], name: str, limit: int) -> str:
    value = values.get(name)
    if value is None:
        raise RowError(f"field {name}: missing or null")
    check_string(name, value)
    if len(value) > limit:
        raise RowError(f"field {name}: {len(value)} characters, over the limit of {limit}")
    return value
