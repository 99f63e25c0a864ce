"""One run of the chain on a tiny profile, shared by the tests that start from it (a pytest plugin).

``deepsent run`` of the tiny profile (a small LSTM-RNN and a DSSM for one epoch, the ensemble with MiniLM, the
gate, the served search and a table on the small data folder) costs minutes of both cores; three tests
used to run it each. :func:`tiny_chain` runs it once per suite (in whichever pytest-xdist worker asks first); a test that only reads takes its result,
a test that writes (a resumed run, a DAG challenging the champion) takes :func:`copy_of` its store first.
The MLflow database lives in the store, so a copy holds the registry too; the runs it records keep their
artifacts in the original store, which nobody writes to after the run.
"""
from __future__ import annotations

import dataclasses
import shutil
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from pipeline.core.config import Settings
from tests.once import once_per_suite

#: The tiny grid, as trigger params of the quick profile; ``deepsent run`` runs the same declaration as "tiny".
#: Two towers, so the DAG maps its train task over two grid points; two baselines, so the table has a reference row.
TINY_CONF = {"profile": "quick", "models": ["lstm", "dssm"], "ncell": [8], "negatives": 2, "epochs": 1,
             "baselines": ["bm25", "random"], "simulate_days": 2}


class TinyChain(NamedTuple):
    """The shared run: its settings (store, MLflow database, small data folder), what ``run`` returned, every
    text a tower encoded during the run, counted by (part key, side, text), and the store paths each stage read and
    wrote in this process (:func:`recorded_store`)."""

    settings: Settings
    result: dict[str, Any]
    encoded: Counter
    touched: dict[str, set[tuple[str, str]]]


#: The store's methods that read, and those that write (the others call these); ``local_path`` hands a file to a
#: library that reads or writes it itself, so it counts as both.
STORE_READS = ("exists", "list_files", "list_dirs", "read_bytes", "open_input", "size", "read_table", "iter_tables",
               "parquet_file", "local_path")
STORE_WRITES = ("delete", "write_bytes", "replace_dataset", "local_path")


def recorded_store(patch: pytest.MonkeyPatch) -> dict[str, set[tuple[str, str]]]:
    """Every store path read ("read") or written ("write") from now on, by the stage running then (``deepsent.chain
    .RUNNING``; "" outside one): the recording catalogue that checks what the stages declare."""
    from deepsent.chain import RUNNING
    from pipeline.storage.store import Store

    touched: dict[str, set[tuple[str, str]]] = {}

    def recording(name: str, kind: str) -> Any:
        original = getattr(Store, name)

        def recorded(self: Store, relpath: str, *args: Any, **kwargs: Any) -> Any:
            try:
                path = self.relpath(str(relpath))  # a URI or local path under the root, as the methods accept
            except Exception:  # noqa: BLE001 - a path the store refuses: the call below says why
                path = str(relpath)
            touched.setdefault(RUNNING.get(), set()).add((kind, path))
            return original(self, relpath, *args, **kwargs)
        return recorded

    for name in dict.fromkeys(STORE_READS + STORE_WRITES):
        kind = "both" if name in STORE_READS and name in STORE_WRITES else "read" if name in STORE_READS else "write"
        patch.setattr(Store, name, recording(name, kind))
    return touched


def tiny_profile() -> Any:
    """The trigger params' profile under the name ``tiny``, simulating the same days."""
    from deepsent.profiles import resolve_profile

    return dataclasses.replace(resolve_profile(TINY_CONF), name="tiny", days=TINY_CONF["simulate_days"])


