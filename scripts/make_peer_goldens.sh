#!/usr/bin/env bash
# Regenerates tests/fidelity/goldens/ from the RT, ET, Csordas et al.'s, FloydNet's and Graph2Graph's own code and
# records ours-vs-theirs max abs differences in tests/fidelity/goldens/README.json.
# Needs checkouts of the five repositories and a CPU torch with what their
# code imports (ET: pytorch_lightning, transformers; Csordas et al.'s
# framework package: requests, tensorboard); CI only reads the goldens.
#   RT_REF=/tmp/peers/rt ET_REF=/tmp/peers/et CS_REF=/tmp/cs FLOYD_REF=/tmp/peers/floyd G2G_REF=/tmp/peers/g2g \
#   TORCH_PYTHON=/tmp/torchvenv/bin/python \
#     bash scripts/make_peer_goldens.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PEERS=${PEERS:-/tmp/peers}
RT_REF=${RT_REF:-$PEERS/rt}
ET_REF=${ET_REF:-$PEERS/et}
CS_REF=${CS_REF:-$PEERS/cs}
FLOYD_REF=${FLOYD_REF:-$PEERS/floyd}
# alirezamshi-zz/G2GTr at 75045a625730100805d707b5d44f793661594a4c (the goldens' commit).
G2G_REF=${G2G_REF:-$PEERS/g2g}
TORCH_PYTHON=${TORCH_PYTHON:-/tmp/torchvenv/bin/python}
PYTHON=${PYTHON:-python3}

for ref in "$RT_REF:CameronDiao/relational-transformer" "$ET_REF:bergen/EdgeTransformer" "$CS_REF:RobertCsordas/transformer_generalization" "$FLOYD_REF:ocx-lab/FloydNet" "$G2G_REF:alirezamshi-zz/G2GTr"; do
  if [ ! -d "${ref%%:*}" ]; then
    echo "Reference checkout ${ref%%:*} is missing: check out github.com/${ref#*:} there (a snapshot, never vendored into this repo)." >&2
    exit 2
  fi
done
if [ ! -x "$TORCH_PYTHON" ]; then
  "$PYTHON" -m venv "$(dirname "$(dirname "$TORCH_PYTHON")")"
  "$TORCH_PYTHON" -m pip install torch==2.13.0 numpy pytorch_lightning transformers requests tensorboard
fi
# Pass RT_COMMIT / ET_COMMIT / CS_COMMIT / FLOYD_COMMIT / G2G_COMMIT when the checkouts are not git work trees.
JAX_PLATFORMS=cpu "$PYTHON" scripts/make_peer_goldens.py --rt_reference="$RT_REF" ${RT_COMMIT:+--commit=$RT_COMMIT}
# Their whole CLRS model needs their package's Python (see experiments/compare/clrs_rt.py).
RT_PYTHON=${RT_PYTHON:-/tmp/rtvenv/bin/python}
JAX_PLATFORMS=cpu "$RT_PYTHON" scripts/make_peer_goldens.py --rt_net_reference="$RT_REF" ${RT_COMMIT:+--commit=$RT_COMMIT}
# ET: their Edge Transformer (cogs/, clutrr/model.py) and CLUTRR RAT baseline (clutrr/rat.py).
"$TORCH_PYTHON" scripts/make_peer_goldens.py --et_reference="$ET_REF" ${ET_COMMIT:+--commit=$ET_COMMIT}
"$TORCH_PYTHON" scripts/make_peer_goldens.py --cs_reference="$CS_REF" ${CS_COMMIT:+--commit=$CS_COMMIT}
"$TORCH_PYTHON" scripts/make_peer_goldens.py --floyd_reference="$FLOYD_REF" ${FLOYD_COMMIT:+--commit=$FLOYD_COMMIT}
"$TORCH_PYTHON" scripts/make_peer_goldens.py --g2g_reference="$G2G_REF" ${G2G_COMMIT:+--commit=$G2G_COMMIT}
JAX_PLATFORMS=cpu "$PYTHON" scripts/make_peer_goldens.py --record
