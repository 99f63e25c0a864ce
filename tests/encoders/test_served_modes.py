"""The served modes are declared once (encoders/search/modes.py) and read by the CLI, the retrieval table and the docs."""
from __future__ import annotations

import pytest

from deepsent.cli import main
from encoders.search.modes import DEPTH, MODES, SERVED_MODES
from eval.retrieval.metrics import RECALL_KS
from eval.retrieval.served import served_rows


def test_the_cli_offers_the_declared_modes_with_their_formulas(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["search", "--help"])
    shown = "".join(capsys.readouterr().out.split())  # argparse wraps the help, at spaces and after hyphens
    assert MODES == tuple(m.name for m in SERVED_MODES) and "{" + ",".join(MODES) + "}" in shown
    assert all("".join(f"{m.name}: {m.formula}".split()) in shown for m in SERVED_MODES)


def test_the_retrieval_table_rows_are_the_declared_model_modes_within_the_served_depth() -> None:
    assert [mode for mode, _ in served_rows()] == ["rrf", "rerank", "linear"]  # dense and bm25 have rows of their own
    assert all(label for _, label in served_rows()) and max(RECALL_KS) <= DEPTH
    assert {stage for m in SERVED_MODES for stage in m.first_stages} == {"dense", "bm25"}
