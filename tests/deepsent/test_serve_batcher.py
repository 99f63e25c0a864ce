"""``deepsent serve``'s dynamic batcher over the tiny LSTM's index (``small_index``): a query's answer is the same JSON
bytes alone, in a full batch and among strangers (other k, modes, lengths, a POST's queries), and a live query's
vector through an LSTM-RNN + MiniLM ensemble (word pieces padded to their bucket) the same bytes in any batch;
concurrent requests are gathered into one batch and ``/metrics`` counts it; a batch never mixes two loaded indexes;
the batch flags refuse values out of their bounds with one line."""
from __future__ import annotations

import json
import threading
from typing import Any, Iterator

import numpy as np
import pytest

from deepsent.cli import build_parser, main
from deepsent.server.batcher import Batcher
from deepsent.server.limits import MAX_BATCH_QUERIES, MAX_BATCH_WAIT_MS, Batching
from deepsent.server.loaded import MODES, Asked, Found, Loaded, open_loaded
from encoders.model.shape_batches import LIVE_ROWS
from encoders.model.text_encoder import TextEncoder
from encoders.towers.twotower import TwoTowerModel
from pipeline.core.config import Settings
from pipeline.features.trigram import TrigramVocab, word_trigrams
from tests.deepsent.serve_process import Served, metric, private_index, start

QUERY = "cordless drill"
#: Queries of other lengths and words than QUERY (one far longer than a live pass's shortest bucket).
STRANGERS = ["led light bulb 60w", "kitchen faucet with sprayer", "toilet", "30 in white bathroom vanity with top and "
             "faucet and a mirror cabinet above it", "garden hose reel", "ceiling fan with light kit", "paint"]
#: A full batch: the most queries one batch takes in these tests.
FULL = len(STRANGERS) + 1


