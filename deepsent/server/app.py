"""The HTTP API of ``deepsent serve`` (FastAPI): search, the search page, health, readiness, metrics, OpenAPI docs.

``GET /search?q=&k=&mode=`` and ``POST /search`` (``{"queries": [...], "k": .., "mode": ..}``) answer with the hits of
``deepsent search --json`` (rank, doc_id, title, score, found_by) and the model URI, version, build and mode that
found them. Every refusal is one JSON line, ``{"error": "..."}``: 400 for a bad value, 401 without the token (when
one is set), 413 for too many queries or too large a body, 503 with Retry-After while loading or over the
concurrency limit, 504 past the request timeout. Each request reads the served index once, so a swap during it
does not mix two builds in one answer; its search joins a batch of that index's (:mod:`deepsent.server.batcher`).
"""
from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from deepsent.server import page
from deepsent.server.guard import Guard, internal_error
from deepsent.server.batcher import Batcher
from deepsent.server.limits import (DEFAULT_K, RETRY_AFTER_S, BadRequest, Batching, Gate, Limits, Overloaded, TimedOut,
                                    checked_search)
from deepsent.server.loaded import MODES, Asked, Found, Hit, Loaded
from deepsent.server.metrics import CONTENT_TYPE, ServeMetrics
from deepsent.server.watcher import Watcher

#: The lexical column of the search page.
LEXICAL = "bm25"


class NotReady(Exception):
    """No index is loaded yet (503 with Retry-After)."""


class SearchRequest(BaseModel):
    """A batch search: up to the server's batch bound of queries, k titles each, in one mode (default: the index's)."""

    model_config = ConfigDict(extra="forbid")
    queries: list[str] = Field(description="the query texts")
    k: int = Field(DEFAULT_K, description="titles per query")
    mode: str | None = Field(None, description=f"one of {', '.join(MODES)} (default: the index's served mode)")


