"""``deepsent serve``'s API on a real uvicorn subprocess over the tiny LSTM's index (``small_index``, copied once here).

The answers are ``deepsent search --json``'s, every bad request gets one JSON line and a 4xx, /readyz is 503 until the
index is loaded, /metrics and the OpenAPI docs answer, and the search page escapes what it shows and renders in
headless Chromium without an error (the docs' screenshot of it, docs/screenshots/serve-search-page.png, is taken
from a server on the quick run's store by ``infra/serve_screenshot.py``).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from deepsent.cli import main
from deepsent.server.limits import MAX_K, MAX_QUERY_BYTES, MAX_QUERY_CHARS, Limits
from deepsent.server.loaded import Hit
from tests.deepsent.serve_process import Served, metric, private_index, start

QUERIES = ["cordless drill", "led light bulb 60w", "kitchen faucet with sprayer"]
SHOT = "serve-search-page.png"

pytestmark = pytest.mark.services  # a real uvicorn server


@pytest.fixture(scope="module")
def index(small_index: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A private copy of the small index for this module's server."""
    return private_index(small_index, tmp_path_factory.mktemp("serve-api"))


@pytest.fixture(scope="module")
def served(index: dict[str, Any]) -> Iterator[Served]:
    """One server with the default bounds, stopped (SIGTERM, exit 0) after the module's tests."""
    server = start(index)
    yield server
    assert server.stop() == 0, server.log_text()[-3000:]


