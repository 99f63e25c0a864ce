"""The index follows the catalogue without retraining (#42): after a day's catalogue delta is ingested, ``deepsent
index`` encodes only the launched and retitled products, drops the retired one (never returned again), finds the
launched one, and its hits carry the catalogue's product ids."""
from __future__ import annotations

import csv
import itertools
from pathlib import Path
from typing import Any

import pytest

from encoders.training.results import TrainResult
from pipeline.core.config import Settings
from pipeline.storage.store import Store
from tests.deepsent.test_search_cli import cli as json_cli

DAY1, DAY2 = "2026-01-01", "2026-01-02"


def products(data_dir: Path, count: int) -> list[tuple[str, str]]:
    """The first ``count`` distinct (product id, title) of the training judgments."""
    with open(data_dir / "homedepot" / "judgments_train.csv", encoding="iso-8859-1", newline="") as fh:
        rows = ((row["product_uid"], row["product_title"]) for row in csv.DictReader(fh))
        return list(itertools.islice(dict(rows).items(), count))


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    """One CLI call's JSON (it must succeed)."""
    code, result, err = json_cli(capsys, *argv)
    assert code == 0, err
    return result


def hits(capsys: pytest.CaptureFixture[str], query: str, argv: list[str]) -> list[str]:
    """The product ids BM25 returns for ``query`` from the served index (every title sharing a word with it)."""
    return [hit["doc_id"] for hit in cli(capsys, "search", query, "--k", "1000", "--mode", "bm25", *argv)["hits"]]


def test_a_refresh_encodes_only_the_changed_products_and_drops_the_retired(
        trained_copy: tuple[Settings, TrainResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings, trained = trained_copy
    store, argv = Store.from_settings(settings), ["--store", settings.store, "--data-dir", str(settings.data_dir)]
    catalogue = products(settings.data_dir, 300)
    (kept_id, kept), (retired_id, retired), (edited_id, _) = catalogue[0], catalogue[1], catalogue[2]
    snapshot = "product_id,title\n" + "".join(f"{pid},\"{title}\"\n" for pid, title in catalogue[:-2])
    store.write_bytes(f"landing/catalog/dt={DAY1}/snapshot.csv", snapshot.encode())
    cli(capsys, "ingest", "--date", DAY1, *argv)
    model = ["--model-uri", trained.registry_uri, *argv]
    first = cli(capsys, "index", *model)
    assert first["count"] == 298 and first["encoded"] == 298 and first["refresh"]["since"] is None
    assert retired_id in hits(capsys, retired, model) and kept_id in hits(capsys, kept, model)

    launched = catalogue[-2:]  # two products launched, one retired, one retitled
    delta = ("product_id,title,op\n" + "".join(f"{pid},\"{title}\",upsert\n" for pid, title in launched)
             + f"{retired_id},,retire\n{edited_id},\"cordless retitled widget\",upsert\n")
    store.write_bytes(f"landing/catalog/dt={DAY2}/delta.csv", delta.encode())
    cli(capsys, "ingest", "--date", DAY2, *argv)
    refreshed = cli(capsys, "index", *model)
    assert refreshed["count"] == 299 and refreshed["encoded"] == 3  # the two launched titles and the retitled one
    assert refreshed["refresh"] == {"since": first["build"].rsplit("/", 1)[-1], "added": 2, "dropped": 1,
                                    "retitled": 1}
    assert retired_id not in hits(capsys, retired, model)  # retired: never returned after the refresh
    assert hits(capsys, launched[0][1], model)[0] == launched[0][0]  # launched: found, by its product id
    assert edited_id in hits(capsys, "retitled widget", model) and kept_id in hits(capsys, kept, model)
