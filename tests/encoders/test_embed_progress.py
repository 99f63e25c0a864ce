"""deepsent embed shows a progress bar on a terminal's stderr, and nothing when stderr is not a terminal."""
from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

import encoders.search.embed as embed_module
from encoders.search.embed import embed
from encoders.training.results import TrainResult
from pipeline.core.config import Settings
from tests.conftest import private_copy


class _Stream(io.StringIO):
    """A stderr stand-in that says whether it is a terminal."""

    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize("tty", [True, False])
def test_embed_progress_bar_only_on_a_terminal(tty: bool, trained_run: tuple[Settings, TrainResult], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    shared, trained = trained_run
    settings = private_copy(shared, tmp_path)  # its own vector store: the texts are encoded while the bar moves
    monkeypatch.setattr(embed_module, "CHUNK_ROWS", 20_000)  # a few chunks: the bar moves between them
    stderr = _Stream(tty)
    monkeypatch.setattr(sys, "stderr", stderr)
    result = embed(settings, trained.model_uri, tmp_path / "exported", threads=1)
    shown = stderr.getvalue()
    bars = [part.strip() for part in shown.split("\r") if part.strip().startswith("embed ")]
    if tty:  # leave=False clears the bar at the end, so the last frame need not be shown: look at the totals
        assert any(bar.startswith("embed titles:") and f"/{result.titles} " in bar for bar in bars), bars
        assert any(bar.startswith("embed queries:") and f"/{result.queries} " in bar for bar in bars), bars
    else:
        assert bars == []
