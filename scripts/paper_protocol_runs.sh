#!/usr/bin/env bash
# The long runs at the papers' own protocols, one after another, each through
# experiments.reproduce, which resumes a stopped run exactly from its
# checkpoints (and, for a finished one, only rewrites its results). Run the
# same command again in each sitting until all are done:
#   (setsid nohup bash scripts/paper_protocol_runs.sh >> runs/paper.log 2>&1 &)
# Arguments name the runs to do, in order (default: all four): rt_bf,
# scan26_relative, scan26_absolute, floyd_bf. Naming them lets a sitting whose
# work directories were lost skip a run whose results are already committed.
#
# 1. rt_clrs_core8 at budget paper (the RT paper's CLRS protocol, appendix D:
#    80,000 steps of batch 4 at n = 16, validation every 80 steps, the best
#    validation checkpoint tested at n = 64) on bellman_ford, seed 0;
# 2. scan_cutoff26_relative_universal, then _absolute_universal, at budget
#    paper (Csordas et al. 2021 Table 3: 50,000 steps of batch 256);
# 3. floyd_clrs_core8 on bellman_ford at the protocol of 1.
#   RUNS: the work directories' parent (default runs/paper); each run logs
#     to $RUNS/<run>.log. NICE: its niceness (default 10).
set -euo pipefail
cd "$(dirname "$0")/.."
export JAX_PLATFORMS=${JAX_PLATFORMS:-cpu}
RUNS=${RUNS:-runs/paper}
NICE=${NICE:-10}
mkdir -p "$RUNS"

run() {  # run <work dir name> <reproduce arguments...>
  local name=$1
  shift
  echo "$(date -u +%FT%TZ) $name: python3 -m experiments.reproduce $*"
  nice -n "$NICE" python3 -m experiments.reproduce "$@" \
      --workdir="$RUNS/$name" >> "$RUNS/$name.log" 2>&1
}

clrs_bellman_ford() {  # clrs_bellman_ford <processor>
  run "$1_bf_protocol" "$1_clrs_core8" --budget=paper \
      --set='algorithms=("bellman_ford",)' --set='seeds=(0,)' \
      --set="results_path=results/reproductions/$1_clrs_core8_paper__bellman_ford_seed0.json"
}

RUNS_ALL=(rt_bf scan26_relative scan26_absolute floyd_bf)
for name in "${@:-${RUNS_ALL[@]}}"; do
  case " ${RUNS_ALL[*]} " in
    *" $name "*) ;;
    *) echo "unknown run '$name'; valid: ${RUNS_ALL[*]}" >&2; exit 2 ;;
  esac
done
for name in "${@:-${RUNS_ALL[@]}}"; do
  case $name in
    rt_bf) clrs_bellman_ford rt ;;
    floyd_bf) clrs_bellman_ford floyd ;;
    scan26_*)
      positions=${name#scan26_}
      run "scan26_${positions}_paper" "scan_cutoff26_${positions}_universal" \
          --budget=paper ;;
  esac
done
