"""The index DAG's stages (:data:`deepsent.chain.INDEX_CHAIN`): the champion's corpus re-encoded where the catalogue
moved and re-indexed, by the chain's own encode and index code (their names are the DAG's task ids)."""
from __future__ import annotations

from deepsent.chain_results import ChainRun, Champion
from deepsent.stages import corpus_encoded, corpus_indexed
from encoders.search.results import EncodeResult, IndexResult


def encode(run: ChainRun, champion: Champion, shard: dict[str, int] | None = None) -> EncodeResult:
    """The champion's vectors of the corpus titles no stage encoded yet (new and retitled products)."""
    return corpus_encoded(run, champion.model_uri, shard)


def build_index(run: ChainRun, champion: Champion) -> IndexResult:
    """The champion's index rebuilt on the latest catalogue (a rebuild of an unchanged corpus gives the same bytes)."""
    return corpus_indexed(run, champion.model_uri)
