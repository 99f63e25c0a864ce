"""The chain's datasets, one record each (as kedro's catalogue names a pipeline's data): where it lives, what it holds,
and the Airflow asset that announces it, when one does.

The stages declare which of these they read and write (:mod:`deepsent.chain`), and the order of the chain follows
from them; the DAGs' assets are made from these records (``dags/_assets.py``). Torch-free: DAG files read it.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dataset:
    """One dataset of the chain: its name, where it lives and what it holds, its asset (name and URI) when it has one."""

    name: str
    holds: str
    asset: tuple[str, str] | None = None


DATASETS: dict[str, Dataset] = {d.name: d for d in (
    Dataset("landing", "landing/clicks/dt=D/ and landing/catalog/dt=D/: the search logs and the catalogue files of "
            "each day"),
    Dataset("clicks", "clicks/dt=D/: validated, de-duplicated, de-botted impressions (quarantine/ingest/dt=D/: the "
            "rejects)", asset=("deepsent_clicks", "x-deepsent://store/clicks")),
    Dataset("catalog", "catalog/dt=D/: the catalogue as of each day, and its changes; the latest one's live products "
            "are the corpus", asset=("deepsent_catalog", "x-deepsent://store/catalog")),
    Dataset("pairs", "pairs/{train,valid}.parquet and skipped/: clicked pairs split by query, titles shown and not "
            "clicked"),
    Dataset("features", "features/<version>/: letter-trigram shards of every (n, negative source), the vocabulary"),
    Dataset("mined", "mined/<source>/{train,valid}.parquet: per query, the top titles of a first stage nobody clicked "
            "for it"),
    Dataset("click_lists", "click_lists/<features version>/: per held-out click pair its clicked title and negatives "
            "as text; click_lists/held_out/: held-out click queries with the products clicked for them"),
    Dataset("models", "MLflow runs of the grid (one per point) with their logged models"),
    Dataset("ensemble", "the MLflow run and logged model of the LSTM-RNN + MiniLM ensemble"),
    Dataset("vectors", "vectors/<key>/: every corpus title's vector through the shipped model's parts"),
    Dataset("champion", "the registry's deepsent-ranker@champion (and @challenger), with the gate's figures",
            asset=("deepsent_champion", "x-deepsent://mlflow/deepsent-ranker/champion")),
    Dataset("index", "indexes/<model>/<version>/: the champion's FAISS + BM25 builds and current.json",
            asset=("deepsent_index", "x-deepsent://store/indexes/champion")),
    Dataset("served_report", "reports/<run>/retrieval.*: the champion's served search beside BM25 on the judged set"),
    Dataset("table", "reports/<run>/table.*: the Table IV of the run (every model against the baselines)"),
    Dataset("latest", "reports/latest/: the last run's tables and run.json",
            asset=("deepsent_report", "x-deepsent://store/reports/latest")),
)}
#: Inputs no stage of the run writes: the shared data the chain reads (the Home Depot judged sets, the books), the
#: judged gate set every decision is made on (``eval.decisions.gate_set``: the demo's gate slice of the training
#: judgments, a team's own judged file, or none), and the champion's index as an earlier run left it (what ann mining
#: searches: a retrain mines against the model it must beat).
EXTERNAL = frozenset({"judged", "gate_set", "previous_index"})


def asset_of(name: str) -> tuple[str, str]:
    """The (name, URI) of dataset ``name``'s asset; a KeyError names a dataset that has none."""
    found = DATASETS[name].asset
    if found is None:
        raise KeyError(f"dataset {name!r} has no asset")
    return found
