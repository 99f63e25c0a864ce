"""Bot traffic: users who search faster than a person can type and read.

The rule, in one sentence (also printed by ``deepsent ingest``): a user is a bot for the day
when :data:`BOT_MIN_SEARCHES` or more of their searches (distinct impressions) start within
one :data:`BOT_WINDOW_SECONDS`-second window. A person needs several seconds to type a query
and look at the results, so ten searches in a minute is not human; the simulator's people
search at most every few seconds within a session, its bots every 1-4 seconds. Every row of
a bot user of that day is removed and counted, and the manifest lists the users.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

BOT_WINDOW_SECONDS = 60
BOT_MIN_SEARCHES = 10
BOT_RULE = (
    f"a user is a bot for the day when {BOT_MIN_SEARCHES} or more of their searches start "
    f"within one {BOT_WINDOW_SECONDS}-second window"
)


@dataclass(frozen=True)
class BotUser:
    """A user flagged by the rule, with the evidence."""

    user_id: str
    searches: int
    max_searches_in_window: int

    def as_dict(self) -> dict[str, object]:
        """Plain dict for manifests."""
        return asdict(self)


def find_bots(
    user_ids: Sequence[str],
    impression_ids: Sequence[str],
    ts_ms: Sequence[int] | np.ndarray,
    window_seconds: float = BOT_WINDOW_SECONDS,
    min_searches: int = BOT_MIN_SEARCHES,
) -> list[BotUser]:
    """Users whose busiest ``window_seconds`` hold ``min_searches`` or more searches (sorted by id).

    The inputs are parallel columns of result rows; a search is a distinct (user, impression),
    timed by its earliest row.
    """
    first_seen: dict[tuple[str, str], int] = {}
    for user, impression, stamp in zip(user_ids, impression_ids, np.asarray(ts_ms, dtype=np.int64).tolist()):
        key = (user, impression)
        if stamp < first_seen.get(key, stamp + 1):
            first_seen[key] = stamp
    per_user: dict[str, list[int]] = {}
    for (user, _), stamp in first_seen.items():
        per_user.setdefault(user, []).append(stamp)
    window_ms = int(window_seconds * 1000)
    bots = []
    for user in sorted(per_user):
        stamps = per_user[user]
        if len(stamps) < min_searches:
            continue
        busiest = max_in_window(np.sort(np.asarray(stamps, dtype=np.int64)), window_ms)
        if busiest >= min_searches:
            bots.append(BotUser(user, len(stamps), busiest))
    return bots


def max_in_window(sorted_ms: np.ndarray, window_ms: int) -> int:
    """Largest number of sorted timestamps inside any half-open window [t, t + window_ms)."""
    if sorted_ms.size == 0:
        return 0
    ends = np.searchsorted(sorted_ms, sorted_ms + window_ms, side="left")
    return int((ends - np.arange(sorted_ms.size)).max())
