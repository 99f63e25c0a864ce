"""The bot rule: 10 or more searches of one user within one 60-second window."""
from __future__ import annotations

import numpy as np

from pipeline.ingest.bots import BOT_MIN_SEARCHES, BOT_RULE, BOT_WINDOW_SECONDS, find_bots, max_in_window


def searches(user: str, seconds: list[float], rows_each: int = 1) -> tuple[list[str], list[str], list[int]]:
    """Columns of result rows: ``rows_each`` rows per search of ``user`` at ``seconds``."""
    users, impressions, stamps = [], [], []
    for k, second in enumerate(seconds):
        for _ in range(rows_each):
            users.append(user)
            impressions.append(f"{user}.{k}")
            stamps.append(int(second * 1000))
    return users, impressions, stamps


def combine(*parts: tuple[list[str], list[str], list[int]]) -> tuple[list[str], list[str], list[int]]:
    return tuple(sum((list(p[i]) for p in parts), []) for i in range(3))  # type: ignore[return-value]


def test_ten_searches_within_a_minute_is_a_bot_nine_is_not() -> None:
    fast = searches("bot", [1000 + 5.9 * k for k in range(10)])  # 10 searches in 53 s
    nine = searches("quick-person", [1000 + 5.9 * k for k in range(9)] + [2000 + 30 * k for k in range(20)])
    bots = find_bots(*combine(fast, nine))
    assert [b.user_id for b in bots] == ["bot"]
    assert bots[0].searches == 10 and bots[0].max_searches_in_window == 10


def test_window_is_half_open_sixty_seconds() -> None:
    edge = searches("edge", [60 * k / 9 for k in range(10)])  # first and last exactly 60 s apart
    assert find_bots(*edge) == []
    assert [b.user_id for b in find_bots(*edge, window_seconds=60.001)] == ["edge"]


def test_rows_of_one_search_count_once() -> None:
    many_results = searches("person", [10 * k for k in range(5)], rows_each=10)  # 50 rows, 5 searches
    assert find_bots(*many_results) == []


def test_busy_person_spread_over_the_day_is_not_a_bot() -> None:
    person = searches("heavy", [600 * k for k in range(140)])  # 140 searches, one every 10 minutes
    assert find_bots(*person) == []


def test_max_in_window_counts() -> None:
    stamps = np.array([0, 10, 20, 70, 71, 72, 73], dtype=np.int64)
    assert max_in_window(stamps, 60) == 5  # [20, 80) holds 20, 70, 71, 72, 73
    assert max_in_window(stamps, 10) == 4
    assert max_in_window(np.array([], dtype=np.int64), 60) == 0


def test_rule_text_states_the_thresholds() -> None:
    assert f"{BOT_MIN_SEARCHES} or more" in BOT_RULE and f"{BOT_WINDOW_SECONDS}-second" in BOT_RULE
