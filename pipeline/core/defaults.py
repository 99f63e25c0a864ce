"""Defaults every front door shares (CLI flags, the runner, DAG params, stage functions), each set once here."""
from __future__ import annotations

#: The seed of every random choice: simulation, splits, negatives, weights, data order, fits, bootstrap.
SEED = 7
#: Random unclicked titles per clicked pair (the paper's n = 4).
NEGATIVES = 4
#: The smoothing factor of the loss -log softmax(gamma * R) of eq. (5) (the paper's 10).
GAMMA = 10.0
#: Most passes over the training pairs (the paper's 30); early stopping may end sooner.
EPOCHS = 30
#: Epochs without a better validation loss before training stops.
PATIENCE = 5
#: Where torch runs: ``auto`` = CUDA when present (``DEEPSENT_DEVICE``).
DEVICES = ("auto", "cpu", "cuda")
#: Arithmetic of training: ``fp32`` (the paper's numbers are reproduced in it) or ``bf16`` mixed precision
#: (bfloat16 autocast on CUDA; the weights, the optimiser and the loss stay float32).
PRECISIONS = ("fp32", "bf16")
#: Where featurize's negatives come from (pipeline.features.negatives): random is the paper's and the default.
NEGATIVE_SOURCES = ("random", "skipped", "mixed", "bm25", "ann")
#: The sources whose titles are mined from the corpus by a first stage (``encoders.search.mining``).
MINED_SOURCES = ("bm25", "ann")
#: The gate setting's values (``Settings.gate_judgments``) besides a path: the demo's gate slice of the training
#: judgments (the default), and no judged gate set, the held-out click lists deciding.
GATE_SLICE, GATE_CLICKS = "gate-slice", "clicks"