def _cli_hits(index: dict[str, Any], query: str, mode: str, capsys: pytest.CaptureFixture[str],
              monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", index["tracking"])
    capsys.readouterr()
    assert main(["--json", "search", query, "--k", "10", "--mode", mode, "--model-uri", index["model_uri"],
                 "--store", str(index["store"]), "--data-dir", str(index["data_dir"])]) == 0
    return json.loads(capsys.readouterr().out)


def test_it_answers_as_deepsent_search_does(served: Served, index: dict[str, Any], capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    with served.client() as client:
        ready = client.get("/readyz").json()
        for mode in ("bm25", "dense", "linear"):
            cli = _cli_hits(index, QUERIES[0], mode, capsys, monkeypatch)
            answer = client.get("/search", params={"q": f"  {QUERIES[0]} ", "k": 10, "mode": mode}).json()
            assert {k: answer[k] for k in ("query", "k", "mode", "model_uri", "version")} == {
                "query": QUERIES[0], "k": 10, "mode": mode, "model_uri": index["model_uri"], "version": cli["version"]}
            assert answer["build"] == ready["build"] == cli["index"].rsplit("/", 1)[-1]
            assert answer["hits"] == cli["hits"]
            assert {tuple(hit) for hit in answer["hits"] + cli["hits"]} == {tuple(Hit.field_names())}  # one record
        default = client.get("/search", params={"q": QUERIES[1]}).json()
        assert default["mode"] == ready["default_mode"] and len(default["hits"]) == 10
        batch = client.post("/search", json={"queries": QUERIES, "k": 5, "mode": "rrf"})
        assert batch.status_code == 200
        for query, result in zip(QUERIES, batch.json()["results"]):
            one = client.get("/search", params={"q": query, "k": 5, "mode": "rrf"}).json()
            assert result == {"query": query, "hits": one["hits"]}  # one query's answer whatever its batch


BAD = [  # (method, request, status, the one line expected)
    ("GET", {"q": "drill", "k": 0}, 400, f"k 0 is out of range: give 1 to {MAX_K:,}"),
    ("GET", {"q": "drill", "k": MAX_K + 1}, 400, f"k {MAX_K + 1} is out of range: give 1 to {MAX_K:,}"),
    ("GET", {"q": "drill", "k": "ten"}, 400, "k: Input should be a valid integer, unable to parse string as an integer"),
    ("GET", {"q": "", "k": 3}, 400, "q is empty: give a query with at least one word"),
    ("GET", {"q": " \t "}, 400, "q is empty: give a query with at least one word"),
    ("GET", {"k": 3}, 400, "q is missing: give ?q=<query>"),
    ("GET", {"q": "x" * (MAX_QUERY_CHARS + 1)}, 400, f"q is {MAX_QUERY_CHARS + 1:,} characters ({MAX_QUERY_CHARS + 1:,} "
     f"bytes) long; the longest served is {MAX_QUERY_CHARS:,} characters and {MAX_QUERY_BYTES:,} bytes"),
    ("GET", {"q": "€" * 334}, 400, f"q is 334 characters (1,002 bytes) long; the longest served is {MAX_QUERY_CHARS:,} "
     f"characters and {MAX_QUERY_BYTES:,} bytes"),
    ("GET", {"q": "drill", "mode": "semantic"}, 400, "mode 'semantic' is not one of dense, rrf, rerank, linear, bm25"),
    ("POST", {"queries": ["drill"] * (Limits().max_batch + 1)}, 413,
     f"{Limits().max_batch + 1} queries in one request; at most {Limits().max_batch} are served at once"),
    ("POST", {"queries": []}, 400, "no queries: give at least one"),
    ("POST", {"queries": ["drill", " "]}, 400, "query 2 is empty: give a query with at least one word"),
    ("POST", {"queries": "drill"}, 400, "queries: Input should be a valid list"),
    ("POST", {"queries": ["drill"], "size": 3}, 400, "size: Extra inputs are not permitted"),
    ("POST", {"queries": ["drill"], "k": -1}, 400, f"k -1 is out of range: give 1 to {MAX_K:,}"),
    ("POST", b'{"queries": ["drill"', 400, "the body is not valid JSON"),
    ("POST", b'{"queries": ["\\ud800"]}', 400, "query 1 is not valid text (it holds a lone UTF-16 surrogate)"),
    ("POST", b"[" + b'"x",' * 200_000 + b'"x"]', 413, f"the request body is over {Limits().max_body_bytes:,} bytes"),
]


@pytest.mark.parametrize("method, request_, status, message", BAD, ids=[line for *_, line in BAD])
def test_a_bad_request_gets_one_json_line_and_a_4xx(served: Served, method: str, request_: Any, status: int,
                                                    message: str) -> None:
    with served.client() as client:
        if method == "GET":
            response = client.get("/search", params=request_)
        else:
            content = request_ if isinstance(request_, bytes) else json.dumps(request_).encode()
            response = client.post("/search", content=content, headers={"content-type": "application/json"})
    assert response.status_code == status
    body = response.json()
    assert list(body) == ["error"] and body["error"].startswith(message), body
    assert "\n" not in body["error"] and "Traceback" not in response.text


def test_health_readiness_metrics_and_the_openapi_docs(served: Served) -> None:
    assert served.first_ready and set(served.first_ready) == {503}  # 503 while loading, then 200
    with served.client() as client:
        assert client.get("/healthz").json() == {"status": "alive"}
        ready = client.get("/readyz").json()
        assert ready["status"] == "ready" and ready["version"] == "1" and ready["titles"] > 1000
        assert client.get("/nowhere").json() == {"error": "Not Found"}
        assert client.get("/search", params={"q": "drill"}).status_code == 200  # this test's own: workers differ
        client.get("/search", params={"q": "drill", "k": 0})
        text = client.get("/metrics").text
        spec = client.get("/openapi.json").json()
        docs = client.get("/docs")
    assert metric(text, "deepsent_serve_requests_total", route="/search", status="200") >= 1
    assert metric(text, "deepsent_serve_requests_total", route="/search", status="400") >= 1
    assert metric(text, "deepsent_serve_requests_total", route="other", status="404") >= 1
    assert metric(text, "deepsent_serve_request_seconds_count", route="/search") >= 2
    assert metric(text, "deepsent_serve_ready") == 1
    assert metric(text, "deepsent_serve_swaps_total") == 0 and metric(text, "deepsent_serve_swaps_refused_total") == 0
    info = next(line for line in text.splitlines() if line.startswith("deepsent_serve_model_info{"))
    assert f'build="{ready["build"]}"' in info and 'version="1"' in info
    assert {"get", "post"} <= set(spec["paths"]["/search"]) and "SearchRequest" in json.dumps(spec)
    assert docs.status_code == 200 and "swagger" in docs.text.lower()


def test_the_search_page_shows_both_columns_escaped(served: Served, tmp_path: Path) -> None:
    hostile = '<script>alert("x")</script> drill & "bit"'
    with served.client() as client:
        empty = client.get("/")
        page = client.get("/", params={"q": hostile, "mode": "dense", "k": 5})
        bad = client.get("/", params={"q": "x" * (MAX_QUERY_CHARS + 1)})
        answer = client.get("/search", params={"q": hostile, "mode": "dense", "k": 5}).json()
        lexical = client.get("/search", params={"q": hostile, "mode": "bm25", "k": 5}).json()
    assert empty.status_code == 200 and "<form" in empty.text and "<table" not in empty.text
    assert page.status_code == 200 and page.headers["content-security-policy"].startswith("default-src 'none'")
    assert "<script" not in page.text and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; drill &amp;" in page.text
    assert page.text.count("<table>") == 2
    assert page.text.index("<h2>dense</h2>") < page.text.index("<h2>bm25 (lexical)</h2>")
    for hit in answer["hits"] + lexical["hits"]:
        assert f"<td>{hit['doc_id']}</td>" in page.text
    assert bad.status_code == 400 and "the longest served is" in bad.text
    chromium = _chromium(f"{served.url}/?q=cordless+drill&mode=dense&k=10", tmp_path / SHOT)
    assert chromium["errors"] == [] and chromium["images"] == []


def _chromium(url: str, shot: Path) -> dict[str, Any]:
    """The page in headless Chromium (skipped without it): its errors, its images, a screenshot with ink on it."""
    from tests.encoders.test_analysis_report import _chromium_check, _pixels

    seen = _chromium_check(url, shot)
    colours, inked = _pixels(shot.read_bytes())
    assert colours > 10 and inked > 0.02, (colours, inked)
    return seen


def test_an_unexpected_error_is_one_line_to_the_client_and_to_the_log(caplog: pytest.LogCaptureFixture) -> None:
    from fastapi import FastAPI
    from starlette.testclient import TestClient

    from deepsent.server.guard import Guard, internal_error
    from deepsent.server.metrics import ServeMetrics

    app, metrics = FastAPI(), ServeMetrics()
    app.add_exception_handler(Exception, internal_error(metrics))  # as build_app installs it

    @app.get("/search")
    def broken() -> None:
        raise RuntimeError("a bug\n  with a second line")

    with TestClient(Guard(app, metrics, None, 1000, 5.0), raise_server_exceptions=False) as client:
        response = client.get("/search")
    assert response.status_code == 500
    assert response.json() == {"error": "internal error: the request failed on the server (its log says why)"}
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == [
        "GET /search failed: RuntimeError: a bug with a second line"]
    assert metric(metrics.render().decode(), "deepsent_serve_errors_total", kind="internal") == 1
    assert metric(metrics.render().decode(), "deepsent_serve_requests_total", route="/search", status="500") == 1
