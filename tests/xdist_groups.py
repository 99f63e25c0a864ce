"""A pytest plugin: ``xdist_group`` marks that work under pytest 9 (pytest-xdist's ``--dist loadgroup``).

pytest-xdist 3.8 sends the tests of one ``xdist_group`` to one worker by appending ``@group`` to their node
ids in each worker (``item._nodeid = ...``). pytest 9 keeps a node's id in ``item._id`` instead, so that
assignment changes nothing and every grouped test is scheduled alone: a module fixture meant to be built once
(the celery stack, the DAG's shared retrain) was built on two workers at once. This hook appends the suffix
where pytest 9 reads it, after xdist's own hook, and only where it is still missing (a later xdist or pytest
that agree again keep theirs).
"""
from __future__ import annotations

import pytest


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give each test of an ``xdist_group`` its ``@group`` node id suffix on a loadgroup worker."""
    if not getattr(config.option, "loadgroup", False):  # set on xdist's workers under --dist loadgroup only
        return
    from _pytest.nodeid import coerce_node_id

    for item in items:
        groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                         for m in item.iter_markers("xdist_group")})
        suffix = "@" + "_".join(groups)
        if groups and not item.nodeid.endswith(suffix):
            item._id = coerce_node_id(item.nodeid + suffix)  # type: ignore[attr-defined]
