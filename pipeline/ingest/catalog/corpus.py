"""The run's corpus: the titles every stage after ingest embeds, indexes and searches, read beside the catalogue."""
from __future__ import annotations

from pipeline.core.config import Settings
from pipeline.ingest.catalog.days import latest_catalog
from pipeline.storage.store import Store
from pipeline.text.homedepot import read_judgments
from pipeline.text.textnorm import normalize


def corpus_titles(settings: Settings, store: Store) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """The run's corpus, (doc_id, normalised title) rows, and how many each source added (store files by their store path,
    so a copied store reports the same): the live products of the store's latest catalogue (doc_id = product_id, by
    id), or, for a store without a catalogue, the distinct titles of both judgment files and the click pairs."""
    catalog = latest_catalog(store)
    if catalog is not None:
        path, products = catalog
        return products, {path: len(products)}
    seen: dict[str, str] = {}
    sources: dict[str, int] = {}
    tables = [(str(p), read_judgments(p)) for p in (settings.train_judgments, settings.dev_judgments)]
    tables += [(f, t) for f, t in store.iter_tables("pairs", ["doc_id", "title"])]  # store files by their store path
    for source, table in tables:
        before = len(seen)
        for doc_id, title in zip(table["doc_id"].to_pylist(), table["title"].to_pylist()):
            seen.setdefault(doc_id, normalize(title))
        sources[source] = len(seen) - before
    return list(seen.items()), sources
