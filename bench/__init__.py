"""The benchmarks, grouped by what they measure; each writes JSON to :data:`RESULTS`, which docs_render reads.

``stages/``: a stage's rate and cost (ingest, featurize, training, embedding); ``search/``: the served index
and the served fusion; ``quality/``: what the models score (over seeds, on held-out clicks, fine-tuned);
``gpu/``: the GPU session of docs/GPU.md. Run one from the repository root as a module, e.g.
``.venv/bin/python -m bench.stages.ingest``.
"""
import json
from pathlib import Path
from typing import Any

#: Where every benchmark writes its JSON (``bench/results/``, committed).
RESULTS = Path(__file__).resolve().parent / "results"


def write_results(path: Path, result: Any, sort_keys: bool = False) -> None:
    """Write a benchmark's ``result`` as indented JSON to ``path`` (its folder made) and say where."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, sort_keys=sort_keys) + "\n", encoding="utf-8")
    print(f"wrote {path}")
