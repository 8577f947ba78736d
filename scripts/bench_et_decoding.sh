#!/usr/bin/env bash
# ET encoder-decoder greedy decoding (B=16, S=9, d=64, 4 heads, 3+3 tied layers):
# incremental (cached rows/columns) vs re-running the full causal pass each step,
# at decoding lengths T=16,32,48 (SCAN outputs are up to 49 tokens).
#   bash scripts/bench_et_decoding.sh      -> results/bench_et_decoding.json
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m experiments.bench.et_decoding --repeats=2 \
  --output=results/bench_et_decoding.json "$@"
