"""Whole-corpus retrieval on a judged set (``deepsent compare --retrieval``, the chain's search stage): the comparison
(``compare``), a model's rows as served (``served``) and the metrics (``metrics``)."""
