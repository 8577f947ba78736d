#!/usr/bin/env bash
# One ET layer, B=32, D=192, 8 heads: forward+backward time and compiled peak
# memory (XLA memory_analysis) at N=16,32,64, chunked (ours) vs the reference that
# materialises the full triangle tensor (run only where it fits).
#   bash scripts/bench_triangular.sh                          -> results/bench_triangular.json
#   FORWARD_ONLY_SIZES=128 bash scripts/bench_triangular.sh   # also N=128 forward only
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m experiments.bench.triangular --repeats=2 \
  --forward_only_sizes="${FORWARD_ONLY_SIZES:-}" --output=results/bench_triangular.json "$@"
