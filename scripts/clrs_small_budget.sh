#!/usr/bin/env bash
# OOD scores at n=64 of RT vs MPNN after the same small CPU budget.
# RT at its paper-tuned size (3 layers, 12x16 heads, d_nh 32, d_eh1 16, d_eh2 8,
# pointers from edges, lr 2.5e-4); MPNN at its paper-tuned width 512 and lr 1.6e-3
# (RT paper Table 2), stock CLRS network. Same steps, batch and evaluation sets.
#   STEPS=300 BATCH=8 ALGOS=bellman_ford,binary_search bash scripts/clrs_small_budget.sh
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${STEPS:-300}
BATCH=${BATCH:-8}
ALGOS=${ALGOS:-bellman_ford,binary_search}
EVAL_CAP=${EVAL_CAP:-256}
OUT=${OUT:-results/clrs_small_budget}
ALGOS_TUPLE="($(echo "$ALGOS" | sed 's/[^,][^,]*/"&"/g'),)"
COMMON=(--config.algorithms="$ALGOS_TUPLE" --config.train.steps="$STEPS"
  --config.train.batch_size="$BATCH" --config.train.eval_every=50
  --config.protocol.max_eval_samples="$EVAL_CAP" --config.protocol.test_lengths='(64,)'
  --noconfig.train.progress)
python3 -m experiments.clrs_train "${COMMON[@]}" --config.processor_type=rt \
  --config.train.learning_rate=2.5e-4 --workdir="$OUT/rt" --config.results_path="$OUT/rt.json"
python3 -m experiments.clrs_train "${COMMON[@]}" --config.processor_type=mpnn \
  --config.model.hidden_dim=512 --config.train.learning_rate=1.6e-3 \
  --noconfig.model.carry_state --noconfig.model.ptr_from_edges \
  --workdir="$OUT/mpnn512" --config.results_path="$OUT/mpnn512.json"
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
for name in ("rt", "mpnn512"):
  r = json.load(open(f"{out}/{name}.json"))
  for algo, e in r["algorithms"].items():
    print(f"{name:8s} {algo:28s} best val {e['mean_best_val']:.3f}  test n=64 {e['mean_test']['64']:.3f}  "
          f"train {e['runs'][0]['train_seconds']:.0f}s")
PY
