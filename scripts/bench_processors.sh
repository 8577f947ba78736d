#!/usr/bin/env bash
# Training examples/s (batch 32, n=16, Bellman-Ford) and forward examples/s at n=64
# of rt (paper size), mpnn-512, mpnn-192, triplet_gmpnn, rt_triangular and et.
#   bash scripts/bench_processors.sh   -> results/bench_processors.json
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m experiments.bench.processors --train_iters="${TRAIN_ITERS:-10}" \
  --eval_iters="${EVAL_ITERS:-2}" --output="${OUT:-results/bench_processors.json}" "$@"