@pytest.fixture()
def tiny_profile_registered(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``tiny`` among the profiles ``deepsent run`` knows, for this test."""
    from deepsent.profiles import PROFILES

    profile = tiny_profile()
    monkeypatch.setitem(PROFILES, "tiny", profile)
    return profile


@pytest.fixture(scope="session")
def tiny_chain(tmp_path_factory: pytest.TempPathFactory, small_data_dir: Path, mlflow_db_template: Path) -> TinyChain:
    """``deepsent run`` of the tiny profile on the small data folder, once per suite (read it; copy to write)."""
    return once_per_suite(tmp_path_factory, "tiny-chain", lambda root: _run_tiny(root, small_data_dir, mlflow_db_template))


def _run_tiny(root: Path, small_data_dir: Path, mlflow_db_template: Path) -> TinyChain:
    import mlflow

    from deepsent.profiles import PROFILES
    from deepsent.runner import run
    from encoders.model import text_encoder

    store = root / "store"
    store.mkdir()
    shutil.copyfile(mlflow_db_template, store / "mlflow.db")
    settings = Settings(store=str(store), data_dir=small_data_dir, mlflow_tracking_uri=f"sqlite:///{store / 'mlflow.db'}",
                        dask_workers=1, device="cpu")
    encoded: Counter = Counter()
    with pytest.MonkeyPatch.context() as patch:  # run() points MLflow at its database through the environment
        patch.setenv("MLFLOW_TRACKING_URI", settings.mlflow_tracking_uri)  # undone after the run, as it was before
        patch.setitem(PROFILES, "tiny", tiny_profile())
        patch.setattr(text_encoder, "ENCODE_LOG", encoded)
        touched = recorded_store(patch)
        result = run(settings, "tiny")
    mlflow.set_tracking_uri(None)
    return TinyChain(settings, result, encoded, touched)


class LandingChain(NamedTuple):
    """``deepsent run --from-landing`` of the tiny profile on a hand-written landing area: its store (the MLflow
    database beside it), the click rows written per day, the landed files, and the run's record (``run.json``)."""

    store: Path
    mlflow_tracking_uri: str
    rows: dict[str, int]
    landed: list[str]
    record: dict[str, Any]

    def seed(self, store: Path) -> None:
        """Copy this run's landing area into the empty ``store``, and its vector store: a cache keyed by model part and
        text that any stage reads first (``pipeline.storage.locations.CACHES``), so another run on these days encodes
        only what this one did not. Nothing that depends on this run's registry (indexes, reports) comes along."""
        from pipeline.storage.locations import folder

        for top in {folder("landing").split("/")[0], folder("vectors")}:
            shutil.copytree(self.store / top, store / top, symlinks=True)


@pytest.fixture(scope="session")
def landing_chain(tmp_path_factory: pytest.TempPathFactory, small_data_dir: Path, mlflow_db_template: Path) -> LandingChain:
    """``deepsent run --profile tiny --from-landing --gate-judgments clicks`` on ``tests/deepsent/landing_by_hand``'s
    landing area, once per suite: what ``deepsent run`` does with a team's own data, which the DAG's door is compared
    with (read it; copy to write)."""
    return once_per_suite(tmp_path_factory, "landing-chain",
                          lambda root: _run_landing(root, small_data_dir, mlflow_db_template))


def _run_landing(root: Path, small_data_dir: Path, mlflow_db_template: Path) -> LandingChain:
    import json

    import mlflow

    from deepsent.cli import main
    from deepsent.profiles import PROFILES
    from tests.deepsent.landing_by_hand import write_landing

    store = root / "store"
    store.mkdir()
    shutil.copyfile(mlflow_db_template, root / "cli.db")
    uri = f"sqlite:///{root / 'cli.db'}"
    rows = write_landing(store)
    landed = sorted(str(p.relative_to(store)) for p in (store / "landing").rglob("*") if p.is_file())
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        patch.setitem(PROFILES, "tiny", tiny_profile())
        code = main(["run", "--profile", "tiny", "--from-landing", "--gate-judgments", "clicks", "--store", str(store),
                     "--data-dir", str(small_data_dir)])
    mlflow.set_tracking_uri(None)
    assert code == 0, "deepsent run --from-landing failed (its log above says why)"
    return LandingChain(store, uri, rows, landed, json.loads((store / "reports" / "latest" / "run.json").read_text()))


def copy_of(chain: TinyChain, settings: Settings) -> Settings:
    """``settings`` on a copy of the shared run's store (its MLflow database included) at ``settings.store``."""
    shutil.rmtree(settings.store, ignore_errors=True)
    shutil.copytree(chain.settings.store, settings.store, symlinks=True)
    return settings.with_overrides(data_dir=chain.settings.data_dir,
                                   mlflow_tracking_uri=f"sqlite:///{Path(settings.store) / 'mlflow.db'}")
