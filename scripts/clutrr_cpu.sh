#!/usr/bin/env bash
# CLUTRR on CPU (Bergen et al. 2021, sec. 4.1 / Figure 3 protocol at a small
# budget): ET, RAT and RT, tested per k = 2..10 on the official test file
# (1,146 rows) and on a generated test set.
#   SETTING=k23 (default): trained on the 2,020 official k = 2, 3 rows
#     (validation.csv; 80% train / 20% validation);
#   SETTING=k234: trained on 2,100 generated k = 2, 3, 4 rows.
# The runs are the `cpu` budget of the named reproductions clutrr_*_$SETTING
# (experiments/reproductions/clutrr.py); rerunning resumes / reuses finished
# runs. NAMES picks others, e.g. NAMES=clutrr_floyd_k23 (FloydNet, k23 only;
# drawn in the figure when its JSON exists).
# Results: results/clutrr/<name>.json, results/clutrr/figure3_[k234_]cpu.png.
set -euo pipefail
cd "$(dirname "$0")/.."
export JAX_PLATFORMS=${JAX_PLATFORMS:-cpu}
SETTING=${SETTING:-k23}
case "$SETTING" in
  k23|k234) ;;
  *) echo "SETTING=$SETTING: valid settings are k23, k234" >&2; exit 2 ;;
esac
NAMES=${NAMES:-"clutrr_et_$SETTING clutrr_rat_$SETTING clutrr_rt_$SETTING"}
for name in $NAMES; do
  python3 -m experiments.reproduce "$name" --budget=cpu \
      --workdir="runs/clutrr_cpu/$name"
  mkdir -p results/clutrr
  cp "runs/clutrr_cpu/$name/results.json" "results/clutrr/$name.json"
done
SETTING="$SETTING" python3 - <<'PY'
import json, os
from experiments import reproductions
from relational_jax.training import clutrr
setting = os.environ["SETTING"]
series, published = [], {}
for model in ("et", "rat", "rt", "floyd", "et_value_ablation",
              "et_attention_ablation", "et_untied"):
  name = f"clutrr_{model}_{setting}"
  path = f"results/clutrr/{name}.json"
  if os.path.exists(path):
    with open(path) as f:
      series.append((f"{name} (ours, cpu)", json.load(f)["evaluations"]["test"]))
et = reproductions.get(f"clutrr_et_{setting}").published
published["ET (paper, Table 5)"] = {k: v for k, v in et.items() if v is not None}
trained = {"k23": "k=2,3", "k234": "generated k=2,3,4"}[setting]
out = ("results/clutrr/figure3_cpu.png" if setting == "k23"
       else f"results/clutrr/figure3_{setting}_cpu.png")
clutrr.plot_accuracy_by_k(series, out,
                          title=f"CLUTRR official test (trained on {trained}, "
                                "CPU)",
                          published=published)
print(f"wrote {out}")
PY
