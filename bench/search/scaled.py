"""A corpus scaled to N titles for the benchmarks, made of copies of the real one (two cores cannot encode a million
titles through the shipped model): copy 0 is the real corpus, copy c holds each product as ``<id>~c`` titled
``<title> lot<c>``, its vectors the real ones moved by a little seeded noise. The serving benchmark indexes such
copies of the champion's index (:func:`scaled_store`); the refresh benchmark stores them as a catalogue with its
vectors (:mod:`bench.stages.refresh_scale`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def copies_of(products: list[tuple[str, str]], size: int) -> list[tuple[str, str]]:
    """``size`` (id, title) rows: ``products`` then copies of them, ``<id>~c`` titled ``<title> lot<c>``."""
    copies = -(-size // len(products))
    return [(pid if c == 0 else f"{pid}~{c}", title if c == 0 else f"{title} lot{c}")
            for c in range(copies) for pid, title in products][:size]


def copy_parts(base: np.ndarray, size: int, seed: int = 7, noise: float = 0.1) -> Any:
    """Parts of a corpus of ``size`` vectors (``vi.Parts``): ``base`` (unit rows) then copies of it, copy c moved by
    noise of length about ``noise`` seeded by ``seed + c`` and renormalised; made again on every call, so a corpus
    larger than memory streams."""
    from encoders.search.vectors import unit

    def moved(copy: int) -> np.ndarray:
        if copy == 0:
            return base
        rng = np.random.default_rng(seed + copy)
        return unit(base + (noise / np.sqrt(base.shape[1])) * rng.standard_normal(base.shape, dtype=np.float32))

    def parts() -> Any:
        left = size
        for copy in range(-(-size // len(base))):
            part = moved(copy)[:left]
            left -= len(part)
            yield part

    return parts


def scaled_store(settings: Any, model_uri: str, size: int, root: str, seed: int = 7, noise: float = 0.1) -> Any:
    """Settings of a store at ``root`` holding ``model_uri``'s index scaled to ``size`` titles (see the module
    docstring) and a copy of the MLflow database."""
    import shutil

    import pyarrow as pa

    from encoders.search import vector_index as vi
    from encoders.search.bm25 import BM25Index
    from encoders.search.corpus_index import index_root, training_query_vectors
    from encoders.search.served_index import ServedIndex
    from pipeline.storage.store import Store

    real = ServedIndex.open(settings, model_uri)
    base = real.index.reconstruct_n(0, real.index.ntotal)
    copies = -(-size // len(base))
    parts = copy_parts(base, size, seed, noise)
    names = copies_of(list(zip(real.doc_ids, real.titles)), size)
    tune = training_query_vectors(settings, real.store, model_uri, seed, real.encoder)
    print(f"building a scaled index of {size:,} titles ...", flush=True)
    built = vi.build(parts, size, base.shape[1], seed, None, tune)
    ids = pa.table({"doc_id": [d for d, _ in names], "title": [t for _, t in names]})
    bm25 = BM25Index()
    bm25.fit_corpus(ids["title"].to_pylist())
    Path(root).mkdir(parents=True, exist_ok=True)
    shutil.copyfile(settings.mlflow_tracking_uri.removeprefix("sqlite:///"), Path(root) / "mlflow.db")
    scaled = settings.with_overrides(store=root, mlflow_tracking_uri=f"sqlite:///{root}/mlflow.db")
    kept = {key: value for key, value in real.manifest.items() if key in ("model_uri", "run_id", "version", "model",
                                                                          "model_type", "dim", "vectors")}
    kept["titles"] = {"rows": size, "sources": {f"{copies} copies of {real.root}": size}}
    ServedIndex.publish(Store.from_settings(scaled), index_root(real.encoder.model_type, real.version, model_uri),
                        built, ids, bm25, kept, lambda _: real.manifest["search"])
    print(f"scaled index built in {built.build_seconds:.0f} s ({built.kind} {built.params.get('nprobe', '')})",
          flush=True)
    return scaled
