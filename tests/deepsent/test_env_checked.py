"""Environment settings are checked wherever they are read, through one validator.

``DEEPSENT_MINILM_RUNTIME=bogus`` used to pass ``search`` and ``compare --baselines minilm`` unseen (exit 0). The
settings object checks it when any command starts (:meth:`pipeline.core.config.Settings.from_env`), and the MiniLM
runtime checks it again, with the same validator, where it reads the variable (a Dask worker, a DAG task).
"""
from __future__ import annotations

import json

import pytest

from deepsent.cli import main
from encoders.towers.minilm_runtime import inference_runtime
from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError

MESSAGE = "DEEPSENT_MINILM_RUNTIME: 'bogus' is not one of openvino, torch (or empty for the default)"


@pytest.mark.parametrize("argv", [["search", "cordless drill"], ["compare", "--baselines", "minilm"],
                                  ["compare", "--retrieval", "--baselines", "bm25,minilm"], ["index"],
                                  ["promote", "--status"]])
def test_a_bad_minilm_runtime_stops_every_command_that_starts(argv: list[str], settings: Settings,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DEEPSENT_MINILM_RUNTIME", "bogus")
    capsys.readouterr()
    code = main(["--json", *argv, "--store", settings.store, "--data-dir", str(settings.data_dir)])
    out, err = capsys.readouterr()
    assert code == 2 and json.loads(out) == {"error": MESSAGE}
    assert err.splitlines() == [f"deepsent: error: {MESSAGE}"]


def test_the_runtime_reads_the_variable_through_the_same_validator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSENT_MINILM_RUNTIME", "bogus")
    with pytest.raises(ConfigError, match=MESSAGE.replace("(", r"\(").replace(")", r"\)")):
        inference_runtime()
    monkeypatch.setenv("DEEPSENT_MINILM_RUNTIME", " Torch ")
    assert inference_runtime() == "torch" and Settings.from_env().minilm_runtime == "torch"
