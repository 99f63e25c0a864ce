"""The blocks of the docs that come from a GPU session's JSON (``bench/gpu/session.sh``, docs/GPU.md).

``gpu-bench``: every tower's training and embedding rate on CUDA beside the CPU's (``train-cuda.json``,
``train.json``); ``gpu-parity``: one epoch of each tower on CUDA and on CPU from the same seed
(``gpu-parity.json``); ``gpu-minilm``: MiniLM fine-tuned on every click pair on the GPU, the ensembles and
the dev table (``gpu-minilm.json``). A session that has not run says so.
"""
from __future__ import annotations

from typing import Any, Callable

from docs_render.run_blocks import NOT_MEASURED, RESULTS, Sources, pct, table, wrap


def _missing(name: str) -> str:
    return f"{NOT_MEASURED} (no {RESULTS}/{name}: no GPU session has written it)."


def _fastest(rows: list[dict[str, Any]], model: str) -> dict[str, Any] | None:
    return max((r for r in rows if r["model"] == model), key=lambda r: r["train_examples_per_s"], default=None)


def gpu_bench(sources: Sources) -> str:
    """Per tower: CPU (train.json) beside CUDA at the CPU's batch and at the fastest batch/precision."""
    cuda, cpu = sources.json(f"{RESULTS}/train-cuda.json"), sources.json(f"{RESULTS}/train.json")
    if cuda is None:
        return _missing("train-cuda.json")
    cpu_rows = {r["model"]: r for r in (cpu or {}).get("rows", [])}
    out = []
    for model in dict.fromkeys(r["model"] for r in cuda["rows"]):
        same = next(r for r in cuda["rows"] if r["model"] == model and r["precision"] == "fp32")
        best = _fastest(cuda["rows"], model)
        mine = cpu_rows.get(model)
        out.append([best["name"], f"{mine['train_examples_per_s']:,.0f}" if mine else "—",
                    f"{same['train_examples_per_s']:,.0f} (batch {same['batch_size']})",
                    f"{best['train_examples_per_s']:,.0f} (batch {best['batch_size']:,}, {best['precision']})",
                    f"{best['gpu_util_mean']:.0f} %", f"{pct(best['matmul_fraction_of_peak'])} %",
                    f"{mine['embed_titles_per_s']:,.0f}" if mine else "—", f"{best['embed_titles_per_s']:,.0f}",
                    f"{best['embed_hashed_titles_per_s']:,.0f}"])
    peak = cuda["peak_matmul_flop_per_s"]
    caption = (f"CPU: {(cpu or {}).get('cpu_count', '?')} cores of this VM. CUDA: one {cuda['gpu']} (torch {cuda['torch']}, "
               f"CUDA {cuda['cuda']}, TF32 {'on' if cuda['tf32_matmul'] else 'off'}). GPU busy: the share of time a kernel ran "
               f"(NVML) at the fastest row; matrix share of peak: the step's matrix FLOPs per second over the card's "
               f"measured dense rate in that precision ({peak['fp32'] / 1e12:,.1f} TFLOP/s fp32, {peak['bf16'] / 1e12:,.0f} "
               f"bf16). Titles/s embedded count the text hashing on the CPU; 'hashed' starts from hashed titles.")
    return table(["Tower", "CPU ex/s", "CUDA ex/s, same batch", "CUDA ex/s, fastest", "GPU busy", "matrix share of peak",
                  "CPU titles/s", "CUDA titles/s", "CUDA titles/s, hashed"], "lrrrrrrrr", out) + "\n\n" + wrap(caption)


def gpu_parity(sources: Sources) -> str:
    """One epoch of each tower on CUDA and on CPU from the same seed and batches: rates and loss-curve gap."""
    data = sources.json(f"{RESULTS}/gpu-parity.json")
    if data is None:
        return _missing("gpu-parity.json")
    out = [[model, f"{t['examples_per_s']['cuda']:,.0f}", f"{t['examples_per_s']['cpu']:,.0f}",
            f"{t['train_loss']['cuda']:.5f} / {t['train_loss']['cpu']:.5f}",
            f"{t['valid_loss']['cuda']:.5f} / {t['valid_loss']['cpu']:.5f}", f"{t['max_relative_gap']:.1e}",
            str(t["updates"])] for model, t in data["towers"].items()]
    devices = next(iter(data["towers"].values()))["devices"] if data["towers"] else {"cuda": "?", "cpu": "?"}
    text = table(["tower", "CUDA ex/s", "CPU ex/s", "train loss CUDA / CPU", "valid loss CUDA / CPU",
                  "largest relative gap per update", "updates"], "lrrrrrr", out)
    trainer = data.get("trainer_lstm_batch_4096", {}).get("fp32")
    caption = f"The trainer (`deepsent train`, one epoch), {devices['cuda']} against {devices['cpu']} of the same machine."
    if trainer:
        caption += (" At batch 4,096 on CUDA the trainer ran "
                    + ", ".join(f"{rate:,.0f}" for rate in trainer["examples_per_s"]) + " examples/s per epoch.")
    return text + "\n\n" + wrap(caption)


def gpu_minilm(sources: Sources) -> str:
    """MiniLM fine-tuned on every click pair on the GPU, beside the shipped recipe: dev NDCG and rates."""
    data = sources.json(f"{RESULTS}/gpu-minilm.json")
    if data is None:
        return _missing("gpu-minilm.json")
    names = iter(data["ensembles"])  # the two ensemble rows share a name in the table: the order tells them apart
    out = []
    for row in data["dev"]:
        name = row["name"] if "+" not in row["name"] else f"{row['name']}: {next(names)}"
        out.append([name] + [f"{100 * row[f'ndcg@{k}']:.1f}" for k in (1, 3, 10)])
    tuned, ensembles = data["train"]["minilm"], data["ensembles"]
    mixes = "; ".join(f"{name}: mix {e['mix']:.2f}, " + (f"click MRR {e['click_mrr']:.4f}" if "click_mrr" in e else
                      f"NDCG@10 {e['score']:.4f} on the {e['signal']}") for name, e in ensembles.items())
    embed = data["embed"]["lstm+minilm off the shelf"]
    caption = (f"One {data['gpu']}. MiniLM fine-tuned with eq. (5) on every training click pair, {tuned['epochs']} epochs "
               f"(in-batch negatives, n = 4): {tuned['examples_per_s']:,.0f} examples/s, {tuned['seconds']:.0f} s, "
               f"held-out click MRR {tuned['valid_mrr']:.4f}. Ensembles fitted on held-out clicks ({mixes}). The shipped "
               f"model embeds the corpus at {embed['titles_per_s']:,.0f} titles/s on this GPU "
               f"({embed['titles']:,} titles in {embed['seconds']:.1f} s).")
    return table(["model (dev set, NDCG x 100)", "@1", "@3", "@10"], "lrrr", out) + "\n\n" + wrap(caption)


BLOCKS: dict[str, Callable[[Sources], str]] = {"gpu-bench": gpu_bench, "gpu-parity": gpu_parity, "gpu-minilm": gpu_minilm}
