"""The scaling table is computed from the benchmarks' JSON files and rewritten between its markers only."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from docs_render.scaling import BEGIN, END, main

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
INGEST = {"sizes": {"3": {
    "days": 3, "rows": 6000, "impressions": 1000, "rows_per_impression": 6.0, "json_loads_floor_rows_per_s": 300000,
    "json_loads_floor_rows_per_cpu_s": 310000,
    "workers": {"1": {"rows_per_s_per_core": 300000, "rows_per_cpu_s": 400000}, "2": {"rows_per_s_per_core": 200000, "rows_per_cpu_s": 360000}},
    "pairs_stage": {"rows": 5000, "clicked_rows": 1000, "pairs": 800, "rows_per_s": 1_000_000, "rows_per_cpu_s": 2_000_000},
}}}


@pytest.fixture()
def results(tmp_path: Path) -> Path:
    folder = tmp_path / "results"
    folder.mkdir()
    for name in ("featurize.json", "train.json", "search.json", "embed_memory.json"):
        shutil.copy(RESULTS / name, folder / name)
    (folder / "ingest.json").write_text(json.dumps(INGEST))
    return folder


def doc(tmp_path: Path) -> Path:
    page = tmp_path / "SCALING.md"
    page.write_text(f"# title\nbefore\n{BEGIN}\nstale table\n{END}\nafter\n")
    return page


def rows_of(page: Path) -> dict[str, list[str]]:
    text = page.read_text()
    body = text.split(BEGIN)[1].split(END)[0].strip().splitlines()[2:]
    return {cells[1].strip(): [c.strip() for c in cells[2:-1]] for cells in (line.split("|") for line in body)}


def test_table_is_computed_from_the_json_files(tmp_path: Path, results: Path) -> None:
    page = doc(tmp_path)
    assert main(["--results", str(results), "--doc", str(page), "--window-hours", "1"]) == 0
    text = page.read_text()
    assert text.startswith("# title\nbefore\n") and text.endswith("after\n") and "stale table" not in text
    rows = rows_of(page)
    # 1e9 impressions x 6 rows, at the lower of the two rates per CPU second (360,000 rows/s) for 3,600 s: ceil(4.63)
    assert rows["ingest"][1] == "360,000 rows/s per core" and rows["ingest"][-1] == "5 cores"
    assert rows["pairs"][-1] == "1 core"  # 6e9 rows at 2e6 rows/s for an hour: 0.83
    featurize = json.loads((results / "featurize.json").read_text())
    scale = max(featurize["scales"].values(), key=lambda s: s["pairs"])
    assert rows["featurize"][1] == f"{scale['pairs'] / sum(scale['runs']['shipped_w1']['pair_cpu'].values()):,.0f} pairs/s per core"
    assert rows["compare"][1] == "not measured" and rows["compare"][-1] == "—"
    assert rows["train LSTM (GPU)"][1] == "not measured" and "no train-cuda.json" in rows["train LSTM (GPU)"][2]
    train = json.loads((results / "train.json").read_text())
    lstm = next(r for r in train["rows"] if r["model"] == "lstm" and r["device"] == "cpu")
    assert rows["train LSTM (CPU)"][1] == f"{lstm['train_examples_per_cpu_s']:,.0f} examples/s per core"
    assert main(["--results", str(results), "--doc", str(page), "--window-hours", "1", "--check"]) == 0
    assert main(["--results", str(results), "--doc", str(page), "--check"]) == 1  # a 4 h window gives another table


def test_gpu_training_appears_when_train_cuda_json_does(tmp_path: Path, results: Path) -> None:
    row = {"model": "lstm", "device": "cuda:0", "precision": "fp32", "gpu_util_mean": 40.0}
    cuda = {"gpu": "NVIDIA H200", "rows": [{**row, "batch_size": 256, "train_examples_per_s": 2_000.0},
                                          {**row, "batch_size": 8192, "train_examples_per_s": 10_000.0},
                                          {**row, "model": "dssm", "batch_size": 8192, "train_examples_per_s": 9e5}]}
    (results / "train-cuda.json").write_text(json.dumps(cuda))
    page = doc(tmp_path)
    main(["--results", str(results), "--doc", str(page)])
    # the fastest LSTM-RNN row: 1e9 impressions x 1 clicked row each = 1e9 examples at 1e4/s per GPU for 4 h: ceil(6.94)
    gpu = rows_of(page)["train LSTM (GPU)"]
    assert gpu[1] == "10,000 examples/s per GPU"
    assert gpu[2] == "train-cuda.json, one NVIDIA H200: the fastest LSTM-RNN row (batch 8,192, fp32, GPU busy 40 %)"
    assert gpu[-1] == "7 GPUs"
    assert rows_of(page)["embed (shipped, GPU)"][1] == "not measured"


def test_the_shipped_models_gpu_embedding_appears_when_gpu_minilm_json_does(tmp_path: Path, results: Path) -> None:
    embed = {"titles": 50_000, "seconds": 10.0, "titles_per_s": 5_000.0, "batch_size": 1024}
    (results / "gpu-minilm.json").write_text(json.dumps({"gpu": "NVIDIA H200", "embed": {"lstm+minilm off the shelf": embed}}))
    page = doc(tmp_path)
    main(["--results", str(results), "--doc", str(page)])
    # 1e8 titles a night at 5,000/s per GPU within 4 h: ceil(1.39)
    row = rows_of(page)["embed (shipped, GPU)"]
    assert row[1] == "5,000 titles/s per GPU" and row[-1] == "2 GPUs"
    assert row[2].startswith("gpu-minilm.json, one NVIDIA H200: 50,000 corpus titles in 10.0 s")


def test_missing_ingest_json_says_not_measured(tmp_path: Path, results: Path) -> None:
    (results / "ingest.json").unlink()
    page = doc(tmp_path)
    main(["--results", str(results), "--doc", str(page)])
    rows = rows_of(page)
    assert rows["ingest"][1] == "not measured" and rows["ingest"][-1] == "—" and rows["featurize"][-1] == "—"


def test_the_repository_doc_is_up_to_date() -> None:
    assert main(["--check"]) == 0
