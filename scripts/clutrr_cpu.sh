#!/usr/bin/env bash
# CLUTRR (Bergen et al. 2021, sec. 4.1 / Figure 3 protocol): the named
# reproductions NAMES, each through experiments.reproduce, which resumes /
# reuses finished runs, keeps results/clutrr/<name>[_paper][__seed<S>].json
# and redraws results/clutrr/figure3_[k234_]<budget>.png (and .json: each
# model's mean over its seeds per k).
#   SETTING=k23 (default) | k234: NAMES defaults to ET, RAT and RT of it
#     (k23: trained on the 2,020 official k = 2, 3 rows at the cpu budget;
#     k234: on 2,100 generated k = 2, 3, 4 rows); NAMES=clutrr_floyd_k23
#     runs FloydNet.
#   BUDGET=cpu (default) | paper; RUNS: the work directories' parent
#     (default runs/clutrr_$BUDGET; a run is $RUNS/<name>).
#   SEEDS=42,43,44: reproduce's --seeds (42 is the configs' own training
#     seed, in $RUNS/<name>; seed S in $RUNS/<name>__seed<S>); SEEDS=43,44
#     runs only those two.
set -euo pipefail
cd "$(dirname "$0")/.."
export JAX_PLATFORMS=${JAX_PLATFORMS:-cpu}
if [[ -n "${BASE:-}" ]]; then
  echo "BASE=$BASE: BASE is gone; list the seeds to run in SEEDS (e.g." \
    "SEEDS=43,44, or SEEDS=42,43,44 with the configs' own seed 42)" >&2
  exit 2
fi
SETTING=${SETTING:-k23}
BUDGET=${BUDGET:-cpu}
RUNS=${RUNS:-runs/clutrr_$BUDGET}
NAMES=${NAMES:-"clutrr_et_$SETTING clutrr_rat_$SETTING clutrr_rt_$SETTING"}
for name in $NAMES; do
  python3 -m experiments.reproduce "$name" --budget="$BUDGET" \
      --workdir="$RUNS/$name" ${SEEDS:+"--seeds=$SEEDS"}
done
