"""The served index and the thread that swaps it: a promotion or a new build is switched in without a dropped request.

:class:`Watcher` opens the model URI's live build once, then polls every ``poll_s`` seconds where the registry alias
and the index's ``current.json`` point (:func:`~deepsent.server.loaded.pointer_now`: two small reads). When either
moved, it opens the new build beside the one served (checked file by file; the encoder reused when only the build
changed) and switches by one assignment of :attr:`Watcher.current`; a request reads that reference once and keeps
the object it started with. A build that fails its checks is refused: logged, counted, the old one keeps serving,
and it is not tried again until a pointer moves again. On the stack, the index DAG's asset event reaches a running
server the same way: the DAG publishes a build by rewriting ``current.json``, which the next poll sees.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable

from deepsent.server.limits import CACHE_BYTES
from deepsent.server.loaded import Loaded, Pointer, open_loaded, pointer_now
from deepsent.server.metrics import ServeMetrics
from pipeline.core.config import Settings
from pipeline.core.errors import DeepsentError

log = logging.getLogger(__name__)


class Watcher(threading.Thread):
    """Loads the served index, then keeps it current (a daemon thread; :meth:`stop` ends it)."""

    def __init__(self, settings: Settings, model_uri: str, poll_s: float, metrics: ServeMetrics,
                 on_failed_start: Callable[[], None], cache_bytes: int = CACHE_BYTES) -> None:
        super().__init__(name="deepsent-serve-watcher", daemon=True)
        self.settings, self.model_uri, self.poll_s, self.metrics = settings, model_uri, poll_s, metrics
        self.cache_bytes = cache_bytes  # each served index's BM25 cache bound
        metrics.bm25_cache.set_function(lambda: 0 if (now := self.current) is None else now.index.bm25_cache_size)
        self.on_failed_start = on_failed_start
        self.current: Loaded | None = None  # what requests search: read once per request, replaced by one assignment
        self.start_error: BaseException | None = None  # why the first load failed (the server then stops)
        self._tried: Pointer | None = None  # the last pointer that did not serve: not tried again until one moves
        self._poll_error = ""
        self._stopped = threading.Event()

    def run(self) -> None:
        """Open the live build, then poll until stopped."""
        try:
            self._switch(open_loaded(self.settings, self.model_uri, cache_bytes=self.cache_bytes))
        except BaseException as exc:  # noqa: BLE001 - told to the command, which reports it as one line
            self.start_error = exc
            self.on_failed_start()
            return
        while not self._stopped.wait(self.poll_s):
            self.check()

    def stop(self) -> None:
        """Stop polling (a load in progress finishes in the background; the thread is a daemon)."""
        self._stopped.set()

    def check(self) -> None:
        """One poll: swap in the build the pointers name now, when it is another one and not refused before."""
        served = self.current
        try:
            now = pointer_now(self.settings, self.model_uri, served)
        except Exception as exc:  # noqa: BLE001 - an unreachable registry or a damaged pointer: keep serving
            self.metrics.poll_errors.inc()
            message = _one_line(exc)
            if message != self._poll_error:  # said once, not every poll
                log.warning("could not look for a new index (%s); still serving %s", message, _named(served))
            self._poll_error = message
            return
        self._poll_error = ""
        if served is None or now == served.pointer:
            self._tried = None  # a pointer that moves away again is tried again
            return
        if now == self._tried:
            return
        self._tried = now
        if now.build is None:
            log.info("%s now names version %s, which has no index yet; still serving %s (it is loaded once "
                     "deepsent index publishes one)", self.model_uri, now.version, _named(served))
            return
        try:
            loaded = open_loaded(self.settings, self.model_uri, reuse=served, cache_bytes=self.cache_bytes)
        except Exception as exc:  # noqa: BLE001 - a build that fails its checks (or cannot be read) is refused
            self.metrics.refused.inc()
            log.warning("refused version %s build %s: %s; still serving %s", now.version,
                        now.build.rsplit("/", 1)[-1], _one_line(exc), _named(served))
            if not isinstance(exc, DeepsentError):
                log.debug("the refused build's error", exc_info=exc)
            return
        self._switch(loaded)
        self.metrics.swaps.inc()

    def _switch(self, loaded: Loaded) -> None:
        self.current = loaded
        self.metrics.now_serving(loaded.facts)
        log.info("serving %s (%s, %s titles, default mode %s)", _named(loaded), loaded.facts["model"],
                 f"{loaded.facts['titles']:,}", loaded.default_mode)


def _named(loaded: Loaded | None) -> str:
    return "nothing" if loaded is None else f"{loaded.model_uri} version {loaded.index.version} build {loaded.build}"


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if not isinstance(exc, DeepsentError) else text
