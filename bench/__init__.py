"""The benchmarks, grouped by what they measure; each writes JSON to :data:`RESULTS`, which docs_render reads.

``stages/``: a stage's rate and cost (ingest, featurize, training, embedding); ``search/``: the served index
and the served fusion; ``quality/``: what the models score (over seeds, on held-out clicks, fine-tuned);
``gpu/``: the GPU session of docs/GPU.md. Run one from the repository root as a module, e.g.
``.venv/bin/python -m bench.stages.ingest``.
"""
from pathlib import Path

#: Where every benchmark writes its JSON (``bench/results/``, committed).
RESULTS = Path(__file__).resolve().parent / "results"
