"""Vectors stored per encoder part and weights: each text through each set of weights once, checked when read."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from encoders.model import text_encoder
from encoders.model.text_encoder import TextEncoder
from encoders.model.text_encoder import part_key
from encoders.model.vector_store import StoredEncoder
from encoders.towers.twotower import TwoTowerModel
from encoders.training.ensemble_build import assemble
from pipeline.features.trigram import TrigramVocab, word_trigrams
from pipeline.storage.artifacts import ArtifactError
from pipeline.storage.store import Store

TITLES = ["20v cordless drill kit", "60w led bulb", "garden hose 50 ft", "cordless drill"]
QUERIES = ["cordless drill", "led bulb"]


@pytest.fixture(scope="module")
def vocab() -> TrigramVocab:
    words = {w for text in TITLES + QUERIES for w in text.split()}
    return TrigramVocab.from_counts({t: 1 for w in words for t in word_trigrams(w)})


def lstm_encoder(vocab: TrigramVocab, seed: int) -> TextEncoder:
    torch.manual_seed(seed)
    return TextEncoder(TwoTowerModel("lstm", vocab.size, {"ncell": 8}), vocab, 8)


def test_a_text_is_encoded_once_and_the_vectors_equal_the_models(vocab: TrigramVocab, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    store, plain = Store(str(tmp_path / "store")), lstm_encoder(vocab, 1)
    monkeypatch.setattr(text_encoder, "ENCODE_LOG", Counter())
    first = StoredEncoder(plain, store).encode(TITLES[:3], "doc")
    again = StoredEncoder(plain, store)  # another consumer (another stage) of the same weights
    both = again.encode(TITLES, "doc")
    np.testing.assert_array_equal(both[:3], first)
    np.testing.assert_allclose(both, plain.encode(TITLES, "doc"), atol=1e-6)  # what the model itself gives
    assert again.encoded == Counter({part_key(plain.parts("doc")[0], plain): 1})  # only the new title
    doc = [n for (_, side, _), n in text_encoder.ENCODE_LOG.items() if side == "doc"]
    assert doc == [2, 2, 2, 2]  # each title once into the store, once through the plain model (the check above)
    other = StoredEncoder(lstm_encoder(vocab, 2), store)  # other weights: other vectors, encoded afresh
    assert not np.allclose(other.encode(TITLES, "doc"), both) and sum(other.encoded.values()) == len(TITLES)


@pytest.mark.heavy  # over 10 s: left out of make check
def test_an_ensembles_pretrained_half_is_encoded_once_for_every_ensemble(vocab: TrigramVocab, tmp_path: Path) -> None:
    from encoders.towers.minilm import packaged_max_tokens

    store = Store(str(tmp_path / "store"))
    minilm = TwoTowerModel("minilm", vocab.size, {"shared": True, "max_tokens": packaged_max_tokens()})
    runs = []
    for seed, mix in ((1, 0.3), (2, 0.6)):  # two runs: new LSTM-RNN weights, the same packaged MiniLM
        lstm = lstm_encoder(vocab, seed)
        joined = TextEncoder(assemble(lstm.model, minilm, mix), vocab, 8)
        stored = StoredEncoder(joined, store)
        vectors = stored.encode(TITLES, "doc")
        np.testing.assert_allclose(vectors, joined.encode(TITLES, "doc"), atol=1e-5)  # joined as the tower joins
        runs.append((stored.encoded, [part_key(p, joined) for p in joined.parts("doc")]))
    (first, (lstm_1, minilm_1)), (second, (lstm_2, minilm_2)) = runs
    assert minilm_1 == minilm_2 and lstm_1 != lstm_2
    assert first == Counter({lstm_1: 4, minilm_1: 4})
    assert second == Counter({lstm_2: 4})  # the second run encoded only its own LSTM-RNN half


def test_a_changed_part_is_refused_naming_it(vocab: TrigramVocab, tmp_path: Path) -> None:
    store, plain = Store(str(tmp_path / "store")), lstm_encoder(vocab, 1)
    StoredEncoder(plain, store).encode(TITLES, "doc")
    part = next(p for p in (tmp_path / "store" / "vectors").rglob("*.parquet"))
    part.write_bytes(part.read_bytes()[:-9] + b"corrupted")
    from encoders.model.vector_store import PartVectors

    PartVectors._memo.clear()  # another process: nothing read yet
    with pytest.raises(ArtifactError, match=f"{part.name}: its checksum differs"):
        StoredEncoder(plain, store).encode(TITLES, "doc")
