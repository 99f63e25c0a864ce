"""The chain never ships worse than the free model: a worse challenger is refused against a MiniLM champion on the
gate set, and the simulator never reads the gate slice."""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from pipeline.core.config import Settings
from pipeline.text.homedepot import is_gate_query
from tests.tiny_chain import TinyChain, copy_of


def test_a_one_epoch_lstm_mixed_at_0_9_is_refused_against_a_minilm_champion(settings: Settings,
                                                                           tiny_chain: TinyChain) -> None:
    import mlflow

    from encoders.model import tracking
    from encoders.model.loading import load_encoder
    from encoders.training.ensemble_build import assemble, off_the_shelf_encoder, off_the_shelf_model
    from eval.promotion.promote import promote

    settings = copy_of(tiny_chain, settings)
    mlflow.set_tracking_uri(settings.mlflow_tracking_uri)
    lstm_uri = next(m["model_uri"] for m in tiny_chain.result["models"] if m["name"].startswith("LSTM-RNN"))
    minilm = off_the_shelf_model(settings, lstm_uri)
    champion = promote(settings, minilm, force=True)  # MiniLM off the shelf is the champion, whatever the run shipped
    assert champion.decision in ("promoted", "unchanged")  # unchanged: the tiny run itself shipped MiniLM
    lstm = load_encoder(lstm_uri, settings)  # one epoch of an 8-cell LSTM-RNN
    worse = assemble(lstm.model, off_the_shelf_encoder(settings, lstm_uri).model, 0.9)
    with tracking.run(settings, "gate-test-models"):
        challenger = tracking.log_model(worse, lstm.vocab, lstm.max_words)["model_uri"]
    refused = promote(settings, challenger)
    assert refused.decision == "refused" and refused.champion == champion.champion
    assert refused.gate_set.endswith("(gate-slice)") and refused.challenger_ndcg["ndcg@10"] < refused.champion_ndcg["ndcg@10"]
    assert "significantly worse" in refused.reason or "not better than the champion by more than the noise" in refused.reason
    assert refused.served is not None and refused.served["challenger"]["signal"].startswith("gate set gate-slice")
    mlflow.set_tracking_uri(None)


def test_the_simulator_never_draws_a_search_from_the_gate_slice(settings: Settings) -> None:
    from pipeline.simulate.simulate import simulate

    result = simulate(settings, dt.date(2026, 1, 1), 2)
    queries = set()
    for partition in result["partitions"]:
        path = Path(partition.removeprefix("file://"))
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                queries.add(json.loads(line)["query"])
            except (ValueError, KeyError, TypeError):
                continue  # the simulator's deliberately malformed lines
    assert len(queries) > 1000 and not [q for q in queries if is_gate_query(q)]
    from pipeline.simulate.click_model import load_corpus

    corpus, catalogue = load_corpus(settings), result["catalog_counts"]
    products = catalogue["snapshot_products"] + catalogue["launches"]
    assert products == len(set(corpus.product_ids)) > len(set(corpus.doc_ids))  # the gate's products are for sale too
