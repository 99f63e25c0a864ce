"""Which tests ``make check`` (``-m "not slow and not heavy …"``) leaves out: every test that needs a trained model, a
chain or Airflow is marked ``heavy`` here, by the fixtures it asks for, so a new test of that kind is left out without
a decorator; the few tests over 10 s without such a fixture carry ``@pytest.mark.heavy`` themselves. A marker of its
own, not ``slow``: the suite's order on parallel workers keys on ``slow`` (tests/conftest.py), and stays as it was."""
from __future__ import annotations

import pytest

#: Fixtures that train a model, run a chain, load Airflow or build a corpus from the real data (seconds to minutes
#: each, once per worker): a test that asks for one is an integration test.
INTEGRATION_FIXTURES = frozenset({
    "tiny_chain", "tiny_dag_run", "landing_chain", "trained_run", "promotion_registry", "make_train_settings",
    "train_settings", "small_data_dir", "small_index", "indexed_copy", "dagbag", "tiny_profile_registered",
})


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``heavy`` every test that asks for an integration fixture (before ``-m`` selects)."""
    for item in items:
        if INTEGRATION_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.heavy)
