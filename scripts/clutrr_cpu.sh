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
# Results: results/clutrr/<name>.json, results/clutrr/figure3_[k234_]cpu.png
# (and .json: each model's mean over its seeds per k).
# BUDGET=paper: the paper budget instead (hours per run on this CPU; work
# directories under $RUNS, default runs/clutrr_paper), results
# results/clutrr/<name>_paper.json and figure3_[k234_]paper.png.
# SEEDS="43 44": each name also at those training seeds (work directories
# $RUNS/<name>__seed<S>, results results/clutrr/<name>[_paper]__seed<S>.json;
# the figure draws each model's mean over the seeds it has results for).
# BASE=0: only the SEEDS runs, not the config's own seed (its record kept as
# it is, e.g. when its work directory is gone and rerunning would retrain it).
set -euo pipefail
cd "$(dirname "$0")/.."
export JAX_PLATFORMS=${JAX_PLATFORMS:-cpu}
SETTING=${SETTING:-k23}
case "$SETTING" in
  k23|k234) ;;
  *) echo "SETTING=$SETTING: valid settings are k23, k234" >&2; exit 2 ;;
esac
BUDGET=${BUDGET:-cpu}
case "$BUDGET" in
  cpu) SUFFIX="" ;;
  paper) SUFFIX="_paper" ;;
  *) echo "BUDGET=$BUDGET: valid budgets are cpu, paper" >&2; exit 2 ;;
esac
RUNS=${RUNS:-runs/clutrr_$BUDGET}
NAMES=${NAMES:-"clutrr_et_$SETTING clutrr_rat_$SETTING clutrr_rt_$SETTING"}
BASE=${BASE:-1}
case "$BASE" in
  1) TAGS=("") ;;  # The config's own training seed: no tag.
  0) TAGS=()
     [[ -n "${SEEDS:-}" ]] || {
       echo "BASE=0 with no SEEDS: nothing to run" >&2; exit 2; } ;;
  *) echo "BASE=$BASE: valid values are 1 (run the config's own seed), 0" >&2
     exit 2 ;;
esac
for seed in ${SEEDS:-}; do
  [[ "$seed" =~ ^[0-9]+$ ]] || {
    echo "SEEDS=$SEEDS: '$seed' is not a non-negative integer" >&2; exit 2; }
  TAGS+=("__seed$seed")
done
mkdir -p results/clutrr
for name in $NAMES; do
  for tag in ${TAGS[@]+"${TAGS[@]}"}; do
    sets=()
    [[ -z "$tag" ]] || sets=("--set=train.seed=${tag#__seed}")
    python3 -m experiments.reproduce "$name" --budget="$BUDGET" \
        ${sets[@]+"${sets[@]}"} --workdir="$RUNS/$name$tag"
    cp "$RUNS/$name$tag/results.json" "results/clutrr/$name$SUFFIX$tag.json"
  done
done
python3 -c 'import sys; from experiments.reproductions import clutrr
print("wrote", clutrr.figure3(*sys.argv[1:]))' "$SETTING" "$BUDGET"
