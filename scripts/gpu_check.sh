#!/usr/bin/env bash
# The prepared GPU check (experiments/bench/gpu_check.py) on the lent machine,
# with .whl/ carried (made here by scripts/build_gpu_wheels.sh): installs those
# wheels into /tmp/site, leaving the machine's own jax, flax, torch and the
# rest as they are, then runs every part; one JSON, gpu_check.json, in $OUT
# (default results/gpu), a table last, exit status 1 on any mismatch or error.
# .whl/FloydNet, when there, is FloydNet's code for the pivotal_torch part.
#   bash scripts/gpu_check.sh                      # 463 s on an H200 (results/gpu)
#   bash scripts/gpu_check.sh --parts=tests,precision   # flags go to gpu_check
set -euo pipefail
cd "$(dirname "$0")/.."
if ! ls .whl/*.whl >/dev/null 2>&1; then
  echo "No wheels in .whl/: run bash scripts/build_gpu_wheels.sh and carry .whl." >&2
  exit 2
fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
FLOYD_CHECKOUT=${FLOYD_CHECKOUT:-}
if [ -z "$FLOYD_CHECKOUT" ] && [ -f .whl/FloydNet/src/floydnet/functional.py ]; then
  FLOYD_CHECKOUT=.whl/FloydNet
fi
python3 -m experiments.bench.gpu_check --out="${OUT:-results/gpu}" \
  ${FLOYD_CHECKOUT:+--floyd_checkout="$FLOYD_CHECKOUT"} "$@"
