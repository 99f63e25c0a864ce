"""``deepsent serve``'s connections on a real uvicorn subprocess: request lines and headers bounded in size and time
while good clients keep their latency, idle connections closed and one over the cap refused with a JSON 503,
malformed HTTP answered with one JSON line, and the BM25 cache held within its byte bound."""
from __future__ import annotations

import json
import selectors
import socket
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

from tests.deepsent.serve_process import Served, metric, private_index, start

pytestmark = pytest.mark.services  # real uvicorn servers

#: The request line of a search as a raw client sends it.
GOOD = b"GET /search?q=cordless+drill HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n"


@pytest.fixture()
def index(small_index: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """A private copy of the small index."""
    return private_index(small_index, tmp_path)


def _port(served: Served) -> int:
    return int(served.url.rsplit(":", 1)[1])


def _connect(served: Served, timeout: float = 10.0) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", _port(served)), timeout=timeout)
    sock.settimeout(timeout)
    return sock


def _answers(socks: list[socket.socket], within: float) -> tuple[list[bytes | None], float]:
    """What the server sends on each socket until it closes it (None: still open after ``within`` seconds), and
    the seconds until the last one closed."""
    started, out = time.monotonic(), [b""] * len(socks)
    with selectors.DefaultSelector() as selector:
        for number, sock in enumerate(socks):
            selector.register(sock, selectors.EVENT_READ, number)
        while selector.get_map() and (left := started + within - time.monotonic()) > 0:
            for key, _ in selector.select(left):
                try:
                    chunk = key.fileobj.recv(65_536)  # type: ignore[union-attr]
                except ConnectionResetError:
                    chunk = b""
                out[key.data] += chunk
                if not chunk:
                    selector.unregister(key.fileobj)
        still_open = {key.data for key in selector.get_map().values()}
    return [None if number in still_open else raw for number, raw in enumerate(out)], time.monotonic() - started


def _answer(sock: socket.socket, within: float = 10.0) -> bytes | None:
    """What the server sends on ``sock`` until it closes it (None: still open after ``within`` seconds)."""
    return _answers([sock], within)[0][0]


def _status_and_json(raw: bytes) -> tuple[int, Any]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(body)


def _timed_search(served: Served) -> float:
    started = time.perf_counter()
    with _connect(served) as sock:
        sock.sendall(GOOD)
        raw = _answer(sock)
    assert raw is not None
    status, body = _status_and_json(raw)
    assert status == 200 and len(body["hits"]) == 10
    return time.perf_counter() - started


def test_slow_endless_headers_time_out_and_good_searches_keep_their_latency(index: dict[str, Any]) -> None:
    served = start(index, "--header-timeout-seconds", "3")
    slow: list[socket.socket] = []
    try:
        before = [_timed_search(served) for _ in range(10)]
        for _ in range(200):  # each sends a request line that never ends, a few bytes at a time
            slow.append(_connect(served))
            slow[-1].sendall(b"GET /search?q=" + b"a" * 8)
        during, trickled, opened = [], 0, time.monotonic()
        while time.monotonic() - opened < 2.5:
            for sock in slow:
                try:
                    sock.send(b"a")
                    trickled += 1
                except OSError:
                    pass
            during.append(_timed_search(served))
        answers, closed_after = _answers(slow, 10.0)  # each ends within the header timeout
        with _connect(served) as big:  # a header that grows past the bound is answered at once, not buffered
            big.sendall(b"GET /search?q=drill HTTP/1.1\r\nx-pad: " + b"a" * 20_000)
            too_big = _answer(big)
        with served.client() as client:
            text = client.get("/metrics").text
    finally:
        for sock in slow:
            sock.close()
        assert served.stop() == 0
    assert trickled > 1_000
    assert statistics.median(during) < max(0.25, 5 * statistics.median(before)), (before, during)
    assert max(during) < 2.0, during
    assert closed_after < 6.0
    assert all(raw is not None and _status_and_json(raw) == (408, {"error": "the request line and headers took "
                                                                            "longer than 3 s"}) for raw in answers)
    assert metric(text, "deepsent_serve_connections_refused_total", reason="header_timeout") == 200
    assert metric(text, "deepsent_serve_connections_refused_total", reason="too_large") == 1
    assert _status_and_json(too_big) == (431, {"error": "the request line and headers are over 16,384 bytes, the most "
                                                        "read"})


def test_idle_connections_are_closed_and_one_over_the_cap_is_refused(index: dict[str, Any]) -> None:
    served = start(index, "--max-connections", "150", "--header-timeout-seconds", "2")
    idle: list[socket.socket] = []
    try:
        for _ in range(300):  # a few hundred connections that send nothing
            idle.append(_connect(served))
        answers, waited = _answers(idle, 10.0)
        answered = _timed_search(served)
        with served.client() as client:
            text = client.get("/metrics").text
    finally:
        for sock in idle:
            sock.close()
        assert served.stop() == 0
    refused = [raw for raw in answers if raw]
    assert 150 <= len(refused) <= 160  # the cap's worth were held until the timeout; the rest refused at once
    assert all(_status_and_json(raw) == (503, {"error": "over the limit of 150 connections; try again"})
               for raw in refused)
    assert answers.count(b"") == len(answers) - len(refused)  # idle ones closed silently, none left open
    assert waited < 6.0 and answered < 2.0
    assert metric(text, "deepsent_serve_connections_refused_total", reason="over_cap") == len(refused)
    assert metric(text, "deepsent_serve_connections_refused_total", reason="idle") == len(answers) - len(refused)
    assert metric(text, "deepsent_serve_requests_total", route="/search", status="200") == 1


@pytest.mark.parametrize("raw, status, error", [
    (b"GET /search?q=a b HTTP/1.1\r\nhost: t\r\n\r\n", 400, "malformed request: not HTTP/1.1"),
    ("GET /search?q=perceuse\u00e9 HTTP/1.1\r\nhost: t\r\n\r\n".encode(), 400, "malformed request: not HTTP/1.1"),
    (b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"\x00" * 32, 400, "malformed request: not HTTP/1.1"),
    (b"BREW /search?q=drill HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n", 405, "Method Not Allowed"),
    (b"DELETE / HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n", 405, "Method Not Allowed"),
])
def test_malformed_http_is_answered_with_one_json_line(one_server: Served, raw: bytes, status: int,
                                                       error: str) -> None:
    with _connect(one_server) as sock:
        sock.sendall(raw)
        answer = _answer(sock)
    assert answer is not None
    got_status, body = _status_and_json(answer)
    assert got_status == status and list(body) == ["error"] and body["error"].startswith(error), answer


@pytest.fixture(scope="module")
def one_server(small_index: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One server for the malformed requests."""
    served = start(private_index(small_index, tmp_path_factory.mktemp("malformed")))
    yield served
    assert served.stop() == 0


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_the_bm25_cache_stays_within_its_byte_bound_and_shows_in_metrics(index: dict[str, Any]) -> None:
    bound = 64 * 1024
    served = start(index, "--bm25-cache-mb", str(bound / 2**20))
    words = ["drill", "saw", "wood", "screw", "paint", "door", "light", "kit", "steel", "white", "black", "tool"]
    try:
        with served.client() as client:
            sizes, rss = [], [_rss_bytes(served.proc.pid)]
            for i in range(400):  # distinct queries, each sharing words with many titles
                query = f"{words[i % 12]} {words[(i // 12) % 12]} {words[(i // 144) % 12]} q{i}"
                assert client.get("/search", params={"q": query, "mode": "bm25"}).status_code == 200
                if i % 50 == 49:
                    sizes.append(metric(client.get("/metrics").text, "deepsent_serve_bm25_cache_bytes"))
                    rss.append(_rss_bytes(served.proc.pid))
    finally:
        assert served.stop() == 0
    assert 0 < max(sizes) <= bound, sizes
    assert rss[-1] - rss[1] < 32 * 2**20, rss  # no growth with the queries once the first have been served


def test_a_connection_cap_beyond_the_open_file_limit_is_one_line() -> None:
    import resource

    from deepsent.commands.serve import SPARE_FILES, allow_files
    from pipeline.core.errors import ConfigError

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard limit on open files here")
    with pytest.raises(ConfigError, match=rf"--max-connections {hard:,} needs {hard + SPARE_FILES:,} open files; this "
                       rf"process may open {hard:,} \(ulimit -n\): ask for at most {hard - SPARE_FILES:,}"):
        allow_files(hard)
    allow_files(100)  # within the limit: nothing to refuse
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= 100 + SPARE_FILES


def test_a_body_sent_slowly_is_answered_408_within_the_request_timeout(index: dict[str, Any]) -> None:
    """A POST whose body trickles in holds its connection no longer than ``--timeout-seconds``; good searches go on."""
    served = start(index, "--timeout-seconds", "1")
    try:
        body = json.dumps({"queries": ["cordless drill"], "k": 3}).encode()
        head = (f"POST /search HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\n"
                f"content-length: {len(body)}\r\n\r\n").encode()
        slow = _connect(served)
        slow.sendall(head + body[:5])  # the rest never comes
        started = time.monotonic()
        raw = _answer(slow, within=10.0)
        waited = time.monotonic() - started
        slow.close()
        good = _timed_search(served)
    finally:
        assert served.stop() == 0
    assert raw is not None, "the slow body was never answered"
    status, answer = _status_and_json(raw)
    assert status == 408 and answer == {"error": "the request body did not arrive within 1 s"}
    assert 0.9 <= waited < 5.0 and good < 5.0