def build_app(watcher: Watcher, limits: Limits, metrics: ServeMetrics, token: str | None,
              batching: Batching = Batching()) -> tuple[Any, Batcher]:
    """The ASGI app (the API behind its :class:`~deepsent.server.guard.Guard`) and the batcher its searches join
    (:meth:`Batcher.close` once the server stopped)."""
    app = FastAPI(title="deepsent serve", summary="The champion's corpus index: top-k product titles of a query.")
    gate, batcher = Gate(limits, metrics.in_flight), Batcher(batching, metrics.batched)
    refusals = {BadRequest: lambda exc: (exc.status, str(exc), None),
                NotReady: lambda exc: (503, f"not ready: loading {watcher.model_uri} (see /readyz)", "not ready"),
                Overloaded: lambda exc: (503, f"over the limit of {limits.max_in_flight} searches at once; try again",
                                         "overloaded"),
                TimedOut: lambda exc: (504, f"the search took longer than {limits.timeout_s:g} s", "timeout"),
                RequestValidationError: lambda exc: (400, invalid_request(exc), None),
                HTTPException: lambda exc: (exc.status_code, str(exc.detail), None)}

    def refused(exc: Exception) -> tuple[int, str, dict[str, str]]:
        status, message, kind = refusals[next(cls for cls in type(exc).__mro__ if cls in refusals)](exc)
        if kind in ("overloaded", "timeout"):
            metrics.errors.labels(kind).inc()
        return status, message, {"retry-after": str(RETRY_AFTER_S)} if status == 503 else {}

    async def json_refusal(_: Request, exc: Exception) -> JSONResponse:
        status, message, headers = refused(exc)
        return JSONResponse({"error": message}, status, headers)

    for kind in refusals:
        app.add_exception_handler(kind, json_refusal)
    app.add_exception_handler(Exception, internal_error(metrics))

    async def searched(queries: list[str], k: int, mode: str | None, lexical: bool = False, batch: bool = False
                       ) -> tuple[Loaded, str, Found]:
        loaded = watcher.current  # once: this request's answer comes from this object whatever swaps meanwhile
        if loaded is None:
            raise NotReady()
        queries = checked_search(queries, k, mode, MODES, limits, batch)
        mode = mode or loaded.default_mode
        modes = (mode, LEXICAL) if lexical and mode != LEXICAL else (mode,)
        asked = Asked(queries, k, modes)
        return loaded, mode, await gate.run(lambda: batcher.submit(loaded, asked))

    def where(loaded: Loaded, mode: str) -> dict[str, Any]:
        return {"model_uri": loaded.model_uri, "version": loaded.index.version, "build": loaded.build, "mode": mode}

    @app.get("/search", summary="The top k titles of one query")
    async def search_one(q: str = Query(description="the query text"), k: int = Query(DEFAULT_K, description="titles"),
                         mode: str | None = Query(None, description=f"one of {', '.join(MODES)}")) -> JSONResponse:
        loaded, mode, found = await searched([q], k, mode)
        return JSONResponse({"query": q.strip(), "k": k, **where(loaded, mode), "hits": as_json(found[mode][0])})

    @app.post("/search", summary="The top k titles of each of a batch of queries")
    async def search_batch(request: SearchRequest) -> JSONResponse:
        loaded, mode, found = await searched(request.queries, request.k, request.mode, batch=True)
        results = [{"query": query.strip(), "hits": as_json(hits)} for query, hits in zip(request.queries, found[mode])]
        return JSONResponse({"k": request.k, **where(loaded, mode), "results": results})

    @app.get("/", response_class=HTMLResponse, summary="The search page: the served mode beside BM25")
    async def search_page(q: str = "", k: int = DEFAULT_K, mode: str | None = None) -> HTMLResponse:
        loaded, status, columns, error, headers = watcher.current, 200, [], "", {}
        shown = mode or (loaded.default_mode if loaded else MODES[0])
        if q:
            try:
                loaded, shown, found = await searched([q], k, mode, lexical=True)
                columns = [(f"{shown} (the served search)" if mode is None else shown, found[shown][0]),
                           (f"{LEXICAL} (lexical)", found[LEXICAL][0])]
            except (BadRequest, NotReady, Overloaded, TimedOut) as exc:
                status, error, headers = refused(exc)
        html = page.render(None if loaded is None else loaded.facts, q, k, shown, MODES, columns, error)
        return HTMLResponse(html, status, {**headers, "content-security-policy": page.POLICY,
                                           "x-content-type-options": "nosniff"})

    @app.get("/healthz", summary="Whether the process is alive")
    async def healthz() -> dict[str, str]:
        return {"status": "alive"}

    @app.get("/readyz", summary="200 once an index is loaded and served, 503 before")
    async def readyz() -> JSONResponse:
        loaded = watcher.current
        if loaded is None:
            return JSONResponse({"error": f"not ready: loading {watcher.model_uri}"}, 503,
                                {"retry-after": str(RETRY_AFTER_S)})
        return JSONResponse({"status": "ready", **loaded.facts})

    @app.get("/metrics", summary="Prometheus metrics")
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    return Guard(app, metrics, token, limits.max_body_bytes, limits.timeout_s), batcher


def as_json(hits: list[Hit]) -> list[dict[str, Any]]:
    """One query's hits as ``deepsent search --json`` prints them."""
    return [hit.to_json() for hit in hits]


def invalid_request(exc: RequestValidationError) -> str:
    """One line for a request FastAPI could not read: the first problem, where it is, and how many others."""
    errors = exc.errors()
    first = errors[0] if errors else {"loc": (), "msg": "unreadable request", "type": ""}
    where = ".".join(str(part) for part in first["loc"] if part not in ("query", "body"))
    if not where:
        text = f'the body must be a JSON object like {{"queries": ["..."], "k": 10}} ({first["msg"]})'
    elif first["type"] == "missing":
        text = f"{where} is missing" + (": give ?q=<query>" if where == "q" else "")
    elif first["type"] == "json_invalid":
        text = f"the body is not valid JSON ({first.get('ctx', {}).get('error', first['msg'])})"
    else:
        text = f"{where}: {first['msg']}"
    return text + (f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else "")
