#!/usr/bin/env bash
# OOD score versus graph size of the small-budget checkpoints of
# scripts/clrs_small_budget.sh (run that first): evaluates the best checkpoints
# of rt and mpnn-512 at n = 16, 32, 64 without training, and plots both.
#   bash scripts/clrs_ood_sizes.sh   -> results/clrs_small_budget/{rt,mpnn512}_sizes.json, ood_sizes.png
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-results/clrs_small_budget}
SIZES=${SIZES:-16,32,64}
for name in rt mpnn512; do
  python3 -m experiments.clrs_evaluate --workdir="$OUT/$name" \
    --test_lengths="$SIZES" --results_path="$OUT/${name}_sizes.json" \
    --config_json="$OUT/$name.json"
done
python3 -m experiments.plot_ood "$OUT/rt_sizes.json" "$OUT/mpnn512_sizes.json" \
  --output="$OUT/ood_sizes.png"
