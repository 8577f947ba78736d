"""The authors' parameters stored in tests/fidelity/goldens (their names)."""

import jax
import numpy as np

from experiments.compare import goldens as peer_goldens


def load(case):
  """Returns (sizes, inputs, params) of one golden; params under their names."""
  meta, inputs, params, _ = peer_goldens.load(case)
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
