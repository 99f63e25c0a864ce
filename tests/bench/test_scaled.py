"""The scaled corpora of the benchmarks: copies of the real products, each copy's ids and titles distinct."""
from __future__ import annotations

from bench.search.scaled import copies_of


def test_copies_start_with_the_real_products_and_name_each_copy() -> None:
    products = [("1", "cordless drill"), ("2", "garden hose")]
    rows = copies_of(products, 5)
    assert rows == [("1", "cordless drill"), ("2", "garden hose"), ("1~1", "cordless drill lot1"),
                    ("2~1", "garden hose lot1"), ("1~2", "cordless drill lot2")]
    assert len({pid for pid, _ in copies_of(products, 1000)}) == 1000
