#!/usr/bin/env bash
# One session on a lent GPU machine (docs/GPU.md): run from the repository root there, with the git-ignored
# folders .whl/ (wheels of the packages that machine lacks: MLflow, Dask and their needs) and .gpu/ (the
# Home Depot judgments and a store holding the real click features, made here by simulate/ingest/pairs/
# featurize) carried along. Steps, in order, any subset: setup train tests bench ddp (default: all).
# Everything lands in $OUT: session.log (the summary) and results.tar.gz (every JSON and log).
set -uo pipefail
OUT=${OUT:-/tmp/gpu-out}
WORK=/tmp/gpu-session
mkdir -p "$OUT" "$WORK"
steps=${*:-setup train tests bench ddp}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "wheel install failed" >&2; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 DEEPSENT_DATA_DIR=$PWD/.gpu/data DEEPSENT_STORE=/tmp/store
export MLFLOW_TRACKING_URI=sqlite:////tmp/store/mlflow.db
[ -d /tmp/store ] || cp -r .gpu/store /tmp/store
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/session.log"; }
ds() { python3 -m deepsent.cli "$@"; }
timed() {  # timed NAME CMD...: stdout -> $WORK/NAME.json, stderr -> $WORK/NAME.err, duration and status logged
  local name=$1; shift; local t0=$SECONDS
  "$@" >"$WORK/$name.json" 2>"$WORK/$name.err"; local rc=$?
  log "$name: rc=$rc in $((SECONDS - t0)) s"; [ $rc -eq 0 ] || tail -5 "$WORK/$name.err" | tee -a "$OUT/session.log"
}

for step in $steps; do case $step in
setup)
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee -a "$OUT/session.log"
  python3 -c "import torch, mlflow, dask, pyarrow, numpy; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
torch.cuda.is_available(), 'mlflow', mlflow.__version__, 'dask', dask.__version__, 'pyarrow', pyarrow.__version__, \
'numpy', numpy.__version__)" 2>&1 | tee -a "$OUT/session.log" ;;
train)  # one epoch of every tower on the real click features, on CUDA and on CPU (same seed, same data)
  for model in lstm rnn bilstm dssm clsm; do
    for device in cuda cpu; do timed "train-$model-$device" ds --json train --model "$model" --epochs 1 \
      --device "$device" --threads 8 --experiment "gpu-$device"; done
  done
  for precision in fp32 bf16; do  # the trainer itself (loader, validation, MLflow) at a batch that fills the GPU
    timed "train-lstm-cuda-4096-$precision" ds --json train --model lstm --epochs 3 --batch-size 4096 \
      --precision "$precision" --device cuda --experiment gpu-throughput
  done
  uri=$(python3 -c "import json; print(json.load(open('$WORK/train-lstm-cuda.json'))['model_uri'])")
  timed embed-lstm-cuda ds --json embed --model-uri "$uri" --device cuda --batch-size 8192
  timed embed-lstm-cpu ds --json embed --model-uri "$uri" --device cpu --threads 8 --batch-size 1024
  python3 bench/gpu_parity.py "$WORK" | tee -a "$OUT/session.log" ;;
tests)
  timed pytest-cuda python3 -m pytest -p no:cacheprovider -m cuda -v -rs tests/encoders/test_cuda.py
  tail -15 "$WORK/pytest-cuda.json" | tee -a "$OUT/session.log" ;;
bench)
  timed bench-train-cuda python3 bench/train.py --device cuda --threads 8 --seconds 2 --batch-sizes 256,2048,8192 \
    --precisions fp32,bf16 --embed-titles 50000 --embed-batch 8192 --out "$WORK/train-cuda.json"
  cat "$WORK/bench-train-cuda.json" | tee -a "$OUT/session.log" ;;
ddp)
  timed ddp-torchrun python3 -m torch.distributed.run --standalone --nproc-per-node 1 -m deepsent.cli --json train \
    --model lstm --epochs 1 --device cuda --experiment gpu-ddp
  timed ddp-flag ds --json train --model lstm --epochs 1 --device cuda --ddp --experiment gpu-ddp
  grep -ho '"device": "[^"]*"' "$WORK"/ddp-*.json | tee -a "$OUT/session.log" ;;
*) log "unknown step $step" ;;
esac; done
tar -czf "$OUT/results.tar.gz" -C "$WORK" .
log "done: $steps"
