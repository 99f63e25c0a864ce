"""Environment settings read outside the settings object (DAG files, training ranks) are checked where read."""
from __future__ import annotations

import pytest

from pipeline.core.errors import ConfigError
from pipeline.core.validators import cron_or_empty, dist_init, env_setting, non_negative_int


def test_an_unset_variable_takes_its_default_and_a_set_one_is_checked() -> None:
    assert env_setting("DEEPSENT_X", "7", non_negative_int, env={}) == 7
    assert env_setting("DEEPSENT_X", "7", non_negative_int, env={"DEEPSENT_X": " 3 "}) == 3
    with pytest.raises(ConfigError, match=r"^DEEPSENT_X: '-1' is not a non-negative integer$"):
        env_setting("DEEPSENT_X", "7", non_negative_int, env={"DEEPSENT_X": "-1"})


@pytest.mark.parametrize("good", ["env://", "tcp://127.0.0.1:29500", "tcp://[::1]:29500", "file:///tmp/deepsent/rendezvous"])
def test_init_methods_torch_accepts_pass(good: str) -> None:
    assert env_setting("DEEPSENT_DIST_INIT", "env://", dist_init, env={"DEEPSENT_DIST_INIT": good}) == good


@pytest.mark.parametrize("bad", ["", "bogus", "tcp://host", "file://relative", "http://x:1"])
def test_a_bad_init_method_is_one_line(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"^DEEPSENT_DIST_INIT: .* is not an init method"):
        env_setting("DEEPSENT_DIST_INIT", "env://", dist_init, env={"DEEPSENT_DIST_INIT": bad})


def test_a_cron_is_five_fields_or_empty() -> None:
    assert cron_or_empty("0 3 * * 1") == "0 3 * * 1" and cron_or_empty("") == ""
    with pytest.raises(ConfigError, match="DEEPSENT_RETRAIN_CRON: 'every monday' is not a cron expression"):
        env_setting("DEEPSENT_RETRAIN_CRON", "", cron_or_empty, env={"DEEPSENT_RETRAIN_CRON": "every monday"})
