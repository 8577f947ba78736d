#!/usr/bin/env bash
# Speed against the peers, side by side in one process (entries alternated,
# medians over rounds): training examples/s (Bellman-Ford, batch 32, n=16) and
# forward examples/s at n=64 of our rt, the RT authors' RT (their CLRS fork),
# dm-clrs mpnn-512 and triplet_gmpnn, our et and rt_triangular.
#   RT_REF=/tmp/peers/rt bash scripts/bench_peers.sh   -> results/bench_peers.json
# Without a checkout of github.com/CameronDiao/relational-transformer at
# $RT_REF the authors' entry is skipped (never vendored into this repo).
set -euo pipefail
cd "$(dirname "$0")/.."
RT_REF=${RT_REF:-/tmp/peers/rt}
REF_FLAG=()
if [ -d "$RT_REF" ]; then
  REF_FLAG=(--rt_reference="$RT_REF")
else
  echo "No RT authors' checkout at $RT_REF: check out github.com/CameronDiao/relational-transformer at $RT_REF (a snapshot; never vendored) to include it." >&2
fi
python3 -m experiments.bench.peers "${REF_FLAG[@]}" --rounds="${ROUNDS:-3}" \
  --train_iters="${TRAIN_ITERS:-2}" --eval_iters="${EVAL_ITERS:-1}" \
  --output="${OUT:-results/bench_peers.json}" "$@"
