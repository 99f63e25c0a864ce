"""Fixtures of the CLI tests: a small corpus indexed once per session, and a private copy of it per test."""
from __future__ import annotations

import csv
import itertools
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest

from encoders.training.results import TrainResult
from pipeline.core.config import Settings
from tests.conftest import private_copy


def first_rows_data_dir(data_dir: Path, root: Path, rows: int = 3000) -> Path:
    """The shared data with only the first ``rows`` judgments of each set: a corpus of a few thousand titles, so
    that ``deepsent index`` spends its time where a test looks, not on a large BM25 fit."""
    (root / "homedepot").mkdir(parents=True)
    for name in ("judgments_train.csv", "judgments_dev.csv"):
        with open(data_dir / "homedepot" / name, encoding="iso-8859-1", newline="") as fh:
            head = list(itertools.islice(csv.reader(fh), rows + 1))
        with open(root / "homedepot" / name, "w", encoding="iso-8859-1", newline="") as fh:
            csv.writer(fh, quoting=csv.QUOTE_ALL).writerows(head)
    for item in data_dir.iterdir():
        if item.name not in ("homedepot", "README.md"):
            (root / item.name).symlink_to(item)
    return root


@pytest.fixture(scope="session")
def small_index(trained_run: tuple[Settings, TrainResult], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A store with the tiny LSTM's embeddings of a small corpus and one published index build, made through the
    CLI once (a template: tests search a copy, :func:`indexed_copy`)."""
    from deepsent.cli import main

    shared, trained = trained_run
    root = tmp_path_factory.mktemp("small-index")
    settings, data_dir = private_copy(shared, root), first_rows_data_dir(shared.data_dir, root / "data")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_TRACKING_URI", settings.mlflow_tracking_uri)
        assert main(["index", "--model-uri", trained.registry_uri, "--store", settings.store,
                     "--data-dir", str(data_dir)]) == 0
    return {"store": Path(settings.store), "tracking": settings.mlflow_tracking_uri, "data_dir": data_dir,
            "model_uri": trained.registry_uri, "home": f"indexes/lstm/{trained.registered_version}"}


@pytest.fixture()
def indexed_copy(small_index: dict[str, Any], tmp_path: Path,
                 monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A private copy of :func:`small_index`'s store and MLflow database; ``argv`` points the CLI at it."""
    shutil.copytree(small_index["store"], tmp_path / "store")
    db = tmp_path / "mlflow.db"
    shutil.copyfile(small_index["tracking"].removeprefix("sqlite:///"), db)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{db}")
    yield {**small_index, "store": tmp_path / "store", "tracking": f"sqlite:///{db}",
           "argv": ["--model-uri", small_index["model_uri"], "--store", str(tmp_path / "store"),
                    "--data-dir", str(small_index["data_dir"])]}
