"""The chain's datasets, one record each (as kedro's catalogue names a pipeline's data): what it holds, and the Airflow
asset that announces it, when one does; where it lives is the store's one table of locations
(``pipeline.storage.locations.LOCATIONS``), or MLflow for the models, the ensemble and the champion.

The stages declare which of these they read and write (:mod:`deepsent.chain`), and the order of the chain follows
from them; the DAGs' assets are made from these records (``dags/_assets.py``). Torch-free: DAG files read it.
"""
from __future__ import annotations

from dataclasses import dataclass

from pipeline.storage.locations import LOCATIONS


@dataclass(frozen=True)
class Dataset:
    """One dataset of the chain: its name, what it holds, its asset (name and URI) when it has one."""

    name: str
    holds: str
    asset: tuple[str, str] | None = None


DATASETS: dict[str, Dataset] = {d.name: d for d in (
    Dataset("landing", "the search logs and the catalogue files of each day (dt=D/ folders)"),
    Dataset("clicks", "validated, de-duplicated, de-botted impressions of each day, and the rejects in quarantine", asset=("deepsent_clicks", "x-deepsent://store/clicks")),
    Dataset("catalog", "the catalogue as of each day, and its changes; the latest one's live products are the corpus", asset=("deepsent_catalog", "x-deepsent://store/catalog")),
    Dataset("pairs", "clicked pairs split by query (train, valid), and the titles shown and not clicked"),
    Dataset("features", "letter-trigram shards of every (n, negative source) under its version, the vocabulary"),
    Dataset("mined", "per source and split, per query, the top titles of a first stage nobody clicked for it"),
    Dataset("click_lists", "per features version, each held-out click pair's clicked title and negatives as text; the "
            "held-out click queries with the products clicked for them"),
    Dataset("models", "MLflow runs of the grid (one per point) with their logged models"),
    Dataset("ensemble", "the MLflow run and logged model of the LSTM-RNN + MiniLM ensemble"),
    Dataset("vectors", "every corpus title's vector through the shipped model's parts, per part key"),
    Dataset("champion", "the registry's deepsent-ranker@champion (and @challenger), with the gate's figures",
            asset=("deepsent_champion", "x-deepsent://mlflow/deepsent-ranker/champion")),
    Dataset("index", "per model and version, the champion's FAISS + BM25 builds and the pointer to the live one",
            asset=("deepsent_index", "x-deepsent://store/indexes/champion")),
    Dataset("served_report", "per run, the champion's served search beside BM25 on the judged set"),
    Dataset("table", "per run, its Table IV (every model against the baselines), the plot and per-query figures"),
    Dataset("latest", "the last run's tables and run record",
            asset=("deepsent_report", "x-deepsent://store/reports/latest")),
)}
#: Inputs no stage of the run writes: the shared data the chain reads (the Home Depot judged sets, the books), the
#: judged gate set every decision is made on (``eval.decisions.gate_set``: the demo's gate slice of the training
#: judgments, a team's own judged file, or none), and the champion's index as an earlier run left it (what ann mining
#: searches: a retrain mines against the model it must beat).
EXTERNAL = frozenset({"judged", "gate_set", "previous_index"})


def where(name: str) -> str:
    """Where dataset ``name`` lives: its store locations (from the one table), else MLflow."""
    return ", ".join(f"{at}/" if "*" not in at else at for at in LOCATIONS[name]) if name in LOCATIONS else "MLflow"


def asset_of(name: str) -> tuple[str, str]:
    """The (name, URI) of dataset ``name``'s asset; a KeyError names a dataset that has none."""
    found = DATASETS[name].asset
    if found is None:
        raise KeyError(f"dataset {name!r} has no asset")
    return found
