#!/usr/bin/env bash
# For2Lam long programs on one CPU core (Shiv & Quirk 2019, sec. 5.1.1 /
# Figure 5, at a small budget): tree-transformer DFS, tree-transformer BFS
# and the sequence transformer. The runs are the `cpu` budget of the named
# reproductions for2lam_long_* (experiments/reproductions/seq2seq.py);
# rerunning resumes / reuses finished runs. Results (flat files):
# results/reproductions/<name>_cpu__{results,reproduction}.json.
set -euo pipefail
cd "$(dirname "$0")/.."
export JAX_PLATFORMS=${JAX_PLATFORMS:-cpu}
CORE=${CORE:-0}
NAMES=${NAMES:-"for2lam_long_tree_dfs for2lam_long_tree_bfs for2lam_long_seq"}
for name in $NAMES; do
  workdir="runs/for2lam_cpu/$name"
  taskset -c "$CORE" python3 -m experiments.reproduce "$name" --budget=cpu \
      --workdir="$workdir"
  cp "$workdir/results.json" "results/reproductions/${name}_cpu__results.json"
  cp "$workdir/reproduction.json" \
      "results/reproductions/${name}_cpu__reproduction.json"
done
