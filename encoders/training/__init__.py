"""Training as in the paper: data, optimiser, checkpoints, data-parallel runs, the trainer and the ensemble fit."""
