"""``deepsent featurize``: clicked pairs -> letter-trigram feature shards with n negatives per pair (Dask)."""
from __future__ import annotations

import argparse
from typing import Any

from pipeline.core import validators as v
from pipeline.core.config import Settings
from pipeline.core.defaults import NEGATIVE_SOURCES, NEGATIVES, SEED


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``featurize`` to the CLI."""
    feat = subparsers.add_parser(
        "featurize", parents=[common], help="trigram vocabulary + feature shards with n negatives per pair",
        description="Read pairs/{train,valid}.parquet, build the letter-trigram vocabulary on Dask and write "
        "features/<version>/{train,valid}/part-NNNNN.parquet, vocab.json, manifest.json and features/LATEST. "
        "Runs on a local Dask cluster of DEEPSENT_DASK_WORKERS processes, or on DEEPSENT_DASK_ADDRESS.",
    )
    feat.add_argument("--negatives", type=v.up_to(64), default=NEGATIVES, help=f"unclicked titles per pair (default {NEGATIVES})")
    feat.add_argument("--negative-source", choices=NEGATIVE_SOURCES, default=NEGATIVE_SOURCES[0],
                      help="random: unclicked titles of the split (default, the paper's); skipped: titles the log showed "
                      "for the query and nobody clicked (above or just below the click first), random ones filling the "
                      "gap; mixed: half skipped, half random; bm25 / ann: half mined for the query (BM25's top titles, "
                      "or the champion's index's top, never clicked for it anywhere in the log), half random")
    feat.add_argument("--mine-model-uri", default=None,
                      help="the model whose index mines the ann negatives (default models:/deepsent-ranker@champion)")
    feat.add_argument("--min-count", type=v.positive_int, default=1, help="keep trigrams seen at least this often (default 1)")
    feat.add_argument("--max-words", type=v.up_to(1000), default=30, help="words kept per sentence; the cut is counted (default 30)")
    feat.add_argument("--seed", type=v.seed, default=SEED, help=f"seed of the shuffle and the negatives (default {SEED})")
    feat.set_defaults(handler=run_featurize)


def run_featurize(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """Featurise the pairs and summarise counts, vocabulary and shard sizes."""
    from encoders.search.mining import mine_if_needed
    from pipeline.features.featurize import featurize

    mine_if_needed(settings, args.negative_source, args.mine_model_uri)
    result = featurize(settings, negatives=args.negatives, min_count=args.min_count, max_words=args.max_words,
                       seed=args.seed, negative_source=args.negative_source).to_dict()
    lines = [f"features {result['version']}: vocabulary {result['vocab_size']} ids ({result['vocab_version']}), "
             f"OOV trigram share on dev {_pct(result['oov_share_dev'])}"]
    for split, counts in result["counts"].items():
        trunc = counts["truncated"]
        lines.append(
            f"  {split}: {counts['rows_in']} pairs in = {counts['rows_out']} featurised + {counts['rows_quarantined']} "
            f"quarantined; {len(result['uris'][split])} shard(s), {counts['bytes'] / 1e6:.1f} MB; title pool "
            f"{counts['title_pool']}; truncated {trunc['query_sentences']} queries, {trunc['doc_sentences']} titles "
            f"({trunc['words_dropped']} words)"
        )
        drawn = counts.get("negatives", {})
        if drawn.get("skipped_negatives") or drawn.get("random_fill"):
            lines.append(f"    negatives: {drawn['skipped_negatives']} skipped in the log ({drawn['near_click_negatives']} "
                         f"above or next to the click), {drawn['random_negatives']} random; {drawn['random_fill']} "
                         f"random fills in {drawn['rows_filled']} pairs with too few skipped titles")
    lines.append(f"  manifest: {result['uris']['manifest']}")
    return {**result, "summary": "\n".join(lines)}


def _pct(share: float | None) -> str:
    return "n/a (judgments_dev.csv not found)" if share is None else f"{100 * share:.2f}%"
