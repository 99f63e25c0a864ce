"""``deepsent run --from-landing``: a landing area nobody simulated (``landing_by_hand``) through the whole chain on
the tiny profile (the suite's shared ``landing_chain``, which tests/dags/test_landing_doors.py compares the DAG with),
then ``deepsent search`` answering with the catalogue's product ids; and the landing areas it
refuses, each with one line naming the folder and the fix."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest

from deepsent.cli import main
from pipeline.core.config import Settings
from pipeline.text.textnorm import normalize
from tests.deepsent.landing_by_hand import DAYS, LAUNCHED, UNKNOWN, products, titles_on, write_landing
from tests.tiny_chain import LandingChain


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    """Exit code, the one JSON object on stdout and stderr of ``deepsent --json ARGV``."""
    capsys.readouterr()
    code = main(["--json", *argv])
    out, err = capsys.readouterr()
    return code, json.loads(out.splitlines()[-1]), err


@pytest.fixture()
def tracked(tmp_path: Path, mlflow_db_template: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty store under ``tmp_path`` and a fresh MLflow database beside it (the env's tracking URI)."""
    import mlflow

    store = tmp_path / "store"
    store.mkdir()
    shutil.copyfile(mlflow_db_template, tmp_path / "mlflow.db")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    yield store
    mlflow.set_tracking_uri(None)


@pytest.mark.slow  # the whole chain on the tiny profile (the suite's shared landing_chain)
def test_a_hand_written_landing_area_is_ingested_trained_shipped_indexed_and_searched(
        landing_chain: LandingChain, small_data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tracked, rows, result = landing_chain.store, landing_chain.rows, landing_chain.record
    argv = ["--store", str(tracked), "--data-dir", str(small_data_dir)]
    # the simulator never ran: nothing simulated, the landing area holds exactly the files written there
    assert result["source"] == "landing" and result["counts"]["landing_rows"] == 0
    assert sorted(str(p.relative_to(tracked)) for p in (tracked / "landing").rglob("*") if p.is_file()) == \
        landing_chain.landed
    ingest = result["counts"]["ingest"]
    assert ingest["rows_read"] == sum(rows.values()) == 593  # JSON Lines, CSV and TREC Session XML, three days
    assert (ingest["quarantined"], ingest["duplicates"], ingest["bot_rows"]) == (1, 0, 0)
    quarantine = _read(tracked / "quarantine" / "ingest" / f"dt={DAYS[0]}" / "part-0.parquet")
    assert len(quarantine) == 1 and quarantine[0]["reason"].startswith(f"unknown_product: doc_id '{UNKNOWN}'")
    assert quarantine[0]["source_file"].endswith(f"landing/clicks/dt={DAYS[0]}/part-0.jsonl")
    # the pairs trained on are this shop's: every clicked product is in its catalogue
    clicked = {row["doc_id"] for row in _read(tracked / "pairs" / "train.parquet")}
    assert len(clicked) > 30 and clicked <= set(products())
    assert result["promotion"]["gate_set"].startswith("click-lists:features/")
    # the catalogue: a snapshot, a delta (a launch and a retitle), a carried day; its last day is the corpus
    manifests = [json.loads((tracked / "catalog" / "_manifests" / f"dt={d}.json").read_text()) for d in DAYS]
    assert [m["kind"] for m in manifests] == ["snapshot", "delta", "carried"]
    assert (manifests[1]["launches"], manifests[1]["edits"], manifests[2]["products"]) == (1, 1, len(products()))
    assert result["promotion"]["decision"] == "promoted" and result["index"]["count"] == len(products())
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", landing_chain.mlflow_tracking_uri)
        code, found, err = cli(capsys, "search", "cordless drill", "--k", "5", *argv)
        assert code == 0, err
        catalogue = titles_on(DAYS[-1])
        assert len(found["hits"]) == 5 and {h["doc_id"] for h in found["hits"]} <= set(catalogue)
        assert all(h["title"] == normalize(catalogue[h["doc_id"]]) for h in found["hits"])  # the catalogue's titles
        assert LAUNCHED in {h["doc_id"] for h in cli(capsys, "search", "sander", "--k", "40", *argv)[1]["hits"]}


def _read(path: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


def _refusal(capsys: pytest.CaptureFixture[str], store: Path, *flags: str) -> str:
    """The one error line of ``deepsent run --from-landing FLAGS`` on ``store`` (exit 2, nothing run)."""
    code, out, err = cli(capsys, "run", "--from-landing", "--store", str(store), *flags)
    assert code == 2 and err.count("\n") == 1 and err.startswith("deepsent: error: ")
    assert not (store / "clicks").exists() and not (store / "catalog").exists()  # refused before ingesting
    return out["error"]


def test_an_empty_landing_area_is_refused_naming_the_folder(tracked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tracked / "landing" / "clicks" / f"dt={DAYS[0]}").mkdir(parents=True)
    (tracked / "landing" / "clicks" / f"dt={DAYS[0]}" / "_SUCCESS").write_text("")  # a marker is no data
    error = _refusal(capsys, tracked)
    assert error.startswith(f"{tracked}/landing: no landed day") and "landing/clicks/dt=YYYY-MM-DD/" in error
    assert "without --from-landing" in error


def test_a_range_with_no_landed_day_is_refused_naming_the_landed_days(tracked: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    write_landing(tracked)
    error = _refusal(capsys, tracked, "--start", "2026-04-01", "--end", "2026-04-30")
    assert error == (f"{tracked}/landing: no landed day from 2026-04-01 to 2026-04-30 (landed: {DAYS[0]} .. {DAYS[-1]} "
                     "(3 days)); choose --start/--end within them, or leave both out")
    assert "--end 2026-03-01 is before --start 2026-03-03" in _refusal(capsys, tracked, "--start", "2026-03-03",
                                                                       "--end", "2026-03-01")


def test_clicks_without_any_catalogue_are_refused(tracked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_landing(tracked)
    shutil.rmtree(tracked / "landing" / "catalog")
    error = _refusal(capsys, tracked)
    assert error.startswith(f"{tracked}/landing/catalog: no catalogue for the clicks of {DAYS[0]} .. {DAYS[-1]}")
    assert f"landing/catalog/dt={DAYS[0]}/snapshot.csv (product_id,title)" in error


def test_a_range_after_the_catalogue_day_needs_that_day_ingested_first(tracked: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    write_landing(tracked)  # day 3 has clicks only; its catalogue landed on days 1 and 2, never ingested
    error = _refusal(capsys, tracked, "--start", str(DAYS[2]))
    assert error.startswith(f"{tracked}/landing/catalog: no catalogue for the clicks of {DAYS[2]};")
    # once ingested, the catalogue carries forward: day 3 alone is accepted
    from deepsent.landed import landed_days

    assert main(["ingest", "--start", str(DAYS[0]), "--end", str(DAYS[1]), "--store", str(tracked)]) == 0
    assert landed_days(Settings.from_env(store=str(tracked)), DAYS[2]) == (DAYS[2],)


def test_end_without_from_landing_names_both_flags(tracked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "run", "--end", "2026-01-02", "--store", str(tracked))
    assert code == 2 and out["error"].startswith("--end goes with --from-landing")
