#!/usr/bin/env bash
# SCAN length cutoff 26 (Csordas, Irie & Schmidhuber 2021, "The Devil is in the
# Detail", Table 1 / Table 7): relative Universal Transformer vs absolute
# Universal Transformer (PED scaling, the paper's SCAN choice, Table 6), with the
# paper's SCAN settings (Table 4): d_model 128, 8 heads, 3+3 layers (one shared
# layer each, applied 3 times), d_ff 256, dropout 0.1, Adam lr 1e-3 (constant),
# batch 256, gradient clipping 5, up to 50k steps; EOS predicted, no oracle
# length. Model selection: none (SCAN has no generalisation validation set):
# the reported accuracies are those of the last step.
#
#   STEPS=50000 bash scripts/scan_length_cutoff.sh            # the paper's budget
#   STEPS=300 EVAL_EVERY=100 MAX_EVAL=0 bash scripts/scan_length_cutoff.sh
#   PARALLEL=1 STEPS=2000 bash scripts/scan_length_cutoff.sh  # both at once
#
# Writes $OUT/{rel_uni,abs_uni}.json (+ _accuracy.png), checkpoints under
# $OUT/{rel_uni,abs_uni}/ (re-running resumes them), and the summary $SUMMARY
# with the IID and generalisation exact-match accuracies of both models.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${STEPS:-50000}
EVAL_EVERY=${EVAL_EVERY:-1000}
MAX_EVAL=${MAX_EVAL:-0}          # 0: the full IID (1,828) and test (2,624) sets
SEED=${SEED:-0}
OUT=${OUT:-results/scan_cutoff26}
SUMMARY=${SUMMARY:-results/scan_cutoff26.json}
COMMON="--dataset=scan --split=length_cutoff --cutoff=26 --model=transformer --universal \
  --layers=3 --d_model=128 --heads=8 --ff=256 --dropout=0.1 --lr=1e-3 --schedule=constant \
  --batch=256 --clip=5 --steps=$STEPS --eval_every=$EVAL_EVERY --max_eval_examples=$MAX_EVAL \
  --seed=$SEED --select_on=last --noprogress"
mkdir -p "$OUT"
start=$(date +%s)
run_rel() {
  python3 -m experiments.seq2seq_train $COMMON --positions=relative \
    --workdir="$OUT/rel_uni" --results_path="$OUT/rel_uni.json"
}
run_abs() {
  python3 -m experiments.seq2seq_train $COMMON --positions=absolute --scaling=ped \
    --workdir="$OUT/abs_uni" --results_path="$OUT/abs_uni.json"
}
if [[ "${PARALLEL:-0}" == 1 ]]; then  # Two processes sharing the machine.
  run_rel & rel=$!
  run_abs & abs=$!
  wait $rel; wait $abs
else
  run_rel
  run_abs
fi
python3 - "$OUT" "$SUMMARY" "$STEPS" "$MAX_EVAL" "$(( $(date +%s) - start ))" <<'PY'
import json, os, platform, sys
out, summary, steps, max_eval, wall = sys.argv[1:]
rows = {}
for name in ("rel_uni", "abs_uni"):
  r = json.load(open(f"{out}/{name}.json"))
  acc = r["final"]["accuracies"]
  model = r["config"]["transformer"]
  rows[name] = {"positions": model["positions"], "scaling": model["scaling"],
                "steps": r["steps"], "gen_accuracy": acc["gen"], "iid_accuracy": acc["iid"],
                "eval_sizes": r["data"]["eval_sizes"], "num_params": r["num_params"],
                "wall_time_s": round(r["wall_time_s"], 1),
                "final_train_loss": r["history"][-1]["loss"],
                "final_train_token_accuracy": r["history"][-1]["token_accuracy"],
                "history": [{k: h[k] for k in ("step", "loss", "token_accuracy", "iid", "gen")}
                            for h in r["history"]]}
  print(f"{name}: step {r['steps']}  generalisation (test, length > 26) {acc['gen']:.4f}  "
        f"IID {acc['iid']:.4f}  train loss {r['history'][-1]['loss']:.3f}  "
        f"token acc {r['history'][-1]['token_accuracy']:.3f}  ({r['wall_time_s']:.0f}s)")
result = {"task": "SCAN length_cutoff=26 (train <= 26 actions, test > 26)",
          "setting": "Csordas et al. 2021 SCAN settings (d128, 8 heads, 3+3 universal layers, "
                     "ff 256, dropout 0.1, Adam 1e-3, batch 256, clip 5); last-step accuracies",
          "steps_budget": int(steps), "max_eval_examples": int(max_eval),
          "machine": f"{platform.machine()} {os.cpu_count()} CPUs",
          "runs_wall_time_s": round(sum(r["wall_time_s"] for r in rows.values()), 1),
          "this_invocation_wall_time_s": int(wall),
          "models": rows}
os.makedirs(os.path.dirname(os.path.abspath(summary)), exist_ok=True)
json.dump(result, open(summary, "w"), indent=1)
print(f"summary: {summary}")
PY
