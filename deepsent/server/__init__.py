"""``deepsent serve``: the champion's index behind an HTTP API and a search page, swapped in place.

:mod:`~deepsent.server.loaded` opens what is served (the one import of the search layer),
:mod:`~deepsent.server.watcher` keeps it current, :mod:`~deepsent.server.app` answers (behind
:mod:`~deepsent.server.guard`) within the bounds of :mod:`~deepsent.server.limits`, concurrent requests' searches
gathered by :mod:`~deepsent.server.batcher`, counted by
:mod:`~deepsent.server.metrics`; :mod:`~deepsent.server.page` renders the search page. The command is
``deepsent/commands/serve.py``.
"""
