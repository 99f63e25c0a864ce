"""Letter-trigram hashing: edge cases, the OOV path, vectorised parity, a stable versioned vocabulary."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pipeline.core.config import Settings
from pipeline.core.errors import InputError
from pipeline.features.text_arrays import split_words, word_counts
from pipeline.features.trigram import UNKNOWN_ID, TrigramVocab, word_bag, word_trigrams
from pipeline.runtime.dask_cluster import dask_client
from pipeline.storage.store import Store
from pipeline.text.homedepot import read_judgments


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("a", ["#a#"]),
        ("ab", ["#ab", "ab#"]),
        ("cat", ["#ca", "cat", "at#"]),
        ("42", ["#42", "42#"]),
        ("3/4in.", ["#3/", "3/4", "/4i", "4in", "in.", "n.#"]),
        ("été", ["#ét", "été", "té#"]),
        ("日本", ["#日本", "日本#"]),
        ("aaaa", ["#aa", "aaa", "aaa", "aa#"]),
        ("", []),
    ],
)
def test_word_trigrams_edge_cases(word: str, expected: list[str]) -> None:
    assert word_trigrams(word) == expected


def test_word_bag_counts_repeats_and_drops_unknown_trigrams() -> None:
    vocab = TrigramVocab(["aaa", "#aa", "aa#", "#a#"])
    ids = vocab.index
    assert word_bag("aaaa", ids) == ([ids["#aa"], ids["aaa"], ids["aa#"]], [1, 2, 1])
    assert word_bag("a", ids) == ([ids["#a#"]], [1])
    assert word_bag("aab", ids) == ([ids["#aa"]], [1])  # "aab", "ab#" are unknown: left out, as in W_h
    assert word_bag("xyz", ids) == ([UNKNOWN_ID], [1])  # no known trigram: the reserved unknown id


def test_encode_normalises_and_truncates() -> None:
    vocab = TrigramVocab.from_counts({t: 1 for w in ("cat", "hat") for t in word_trigrams(w)})
    ids, counts = vocab.encode("  Cat HAT  dog ")
    assert ids == [[vocab.index[t] for t in word_trigrams("cat")], [vocab.index[t] for t in word_trigrams("hat")], [0]]
    assert counts == [[1, 1, 1], [1, 1, 1], [1]]
    assert vocab.encode("cat hat dog", max_words=2) == (ids[:2], counts[:2])
    assert vocab.encode("") == ([], [])


def test_vocabulary_order_min_count_and_reserved_id() -> None:
    vocab = TrigramVocab.from_counts({"bbb": 5, "aaa": 5, "ccc": 9, "ddd": 1}, min_count=2)
    assert vocab.trigrams == ("ccc", "aaa", "bbb")  # by (-count, trigram); "ddd" below min_count
    assert vocab.index == {"ccc": 1, "aaa": 2, "bbb": 3}
    assert vocab.size == 4 and UNKNOWN_ID == 0


@pytest.fixture(scope="module")
def real_texts(data_dir: object) -> dict[str, pa.Array]:
    settings = Settings.from_env()
    train, dev = read_judgments(settings.train_judgments), read_judgments(settings.dev_judgments)
    return {
        "train": pa.concat_arrays([train["query"].combine_chunks(), train["title"].combine_chunks()]),
        "dev": pa.concat_arrays([pc.unique(dev["query"]), pc.unique(dev["title"])]),
    }


@pytest.mark.parametrize("max_words", [None, 5])
def test_vectorised_encoding_equals_reference_on_real_text(real_texts: dict[str, pa.Array], max_words: int | None) -> None:
    vocab = TrigramVocab.build([real_texts["train"].slice(0, 20000)], min_count=3)
    texts = pa.concat_arrays([real_texts["dev"], pa.array(["", "a  b", "ünï 42 aaaa zzzzqqq", " x "])])
    expected = [vocab.encode(t, max_words) for t in texts.to_pylist()]
    known = vocab.word_bags(pa.array(["aaaa", "ünï", "drill"]))
    for encoded in (vocab.encode_array(texts, max_words), vocab.encode_array(texts, max_words, known)):
        assert encoded.ids.to_pylist() == [e[0] for e in expected]
        assert encoded.counts.to_pylist() == [e[1] for e in expected]
    assert vocab.encode_array(texts, max_words).truncated(max_words) == sum(
        len(t.split()) > (max_words or 10**9) for t in texts.to_pylist()
    )


def test_vectorised_word_bags_equal_the_per_word_reference(real_texts: dict[str, pa.Array]) -> None:
    vocab = TrigramVocab.build([real_texts["train"].slice(0, 20000)], min_count=3)
    odd = ["", "a", "aaaa", "ünï", "日本語", "😀😀😀😀", "zzqqxx", "#", "a#b", "x" * 40000, "ab" * 20]
    words = pa.concat_arrays([pc.unique(split_words(real_texts["dev"])[0]), pa.array(odd)])
    bags = vocab.word_bags(words)
    expected = [word_bag(w, vocab.index) for w in words.to_pylist()]
    assert bags.ids.to_pylist() == [e[0] for e in expected]
    assert bags.counts.to_pylist() == [e[1] for e in expected]
    long_run = TrigramVocab(["xxx"]).word_bags(pa.array(["x" * 40000]))  # "xxx" 39,998 times
    assert long_run.ids.to_pylist() == [[1]] and long_run.counts.to_pylist() == [[32767]]  # capped at int16's max
    # a vocabulary with no trigram at all, and one holding a non-trigram entry, still hash every word
    assert TrigramVocab([]).word_bags(pa.array(["cat"])).ids.to_pylist() == [[UNKNOWN_ID]]
    assert TrigramVocab(["ab", "#ca"]).word_bags(pa.array(["cat"])).ids.to_pylist() == [[2]]


def test_oov_stats_counts_unknown_trigrams_and_words() -> None:
    vocab = TrigramVocab.from_counts({t: 1 for t in word_trigrams("cat")})
    stats = vocab.oov_stats(pa.array(["cat dog", "cats"]))
    # cat: 3 known; dog: 3 unknown (an unknown word); cats: #ca, cat known, ats, ts# unknown
    assert (stats["trigrams"], stats["oov_trigrams"]) == (10, 5)
    assert (stats["words"], stats["unknown_words"]) == (3, 1)
    assert stats["oov_share"] == pytest.approx(0.5)


def test_vocab_save_load_keeps_ids_and_version(store: Store, real_texts: dict[str, pa.Array]) -> None:
    vocab = TrigramVocab.build([real_texts["train"].slice(0, 5000)], min_count=2)
    vocab.save(store, "features/x/vocab.json")
    loaded = TrigramVocab.load(store, "features/x/vocab.json")
    assert loaded.version == vocab.version and loaded.size == vocab.size and loaded.min_count == 2
    sample = real_texts["dev"].slice(0, 200)
    assert loaded.encode_array(sample).ids.equals(vocab.encode_array(sample).ids)
    data = store.read_json("features/x/vocab.json")
    data["trigrams"][0], data["trigrams"][1] = data["trigrams"][1], data["trigrams"][0]
    store.write_text("features/x/vocab.json", json.dumps(data))
    with pytest.raises(InputError, match="vocab.json.*content hash"):
        TrigramVocab.load(store, "features/x/vocab.json")


def test_vocabulary_is_the_same_for_any_partitioning_and_worker_count(
    settings: Settings, real_texts: dict[str, pa.Array]
) -> None:
    texts = real_texts["train"].slice(0, 30000)
    serial = TrigramVocab.build([texts], min_count=2)
    parts = [texts.slice(i, 4000) for i in range(0, len(texts), 4000)]
    with dask_client(settings.with_overrides(dask_workers=2)) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        on_dask = TrigramVocab.build(parts, min_count=2, client=client)
        counts = word_counts(parts, client)
    assert on_dask.trigrams == serial.trigrams and on_dask.counts == serial.counts
    assert on_dask.version == serial.version
    assert counts["count"].to_numpy().sum() == len(pc.list_flatten(pc.utf8_split_whitespace(texts)))
