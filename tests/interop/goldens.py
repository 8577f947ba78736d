"""The authors' parameters stored in tests/fidelity/goldens (their names)."""

import json
import pathlib

import jax
import numpy as np

GOLDEN_DIR = (
    pathlib.Path(__file__).resolve().parents[1] / "fidelity" / "goldens"
)


def load(case):
  """Returns (sizes, inputs, params) of one golden; params under their names."""
  with np.load(GOLDEN_DIR / f"{case}.npz") as data:
    meta = json.loads(str(data["meta"]))
    inputs = {
        k.split("/", 1)[1]: data[k]
        for k in data.files
        if k.startswith("input/")
    }
    params = {
        k.split("/", 1)[1]: data[k]
        for k in data.files
        if k.startswith("param/")
    }
  return meta, inputs, params


def shapes(tree):
  return jax.tree_util.tree_map(np.shape, tree)


def assert_same_shapes(converted, initialised):
  """The converted tree has exactly the keys and shapes of our init."""
  assert shapes(converted) == shapes(initialised)


def without(params, *names):
  missing = set(names) - set(params)
  assert not missing, missing
  return {k: v for k, v in params.items() if k not in names}
