"""The bot rule of :mod:`pipeline.ingest.bots`, computed column-wise with numpy over a date's rows.

Same users, counts and order as :func:`pipeline.ingest.bots.find_bots` (a test holds them equal), without
a Python loop over the rows: searches are (user, impression) pairs timed by their earliest row,
sorted by user then time, and each search counts the searches of its user in the window that
starts with it (one ``searchsorted`` over user-offset timestamps).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.ingest.bots import BOT_MIN_SEARCHES, BOT_WINDOW_SECONDS, BotUser, find_bots


def find_bots_columns(
    user_ids: pa.Array | pa.ChunkedArray,
    impression_ids: pa.Array | pa.ChunkedArray,
    ts_ms: np.ndarray,
    window_seconds: float = BOT_WINDOW_SECONDS,
    min_searches: int = BOT_MIN_SEARCHES,
) -> list[BotUser]:
    """:func:`pipeline.ingest.bots.find_bots` of Arrow columns (sorted by user id)."""
    if len(ts_ms) == 0:
        return []
    window_ms = int(window_seconds * 1000)
    users = pc.dictionary_encode(user_ids)
    users = users.combine_chunks() if isinstance(users, pa.ChunkedArray) else users
    user = users.indices.to_numpy().astype(np.int64)
    impression = pc.dictionary_encode(impression_ids)
    impression = (impression.combine_chunks() if isinstance(impression, pa.ChunkedArray) else impression).indices.to_numpy()
    stamp = np.asarray(ts_ms, dtype=np.int64)
    span = int(stamp.max()) - int(stamp.min()) + window_ms + 1
    if span * (int(user.max()) + 1) >= 2**62:  # user-offset keys would overflow: the plain loop
        return find_bots(users.to_pylist(), pa.array(impression_ids).to_pylist(), stamp, window_seconds, min_searches)
    order = np.lexsort((stamp, impression, user))
    user, impression, stamp = user[order], impression[order], stamp[order]
    first = np.ones(len(user), dtype=bool)
    first[1:] = (user[1:] != user[:-1]) | (impression[1:] != impression[:-1])
    user, stamp = user[first], stamp[first]
    order = np.lexsort((stamp, user))
    user, stamp = user[order], stamp[order]
    starts = np.flatnonzero(np.r_[True, user[1:] != user[:-1]])
    searches = np.diff(np.r_[starts, len(user)])
    key = user * span + (stamp - stamp.min())
    in_window = np.searchsorted(key, key + window_ms, side="left") - np.arange(len(key))
    busiest = np.maximum.reduceat(in_window, starts)
    names = users.dictionary.to_pylist()
    flagged = np.flatnonzero((searches >= min_searches) & (busiest >= min_searches))
    bots = [BotUser(names[user[starts[k]]], int(searches[k]), int(busiest[k])) for k in flagged]
    return sorted(bots, key=lambda bot: bot.user_id)
