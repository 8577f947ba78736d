#!/usr/bin/env bash
# The long runs at the papers' own protocols, one after another, each through
# experiments.reproduce, which resumes a stopped run exactly from its
# checkpoints (and, for a finished one, only rewrites its results). Run the
# same command again in each sitting until all are done:
#   (setsid nohup bash scripts/paper_protocol_runs.sh >> runs/paper.log 2>&1 &)
# Arguments name the runs to do, in order (default: all): rt_bf,
# scan26_relative, scan26_absolute, floyd_bf, rt_insertion_sort,
# mpnn_insertion_sort, rt_binary_search, mpnn_binary_search, cogs_et. Naming
# them lets a sitting whose work directories were lost skip a run whose
# results are already committed.
#
# 1. rt_clrs_core8 at budget paper (the RT paper's CLRS protocol, appendix D:
#    80,000 steps of batch 4 at n = 16, validation every 80 steps, the best
#    validation checkpoint tested at n = 64) on bellman_ford, seed 42 (run.py's
#    model seed);
# 2. scan_cutoff26_relative_universal, then _absolute_universal, at budget
#    paper (Csordas et al. 2021 Table 3: 50,000 steps of batch 256);
# 3. floyd_clrs_core8 on bellman_ford at the protocol of 1;
# 4. rt_clrs_core8 and mpnn_clrs_core8 on insertion_sort, then on
#    binary_search, at the protocol of 1 (where Table 19 parts RT and MPNN);
# 5. cogs_graph_edge_transformer at budget paper (the authors' settings:
#    48,200 steps of batch 100; the last model tested on gen.tsv).
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

clrs_protocol() {  # clrs_protocol <processor> <algorithm> <work dir name>
  run "$3" "$1_clrs_core8" --budget=paper \
      --set="algorithms=(\"$2\",)" --set='seeds=(42,)' \
      --set="results_path=results/reproductions/$1_clrs_core8_paper__$2_seed42.json"
}

RUNS_ALL=(rt_bf scan26_relative scan26_absolute floyd_bf rt_insertion_sort
  mpnn_insertion_sort rt_binary_search mpnn_binary_search cogs_et)
for name in "${@:-${RUNS_ALL[@]}}"; do
  case " ${RUNS_ALL[*]} " in
    *" $name "*) ;;
    *) echo "unknown run '$name'; valid: ${RUNS_ALL[*]}" >&2; exit 2 ;;
  esac
done
for name in "${@:-${RUNS_ALL[@]}}"; do
  case $name in
    rt_bf | floyd_bf) clrs_protocol "${name%_bf}" bellman_ford "${name}_protocol" ;;
    rt_* | mpnn_*)
      processor=${name%%_*}
      clrs_protocol "$processor" "${name#*_}" "${name}_protocol" ;;
    cogs_et)
      run cogs_et_paper cogs_graph_edge_transformer --budget=paper ;;
    scan26_*)
      positions=${name#scan26_}
      run "scan26_${positions}_paper" "scan_cutoff26_${positions}_universal" \
          --budget=paper ;;
  esac
done
