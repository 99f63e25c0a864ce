"""Reader for the TREC Session track log (``sessiontrack2013.xml``) exactly as NIST published it.

The log is flattened to landing rows, one per shown result:

* ``session_id`` = the session ``num``; ``user_id`` = the same (the log has no user ids and
  each session was one searcher);
* ``impression_id`` = ``<session>.<interaction num>``; ``query`` = the interaction's query;
* ``position`` = the result ``rank``; ``doc_id`` = its ClueWeb12 id; ``title`` = its title;
* ``clicked`` = true when a ``<click>`` of the interaction names that rank (repeat clicks on the
  same result count once);
* ``ts`` = midnight UTC of the landing partition date + session ``starttime`` + interaction
  ``starttime`` seconds (the log holds only relative times).

``<currentquery>`` (the last query of a session, shown without results) yields no rows.
Malformed XML stops with an error naming the file and the line; a result with an unusable
field (starttimes that give no representable time included) becomes a record that is
quarantined, with the line of its ``<result>``.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any
from xml.parsers import expat

from pipeline.core.errors import InputError
from pipeline.ingest.formats.records import RawRecord, require_bytes

_TEXT_TAGS = {"query", "title", "clueweb12id", "rank"}


@dataclass
class _Result:
    line: int
    rank: str
    text: dict[str, str] = field(default_factory=dict)


@dataclass
class _State:
    """Where the expat callbacks are inside the document."""

    day_start: dt.datetime
    records: list[RawRecord] = field(default_factory=list)
    stack: list[str] = field(default_factory=list)
    session: str = ""
    session_start: float = 0.0
    interaction: str = ""
    interaction_start: float = 0.0
    query: str = ""
    results: list[_Result] = field(default_factory=list)
    clicked_ranks: set[str] = field(default_factory=set)
    text: list[str] = field(default_factory=list)


def read_trec_xml(data: bytes, source: str, partition_date: dt.date | None = None) -> list[RawRecord]:
    """Every shown result of a TREC Session track log as a landing record (see module docstring)."""
    require_bytes(source, data)
    if partition_date is None:
        raise InputError(source, "a TREC Session log needs the partition date to build timestamps")
    state = _State(dt.datetime.combine(partition_date, dt.time(), tzinfo=dt.timezone.utc))
    parser = expat.ParserCreate()
    parser.StartElementHandler = lambda name, attrs: _start(state, parser.CurrentLineNumber, name, attrs)
    parser.EndElementHandler = lambda name: _end(state, name)
    parser.CharacterDataHandler = state.text.append
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise InputError(source, f"malformed XML: {expat.ErrorString(exc.code)} (column {exc.offset})", row=exc.lineno) from None
    except ValueError as exc:
        raise InputError(source, f"unusable TREC Session log: {exc}", row=parser.CurrentLineNumber) from None
    return state.records


def _start(state: _State, line: int, name: str, attrs: dict[str, str]) -> None:
    if not state.stack and not name.startswith("sessiontrack"):
        raise ValueError(f"root element <{name}> is not <sessiontrack...>")
    state.stack.append(name)
    state.text.clear()
    if name == "session":
        state.session, state.session_start = attrs.get("num", ""), _seconds(attrs)
    elif name == "interaction":
        state.interaction, state.interaction_start = attrs.get("num", ""), _seconds(attrs)
        state.query, state.results, state.clicked_ranks = "", [], set()
    elif name == "result":
        state.results.append(_Result(line, attrs.get("rank", "")))


def _end(state: _State, name: str) -> None:
    state.stack.pop()
    parent = state.stack[-1] if state.stack else ""
    if name in _TEXT_TAGS:
        text = "".join(state.text)
        if name == "query" and parent == "interaction":
            state.query = text
        elif name == "rank" and parent == "click":
            state.clicked_ranks.add(text.strip())
        elif parent == "result" and state.results:
            state.results[-1].text[name] = text
    elif name == "interaction":
        _emit(state)
    state.text.clear()


def _emit(state: _State) -> None:
    error = None
    try:
        stamp = state.day_start + dt.timedelta(seconds=state.session_start + state.interaction_start)
    except (OverflowError, ValueError):  # inf, nan or thousands of years: the rows are quarantined
        stamp = state.day_start
        error = f"field ts: session starttime {state.session_start:g} + interaction starttime {state.interaction_start:g} s is out of range"
    for result in state.results:
        values: dict[str, Any] = {
            "ts": stamp.isoformat(timespec="milliseconds"),
            "user_id": state.session,
            "session_id": state.session,
            "impression_id": f"{state.session}.{state.interaction}",
            "query": state.query,
            "doc_id": result.text.get("clueweb12id", "").strip(),
            "title": result.text.get("title", ""),
            "position": result.rank,
            "clicked": result.rank.strip() in state.clicked_ranks,
        }
        raw = f"session {state.session} interaction {state.interaction} result rank {result.rank!r}: {values['title']!r}"
        state.records.append(RawRecord(result.line, raw, None if error else values, error))


def _seconds(attrs: dict[str, str]) -> float:
    try:
        return float(attrs.get("starttime", "0"))
    except ValueError:
        raise ValueError(f"starttime {attrs.get('starttime')!r} is not a number") from None
