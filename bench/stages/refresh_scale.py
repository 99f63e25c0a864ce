"""The store the refresh benchmark scales to N titles (``python -m bench.stages.refresh --scale N``).

Encoding a million titles through the shipped model would take hours on two cores, so the scaled catalogue is made
of copies of the real one (:func:`bench.search.scaled.copies_of`), as the serving benchmark scales its index. Each
copy's vectors are stored in ``vectors/`` as a
stage would have stored them (every encoder part's vector of the real title, moved by a little seeded noise), so
the store looks as it would after the encode stage of a real N-title catalogue. Its clicks (``pairs/``,
``click_lists/``) and MLflow database are copies of the real store's. The index built over it is the one a refresh
then replaces.
"""
from __future__ import annotations

import csv
import datetime as dt
import io
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.search.scaled import copies_of

CHUNK = 100_000
NOISE = 0.1


def snapshot_csv(products: list[tuple[str, str]]) -> bytes:
    """A catalogue snapshot file of ``products``."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["product_id", "title"])
    writer.writerows(products)
    return out.getvalue().encode()


def store_copy_vectors(real_store: Any, store: Any, encoder: Any, titles: list[str], size: int, seed: int) -> None:
    """Every encoder part's vectors of the first ``size`` copies of ``titles`` (normalised, in copy order) stored in
    ``store``: copy 0 the real vectors, the others moved by seeded noise of relative size :data:`NOISE`."""
    from encoders.model.vector_store import PartVectors
    from pipeline.text.textnorm import normalize

    texts = [normalize(t) for t in titles]
    for part in encoder.parts("doc"):
        known = PartVectors(real_store, part, encoder).known()
        base = np.stack([known[t] for t in texts]).astype(np.float32)
        scale = NOISE * np.linalg.norm(base, axis=1, keepdims=True) / np.sqrt(base.shape[1])
        target = PartVectors(store, part, encoder)
        names = copies_of([(t, t) for t in texts], size)
        for start in range(0, size, CHUNK):
            rows = np.arange(start, min(size, start + CHUNK))
            copy, row = rows // len(texts), rows % len(texts)
            rng = np.random.default_rng([seed, start])
            vectors = base[row] + (copy > 0)[:, None] * scale[row] * rng.standard_normal((len(rows), base.shape[1]),
                                                                                       dtype=np.float32)
            target.add([normalize(names[i][1]) for i in rows], vectors.astype(np.float32))


def scaled_store(settings: Any, model_uri: str, size: int, root: str, day: dt.date, seed: int) -> tuple[Any, dict[str, Any]]:
    """Settings of a store at ``root`` whose catalogue on ``day`` holds ``size`` products, their vectors stored and
    indexed (see the module docstring), and what building it took."""
    from encoders.model.loading import load_encoder
    from encoders.search.served_index import ServedIndex
    from pipeline.storage.store import Store
    from pipeline.ingest.catalog.days import latest_catalog
    from pipeline.ingest.ingest import ingest_dates

    real_store = Store.from_settings(settings)
    found = latest_catalog(real_store)
    if found is None:
        raise SystemExit(f"{real_store.uri()}: no catalogue; run make run first")
    products = found[1]
    shutil.rmtree(root, ignore_errors=True)
    Path(root).mkdir(parents=True)
    for folder in ("pairs", "click_lists"):
        shutil.copytree(Path(real_store.root) / folder, Path(root) / folder)
    shutil.copyfile(settings.mlflow_tracking_uri.removeprefix("sqlite:///"), Path(root) / "mlflow.db")
    scaled = settings.with_overrides(store=root, mlflow_tracking_uri=f"sqlite:///{root}/mlflow.db")
    store, took = Store.from_settings(scaled), {}
    began = time.perf_counter()
    catalogue = copies_of(products, size)
    store.write_bytes(f"landing/catalog/dt={day.isoformat()}/snapshot.csv", snapshot_csv(catalogue))
    ingest_dates(scaled, [day])
    took["catalogue_s"] = round(time.perf_counter() - began, 1)
    began = time.perf_counter()
    store_copy_vectors(real_store, store, load_encoder(model_uri, settings), [t for _, t in products], size, seed)
    took["vectors_s"] = round(time.perf_counter() - began, 1)
    began = time.perf_counter()
    first = ServedIndex.build(scaled, model_uri)
    took["first_build_s"], took["first_build"] = round(time.perf_counter() - began, 1), first.seconds
    print(f"scaled store of {size:,} products built: {took}", flush=True)
    return scaled, took
