#!/usr/bin/env bash
# CLUTRR on CPU (Bergen et al. 2021, sec. 4.1 / Figure 3 protocol at a small
# budget): ET, RAT and RT trained on the 2,020 official k = 2, 3 rows
# (validation.csv; 80% train / 20% validation), tested per k = 2..10 on the
# official test file (1,146 rows) and on a generated test set.
# The runs are the `cpu` budget of the named reproductions clutrr_*_k23
# (experiments/reproductions.py); rerunning resumes / reuses finished runs.
# Results: results/clutrr/<name>.json, results/clutrr/figure3_cpu.png.
set -euo pipefail
cd "$(dirname "$0")/.."
export JAX_PLATFORMS=${JAX_PLATFORMS:-cpu}
NAMES=${NAMES:-"clutrr_et_k23 clutrr_rat_k23 clutrr_rt_k23"}
for name in $NAMES; do
  python3 -m experiments.reproduce "$name" --budget=cpu \
      --workdir="runs/clutrr_cpu/$name"
  mkdir -p results/clutrr
  cp "runs/clutrr_cpu/$name/results.json" "results/clutrr/$name.json"
done
python3 - <<'PY'
import json, os
from experiments import reproductions
from relational_jax.training import clutrr
series, published = [], {}
for name in ("clutrr_et_k23", "clutrr_rat_k23", "clutrr_rt_k23",
             "clutrr_et_value_ablation_k23", "clutrr_et_attention_ablation_k23",
             "clutrr_et_untied_k23"):
  path = f"results/clutrr/{name}.json"
  if os.path.exists(path):
    with open(path) as f:
      series.append((f"{name} (ours, cpu)", json.load(f)["evaluations"]["test"]))
et = reproductions.get("clutrr_et_k23").published
published["ET (paper, Table 5)"] = {k: v for k, v in et.items() if v is not None}
clutrr.plot_accuracy_by_k(series, "results/clutrr/figure3_cpu.png",
                          title="CLUTRR official test, trained on k=2,3 (CPU budget)",
                          published=published)
print("wrote results/clutrr/figure3_cpu.png")
PY
