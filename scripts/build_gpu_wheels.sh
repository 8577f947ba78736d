#!/usr/bin/env bash
# Builds .whl/, the folder carried to the lent GPU machine for
# scripts/gpu_check.sh: wheels of what setup.py needs and that machine's image
# lacks (dm-clrs, dm-haiku and its jmp, ml-collections; everything else it
# has, and dm-clrs's TensorFlow imports are stood in for by
# processors/tf_free.py), pinned to the versions installed here, for CPython
# 3.12 (all pure Python, under 1 MB). The project itself runs from the
# working tree, so it has no wheel. With FLOYD_REF (a checkout of
# github.com/ocx-lab/FloydNet, or its bare git directory) their src/floydnet/
# is copied to .whl/FloydNet/ with its commit, for the pivotal_torch part.
# /.whl/ is git-ignored: nothing here is ever committed.
#   bash scripts/build_gpu_wheels.sh
#   FLOYD_REF=/tmp/peers/floyd bash scripts/build_gpu_wheels.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGES=(dm-clrs dm-haiku jmp ml-collections)
mkdir -p .whl
rm -f .whl/*.whl  # one version of each: two stop the install there
for name in "${PACKAGES[@]}"; do
  version=$(python3 -m pip show "$name" 2>/dev/null | sed -n 's/^Version: //p')
  if [ -z "$version" ]; then
    echo "$name is not installed here: run python3 -m pip install -e '.[test]' first." >&2
    exit 2
  fi
  python3 -m pip download -q --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d .whl "$name==$version"
done
if [ -n "${FLOYD_REF:-}" ]; then
  rm -rf .whl/FloydNet
  mkdir -p .whl/FloydNet/src
  if [ -f "$FLOYD_REF/src/floydnet/functional.py" ]; then  # a work tree
    cp -r "$FLOYD_REF/src/floydnet" .whl/FloydNet/src/
    commit=$(git -C "$FLOYD_REF" rev-parse HEAD 2>/dev/null || echo "${FLOYD_COMMIT:-unknown}")
  else  # a git directory without a work tree
    git --git-dir="$FLOYD_REF" archive HEAD src/floydnet | tar -x -C .whl/FloydNet
    commit=$(git --git-dir="$FLOYD_REF" rev-parse HEAD)
  fi
  echo "$commit" >.whl/FloydNet/COMMIT
fi
ls -l .whl
du -sh .whl
