"""Shared pytest fixtures: settings on a temporary store, the real shared data, a real S3 endpoint."""
from __future__ import annotations

import csv
import importlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

import pytest

from encoders.training.results import TrainResult
from pipeline.core.config import Settings
from pipeline.storage.store import Store
from tests.once import once_per_suite

# Tests never use a GPU by accident and keep to the 2 cores of CI.
os.environ.setdefault("DEEPSENT_DEVICE", "cpu")

pytest_plugins = ["tests.suite_report", "tests.tiny_chain", "tests.xdist_groups", "tests.slow_marks"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On parallel workers, the tests that mostly wait start first, each on a worker of its own.

    The ``stack`` tests wait minutes on DAG runs of a real stack while the cores are idle, and the
    other ``slow`` ones are the longest; started last, they would be the run's tail. xdist's loadgroup
    scheduler (as infra/test.sh runs it, without reordering) hands each worker two units to start with, in
    collection order (a unit is one test, or every test of one ``xdist_group``): so each stack test is paired
    with a short one, then come the slow ones.
    """
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # xdist's workers collect; the controller only schedules
        return
    waiting = [item for item in items if item.get_closest_marker("stack")]
    slow = [item for item in items if item.get_closest_marker("slow") and item not in waiting]
    rest = [item for item in items if item not in waiting and item not in slow]
    paired: list[pytest.Item] = []
    for stack_test in waiting:
        paired += [stack_test, *([rest.pop()] if rest else [])]
    items[:] = paired + slow + rest


@pytest.fixture(scope="session")
def dag_params() -> ModuleType:
    """``dags/_params.py``, imported from the DAG folder as Airflow imports it (``dags/`` is no package)."""
    folder = str(Path(__file__).resolve().parents[1] / "dags")
    sys.path.insert(0, folder)
    try:
        return importlib.import_module("_params")
    finally:
        sys.path.remove(folder)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real shared data (../shared/data beside the project, or DEEPSENT_DATA_DIR)."""
    settings = Settings.from_env()
    if not settings.train_judgments.exists():
        pytest.fail(f"shared data not found at {settings.data_dir}; set DEEPSENT_DATA_DIR")
    return settings.data_dir


@pytest.fixture()
def settings(tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings on a fresh local store under ``tmp_path`` with a local SQLite MLflow store."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("DEEPSENT_DASK_ADDRESS", raising=False)
    return Settings.from_env(store=str(tmp_path / "store"), data_dir=str(data_dir), dask_workers=1)


@pytest.fixture()
def store(settings: Settings) -> Store:
    """The local store of ``settings``."""
    return Store.from_settings(settings)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A real S3-compatible server (moto's standalone server) on 127.0.0.1; stopped afterwards."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture()
def s3_settings(s3_endpoint: str, tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings whose store is a fresh bucket on the local S3 endpoint (dummy credentials)."""
    import uuid

    import boto3

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing-key-id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing-secret-key")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setenv("MLFLOW_S3_ENDPOINT_URL", s3_endpoint)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    bucket = f"deepsent-test-{uuid.uuid4().hex[:10]}"
    boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
    return Settings.from_env(
        store=f"s3://{bucket}/prefix",
        data_dir=str(data_dir),
        mlflow_tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
        dask_workers=1,
    )


# ---- a tiny real feature set (featurised once per session) and a ready MLflow database ----------

@pytest.fixture(scope="session")
def tiny_features_store(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    """A store with ~400 clicked pairs of judgments_train.csv featurised with n = 4 (real featurizer)."""
    return once_per_suite(tmp_path_factory, "tiny-features", lambda root: _featurize_tiny(root, data_dir))


def _featurize_tiny(root: Path, data_dir: Path) -> Path:
    import pyarrow as pa
    import pyarrow.compute as pc

    from pipeline.text.homedepot import read_judgments
    from pipeline.storage.schemas import PAIRS_SCHEMA
    from pipeline.features.featurize import featurize
    from pipeline.features.pairs import query_split

    settings = Settings.from_env(store=str(root), data_dir=str(data_dir), dask_workers=1,
                                 mlflow_tracking_uri=f"sqlite:///{root / 'unused.db'}")
    judged = read_judgments(settings.train_judgments)
    clicked = judged.filter(pc.greater_equal(judged["relevance"], 2.5))
    queries = sorted(set(clicked["query"].to_pylist()))[:160]
    rows = clicked.filter(pc.is_in(clicked["query"], pa.array(queries))).sort_by([("query", "ascending"), ("doc_id", "ascending")])
    split = query_split(rows["query"].to_pylist(), 0.2, seed=7)
    pairs = pa.table({"query": rows["query"], "doc_id": rows["doc_id"], "title": rows["title"],
                      "clicks": pa.array([1] * rows.num_rows, pa.int64()),
                      "impressions": pa.array([1] * rows.num_rows, pa.int64()),
                      "split": pa.array(split, pa.string())}, schema=PAIRS_SCHEMA)
    store = Store.from_settings(settings)
    for name in ("train", "valid"):
        store.write_table(f"pairs/{name}.parquet", pairs.filter(pc.equal(pairs["split"], name)))
    featurize(settings, negatives=4, shard_rows=128)
    return root


def copy_pairs(source: Path, store: Path) -> None:
    """The click pairs of the store at ``source`` and the held-out clicks featurize drew from them, copied into
    the store at ``store`` (what the index, the gate and the search stage read)."""
    for name in ("pairs", "click_lists"):
        shutil.copytree(source / name, store / name)


@pytest.fixture(scope="session")
def mlflow_db_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An initialised (empty) MLflow SQLite database; tests get a copy (migrations run once)."""
    import mlflow
    from mlflow import MlflowClient

    def build(root: Path) -> Path:
        MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}").search_experiments()
        mlflow.set_tracking_uri(None)
        return root / "mlflow.db"

    return once_per_suite(tmp_path_factory, "mlflow-template", build)


@pytest.fixture()
def make_train_settings(tmp_path: Path, data_dir: Path, tiny_features_store: Path, mlflow_db_template: Path,
                        monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Settings]:
    """``make_train_settings(name)``: a fresh store holding the tiny features, with its own MLflow database."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)

    def make(name: str = "run") -> Settings:
        store = tmp_path / name / "store"
        shutil.copytree(tiny_features_store / "features", store / "features")
        copy_pairs(tiny_features_store, store)
        db = tmp_path / name / "mlflow.db"
        shutil.copyfile(mlflow_db_template, db)
        return Settings.from_env(store=str(store), data_dir=str(data_dir), dask_workers=1,
                                 mlflow_tracking_uri=f"sqlite:///{db}", device="cpu")

    return make


@pytest.fixture()
def train_settings(make_train_settings: Callable[[str], Settings]) -> Settings:
    """One fresh training store with the tiny features and an empty MLflow database."""
    return make_train_settings("run")


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory: pytest.TempPathFactory, data_dir: Path, tiny_features_store: Path,
                mlflow_db_template: Path) -> tuple[Settings, TrainResult]:
    """One small LSTM trained for 2 epochs on the tiny features (settings, train() result), shared read-mostly."""
    from encoders.training.trainer import TrainConfig, train

    root = tmp_path_factory.mktemp("trained")  # one per worker: tests write beside it (embed, compare's runs)
    shutil.copytree(tiny_features_store / "features", root / "store" / "features")
    copy_pairs(tiny_features_store, root / "store")
    shutil.copyfile(mlflow_db_template, root / "mlflow.db")
    settings = Settings(store=str(root / "store"), data_dir=data_dir, mlflow_tracking_uri=f"sqlite:///{root / 'mlflow.db'}",
                        dask_workers=1, device="cpu")
    config = TrainConfig(model="lstm", tower={"ncell": 16}, epochs=2, batch_size=32, seed=5, threads=1)
    return settings, train(settings, config, tags={"dag_id": "deepsent_train", "airflow_run_id": "manual__test"})


@pytest.fixture()
def make_train_result() -> Callable[..., TrainResult]:
    """``make_train_result(name, valid_mrr, valid_loss)``: a TrainResult as ``train`` returns it, without training."""

    def make(name: str, valid_mrr: float, valid_loss: float) -> TrainResult:
        metrics = {"best_valid_mrr": valid_mrr, "best_valid_loss": valid_loss}
        return TrainResult(run_id=f"run-{name}", model_uri=f"runs:/run-{name}/model", model="lstm", name=name,
                           best_epoch=1, epochs_run=1, stopped_early=False, best_metric=valid_mrr, metrics=metrics,
                           history=[{"epoch": 0, "valid_loss": valid_loss, "valid_mrr": valid_mrr}], param_count=10,
                           param_counts={"query": 5, "doc": 5, "total": 10}, examples_per_s=1.0, seconds=1.0,
                           device="cpu", nproc=1, features_version="v1", vocab_size=100, checkpoint="/c/last.pt")

    return make


@pytest.fixture()
def train_until_checkpoint() -> Callable[..., subprocess.Popen]:
    """Start ``deepsent train FLAGS`` on ``settings``' store in a subprocess; return it once its first checkpoint exists."""

    def start(settings: Settings, flags: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        environ = {**os.environ, "MLFLOW_TRACKING_URI": settings.mlflow_tracking_uri,
                   "DEEPSENT_DATA_DIR": str(settings.data_dir), **(env or {})}
        proc = subprocess.Popen([sys.executable, "-m", "deepsent.cli", "train", *flags, "--store", settings.store],
                                cwd=Path(__file__).resolve().parents[1], env=environ,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 240
        while not list(Path(settings.store, "checkpoints").rglob("last.pt")) and proc.poll() is None:
            assert time.monotonic() < deadline, "no checkpoint after 240 s"
            time.sleep(0.02)
        return proc

    return start


# ---- a model registry for promotion: a trained LSTM and two DSSMs of known quality -----------------

def lexical_dssm(vocab_size: int, reverse: bool = False) -> Any:
    """A DSSM whose towers are one random projection of the trigram bag: its cosine follows the texts' trigram
    overlap, a lexical ranker about as good as BM25. ``reverse`` negates the document tower's output, which
    turns every ranking upside down: a clearly worse model.

    The tiny trained models of the test fixtures rank the dev set no better than random (NDCG@10 0.824 vs
    0.823, p = 0.8), so a gate test with a known outcome needs models whose quality is known by construction.
    """
    import torch

    from encoders.towers.twotower import TwoTowerModel

    torch.manual_seed(11)
    model = TwoTowerModel("dssm", vocab_size, {"nhid": 288, "nout": 96})
    towers = model.towers()
    towers["doc"].load_state_dict(towers["query"].state_dict())
    if reverse:
        with torch.no_grad():
            towers["doc"].semantic.weight.neg_()
            towers["doc"].semantic.bias.neg_()
    return model


@pytest.fixture(scope="session")
def promotion_registry(trained_run: tuple[Settings, TrainResult], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A template MLflow database with the trained LSTM (``deepsent-lstm``) and the lexical and reversed DSSMs
    (``deepsent-dssm`` 1 and 2), their artifacts in a store of its own; tests copy the database."""
    from encoders.model import tracking
    from pipeline.storage.store import Store
    from pipeline.features.trigram import TrigramVocab

    shared, trained = trained_run

    def build(root: Path) -> dict[str, Any]:
        shutil.copyfile(shared.mlflow_tracking_uri.removeprefix("sqlite:///"), root / "template.db")
        settings = Settings(store=str(root / "store"), data_dir=shared.data_dir, dask_workers=1, device="cpu",
                            mlflow_tracking_uri=f"sqlite:///{root / 'template.db'}")
        vocab = TrigramVocab.load(Store.from_settings(shared), f"features/{trained.features_version}/vocab.json")
        uris = {"trained": trained.registry_uri}
        for name, reverse in (("lexical", False), ("reversed", True)):
            with tracking.run(settings, "promotion-test-models"):
                uris[name] = tracking.log_model(lexical_dssm(vocab.size, reverse), vocab, 30)["registry_uri"]
        return {"template": root / "template.db", "uris": uris, "trained": trained, "data_dir": shared.data_dir}

    return once_per_suite(tmp_path_factory, "promotion-registry", build)


@pytest.fixture()
def registry(promotion_registry: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings on a fresh copy of the template registry (no ranker yet) and an empty store; also the env's URI."""
    shutil.copyfile(promotion_registry["template"], tmp_path / "mlflow.db")
    (tmp_path / "store").mkdir()
    settings = Settings(store=str(tmp_path / "store"), data_dir=promotion_registry["data_dir"], dask_workers=1,
                        device="cpu", mlflow_tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", settings.mlflow_tracking_uri)
    return settings


def first_queries(source: Path, target: Path, queries: int, quote_all: bool = False) -> Path:
    """The rows of the first ``queries`` queries of a judged set in the publishers' format (ISO-8859-1 CSV)."""
    with open(source, encoding="iso-8859-1", newline="") as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], rows[1:]
    col = header.index("search_term")
    keep = set(list(dict.fromkeys(r[col] for r in body))[:queries])
    with open(target, "w", encoding="iso-8859-1", newline="") as fh:
        writer = csv.writer(fh, quoting=csv.QUOTE_ALL if quote_all else csv.QUOTE_MINIMAL)
        writer.writerow(header)
        writer.writerows(r for r in body if r[col] in keep)
    return target


@pytest.fixture()
def judged_slice(settings: Settings, tmp_path: Path) -> Path:
    """The first 40 queries of judgments_dev.csv, in the publishers' format (ISO-8859-1 CSV)."""
    return first_queries(settings.dev_judgments, tmp_path / "judged_slice.csv", 40)


@pytest.fixture(scope="session")
def small_data_dir(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    """A data folder with the first 400 queries of judgments_train.csv and the first 40 of judgments_dev.csv (a
    corpus of a few thousand titles), the other folders linked: for DAG runs that embed the whole corpus.
    Made once per session; tests only read it."""
    def build(root: Path) -> Path:
        (root / "homedepot").mkdir(parents=True)
        shared = Settings.from_env(data_dir=str(data_dir))
        first_queries(shared.train_judgments, root / "homedepot" / "judgments_train.csv", 400, quote_all=True)
        first_queries(shared.dev_judgments, root / "homedepot" / "judgments_dev.csv", 40)
        for name in os.listdir(data_dir):
            if name not in ("homedepot", "README.md"):
                (root / name).symlink_to(Path(data_dir) / name)
        return root

    return once_per_suite(tmp_path_factory, "small-data", build)


@pytest.fixture()
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 64 KiB tmpfs (needs the right to mount, which root in the CI container has); unmounted after."""
    yield from _tmpfs(tmp_path / "disk", "64k")


@pytest.fixture()
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 64 MiB tmpfs, for a copy of an MLflow database made read-only with ``mount -o remount,ro``."""
    yield from _tmpfs(tmp_path / "small-disk", "64m")


def _tmpfs(mount: Path, size: str) -> Iterator[Path]:
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def private_copy(shared: Settings, root: Path) -> Settings:
    """Settings on ``root``: a copy of the trained run's pairs and MLflow database, an empty store otherwise."""
    copy_pairs(Path(shared.store), root / "store")
    shutil.copyfile(shared.mlflow_tracking_uri.removeprefix("sqlite:///"), root / "mlflow.db")
    return Settings(store=str(root / "store"), data_dir=shared.data_dir, dask_workers=1, device="cpu",
                    mlflow_tracking_uri=f"sqlite:///{root / 'mlflow.db'}")


@pytest.fixture()
def trained_copy(trained_run: tuple[Settings, TrainResult], tmp_path: Path,
                 monkeypatch: pytest.MonkeyPatch) -> tuple[Settings, TrainResult]:
    """The trained run on a private copy of its store (:func:`private_copy`), its MLflow database the env's too."""
    shared, trained = trained_run
    settings = private_copy(shared, tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", settings.mlflow_tracking_uri)
    return settings, trained