@pytest.fixture(scope="module")
def index(small_index: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A private copy of the small index for this module."""
    return private_index(small_index, tmp_path_factory.mktemp("serve-batcher"))


@pytest.fixture(scope="module")
def loaded(index: dict[str, Any]) -> Loaded:
    """The small index opened in this process as the server opens it."""
    settings = Settings.from_env(store=str(index["store"]), data_dir=index["data_dir"],
                                 mlflow_tracking_uri=index["tracking"])
    return open_loaded(settings, index["model_uri"])


@pytest.fixture()
def batches() -> Iterator[tuple[list[int], Any]]:
    """The queries of every batch a batcher searched, and a batcher factory reporting to that list (closed after)."""
    sizes: list[int] = []
    made: list[Batcher] = []

    def batcher(wait_s: float = 0.5, workers: int = 1) -> Batcher:
        made.append(Batcher(Batching(wait_s, FULL, workers), lambda queries, waits: sizes.append(queries)))
        return made[-1]

    yield sizes, batcher
    for one in made:
        one.close()


def _bytes(found: Found, row: int = 0) -> dict[str, str]:
    """Each mode's hits of the query at ``row`` as JSON text."""
    return {mode: json.dumps([hit.to_json() for hit in per_query[row]]) for mode, per_query in found.items()}


def test_a_query_gets_the_same_bytes_alone_in_a_full_batch_and_among_strangers(loaded: Loaded, batches: Any) -> None:
    sizes, batcher = batches
    searches = batcher()
    alone = _bytes(searches.submit(loaded, Asked([QUERY], 10, MODES)).result(60))
    full = [searches.submit(loaded, Asked([query], 10, MODES)) for query in [*STRANGERS[:3], QUERY, *STRANGERS[3:]]]
    in_full = _bytes(full[3].result(60))
    mixed = [searches.submit(loaded, Asked(STRANGERS[:3], 1000, ("linear",))),  # a POST's queries, deep
             searches.submit(loaded, Asked([STRANGERS[3]], 5, ("dense", "bm25"))),  # the search page's two columns
             searches.submit(loaded, Asked([STRANGERS[4], QUERY], 10, MODES)),  # QUERY second in its request
             searches.submit(loaded, Asked([STRANGERS[5]], 3, ("rerank",)))]
    among_strangers = _bytes(mixed[2].result(60), row=1)
    assert sizes == [1, FULL, 3 + 1 + 2 + 1]  # alone, a full batch, then strangers together
    assert in_full == alone and among_strangers == alone
    assert all(json.loads(hits) for hits in alone.values())  # every mode found something to compare
    for future in (*full, *mixed):
        assert future.result(60)  # every stranger answered too


def test_a_live_query_vector_is_the_same_bytes_in_any_batch_of_an_ensemble_with_minilm() -> None:
    texts = [QUERY, *STRANGERS]
    vocab = TrigramVocab.from_counts({t: 1 for text in texts for w in text.split() for t in word_trigrams(w)})
    encoder = TextEncoder(TwoTowerModel("ensemble", vocab.size, {"ncell": 8, "max_tokens": 32, "mix": 0.5}), vocab, 8)
    alone = encoder.encode_live([QUERY], "query")[0]
    short = [text for text in STRANGERS if len(text.split()) <= 3][: LIVE_ROWS - 1]
    in_full = encoder.encode_live([*short, QUERY], "query")[-1]  # one pass: its shortest bucket, full
    among = encoder.encode_live([*STRANGERS, QUERY, QUERY], "query")[-2]  # strangers of every length, itself twice
    assert alone.tobytes() == in_full.tobytes() == among.tobytes()
    tower = encoder.encode([QUERY], "query")[0]  # the whole tower, unpadded: the same vector but for the last bits
    np.testing.assert_allclose(alone, tower, atol=1e-5)


def test_a_batch_never_mixes_two_loaded_indexes(index: dict[str, Any], loaded: Loaded, batches: Any) -> None:
    sizes, batcher = batches
    settings = Settings.from_env(store=str(index["store"]), data_dir=index["data_dir"],
                                 mlflow_tracking_uri=index["tracking"])
    other = open_loaded(settings, index["model_uri"], reuse=loaded)  # the same build opened again: a swap's object
    searches = batcher()
    futures = [searches.submit(served, Asked([query], 10, ("dense",)))
               for served, query in zip([loaded, other] * 2, STRANGERS)]
    answers = [future.result(60) for future in futures]
    assert sizes == [2, 2] and all(answer["dense"][0] for answer in answers)


@pytest.fixture(scope="module")
def served(index: dict[str, Any]) -> Iterator[Served]:
    """A server gathering for up to 50 ms, 8 queries a batch."""
    server = start(index, "--batch-wait-ms", "50", "--batch-max", "8")
    yield server
    assert server.stop() == 0, server.log_text()[-3000:]


@pytest.mark.services
def test_concurrent_requests_share_a_batch_and_the_metrics_count_it(served: Served) -> None:
    clients = [served.client() for _ in range(6)]
    ready, answers = threading.Barrier(len(clients)), []

    def ask(client: Any, query: str) -> None:
        client.get("/healthz")  # its connection open before the others start
        ready.wait(30)
        answers.append(client.get("/search", params={"q": query, "mode": "dense"}))

    try:
        for _ in range(3):  # a busy machine may split a round; one shared batch is enough
            threads = [threading.Thread(target=ask, args=(c, q)) for c, q in zip(clients, [QUERY, *STRANGERS])]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            text = clients[0].get("/metrics").text
            if metric(text, "deepsent_serve_batch_queries_bucket", le="1.0") < metric(
                    text, "deepsent_serve_batch_queries_count"):
                break
        with served.client() as client:
            alone = client.get("/search", params={"q": QUERY, "mode": "dense"}).json()
            among = client.post("/search", json={"queries": [*STRANGERS[:2], QUERY], "mode": "dense"}).json()
    finally:
        for client in clients:
            client.close()
    assert {answer.status_code for answer in answers} == {200}
    batched = metric(text, "deepsent_serve_batch_queries_count")
    assert metric(text, "deepsent_serve_batch_queries_bucket", le="1.0") < batched < len(answers)
    assert metric(text, "deepsent_serve_batch_queries_sum") == len(answers)
    assert metric(text, "deepsent_serve_batch_wait_seconds_count") == len(answers)
    assert 0 < metric(text, "deepsent_serve_batch_wait_seconds_sum") <= len(answers) * 5.0
    first = next(answer.json() for answer in answers if answer.json()["query"] == QUERY)
    assert json.dumps(first["hits"]) == json.dumps(alone["hits"]) == json.dumps(among["results"][2]["hits"])


@pytest.mark.parametrize("flag, value, message", [
    ("--batch-wait-ms", "51", f"--batch-wait-ms: '51' is not milliseconds from 0 to {MAX_BATCH_WAIT_MS:g}"),
    ("--batch-wait-ms", "-1", "--batch-wait-ms: '-1' is not milliseconds from 0 to"),
    ("--batch-wait-ms", "nan", "--batch-wait-ms: 'nan' is not milliseconds from 0 to"),
    ("--batch-max", "0", f"--batch-max: '0' is not a number of queries from 1 to {MAX_BATCH_QUERIES:,}"),
    ("--batch-max", str(MAX_BATCH_QUERIES + 1), f"--batch-max: '{MAX_BATCH_QUERIES + 1}' is not a number of queries"),
    ("--batch-max", "two", "--batch-max: 'two' is not a number of queries from 1 to"),
])
def test_a_batch_flag_out_of_bounds_is_one_line_and_exit_2(flag: str, value: str, message: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--port", "0", flag, value]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1 and lines[0].startswith("deepsent: error: ") and message in lines[0], err


def test_the_help_states_the_batch_flags_and_their_bounds(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert ("--batch-wait-ms BATCH_WAIT_MS milliseconds a search waits for other requests' queries to share its "
            f"batch (default 2; 0: only those queued meanwhile, at most {MAX_BATCH_WAIT_MS:g})") in text
    assert "--batch-max BATCH_MAX the most queries one batch searches" in text and f"at most {MAX_BATCH_QUERIES})" in text
