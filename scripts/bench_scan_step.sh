#!/usr/bin/env bash
# One SCAN training step (length cutoff 26, relative Universal Transformer,
# Csordas et al. 2021 settings, batch 256): ours (jitted JAX) against the
# authors' PyTorch Task.train_step, alternating processes pinned to the same
# $THREADS cores, same real batches; median step times and the ratio.
#   CS_REF=/tmp/cs TORCH_PY=/tmp/torchvenv/bin/python bash scripts/bench_scan_step.sh
#     -> results/bench_scan_step.json
# Without a checkout of github.com/RobertCsordas/transformer_generalization at
# $CS_REF (fetch github:RobertCsordas/transformer_generalization and check out
# its snapshot in a scratch directory; never vendored) the benchmark is skipped.
# $TORCH_PY: a venv with torch (pip install torch==2.13.0 requests psutil
# matplotlib setproctitle tensorboard).
set -uo pipefail
cd "$(dirname "$0")/.."
CS_REF=${CS_REF:-/tmp/cs}
TORCH_PY=${TORCH_PY:-/tmp/torchvenv/bin/python}
if [ ! -f "$CS_REF/main.py" ]; then
  echo "Skipping: no checkout of github.com/RobertCsordas/transformer_generalization at $CS_REF (fetch github:RobertCsordas/transformer_generalization, check out its snapshot there, or set CS_REF)." >&2
  exit 0
fi
exec python3 -m experiments.bench.scan_step --reference="$CS_REF" \
  --reference_python="$TORCH_PY" --threads="${THREADS:-2}" \
  --rounds="${ROUNDS:-6}" --steps_per_round="${STEPS:-3}" \
  --output="${OUT:-results/bench_scan_step.json}" "$@"
