"""`ETConfig.init='bergen'`: every parameter of the Edge Transformer models
drawn from the distribution the ET authors' PyTorch code draws it from
(`relational_jax.layers.init.ET_INITS`), checked parameter by parameter
against the rule's bound and standard deviation; 'flax' stays the default."""

import math

import jax
import numpy as np
import pytest

from relational_jax.models import clutrr as clutrr_models
from relational_jax.models.cogs_graph import CogsGraphEdgeTransformer
from relational_jax.models.edge_transformer import ETConfig

D, F = 64, 256


def _uniform(bound):
  return ("uniform", bound)


def _xavier(fan_in, fan_out):
  return _uniform(math.sqrt(6.0 / (fan_in + fan_out)))


def _torch_linear(fan_in):  # PyTorch's Linear weight and bias default.
  return _uniform(1.0 / math.sqrt(fan_in))


def _expected_cogs(path, shape):
  """The authors' rule for one parameter of their COGS parser."""
  name = path[-1]
  if name in ("scale", "bias") and path[-2].startswith("ln_"):
    return ("constant", 1.0 if name == "scale" else 0.0)
  if path[0] == "embed":  # Their word_emb N(0, 1); relative table: Xavier.
    if path[1] == "token":
      return ("normal", 1.0)
    return _xavier(shape[0], shape[1])
  if path[0] == "et":  # Their encoder: Xavier maps, default biases.
    if name == "bias":
      return _torch_linear(F if path[-2] == "ffn_out" else D)
    if path[-2] == "out":  # W^o: H x K x D, Xavier over (H*K, D).
      return _xavier(int(np.prod(shape[:-1])), shape[-1])
    return _xavier(shape[0], int(np.prod(shape[1:])))
  return _torch_linear(D)  # The classifiers and the parent scorer.


def _check(params, expected):
  checked = 0
  for key_path, x in jax.tree_util.tree_flatten_with_path(params)[0]:
    path = tuple(str(k.key) for k in key_path)
    x = np.asarray(x)
    kind, value = expected(path, x.shape)
    if kind == "constant":
      np.testing.assert_array_equal(x, value, err_msg=str(path))
    elif kind == "normal":
      assert abs(x.std() - value) < 0.05 * value, (path, x.std())
      assert abs(x.mean()) < 0.05 * value, path
    else:
      assert np.abs(x).max() <= value, (path, np.abs(x).max(), value)
      if x.size >= 256:  # Enough draws for the sd and the range.
        assert abs(x.std() - value / math.sqrt(3)) < 0.1 * value, path
        assert np.abs(x).max() > 0.9 * value, path
    checked += 1
  return checked


def test_cogs_parser_draws_every_parameter_as_the_authors_code():
  config = ETConfig(
      num_layers=2,
      num_heads=4,
      head_dim=16,
      tied=False,
      layout="released_code",
      init="bergen",
  )
  model = CogsGraphEdgeTransformer(
      config, vocab_size=700, label_sizes=(9, 5, 4, 136)
  )
  params = model.init(
      jax.random.PRNGKey(0), np.ones((1, 3), np.int32), np.ones((1, 3), bool)
  )["params"]
  # 2 embeddings, 2 layers x (5 maps + 2 FFN maps) x 2 + 2 LayerNorms x 2,
  # 5 heads x 2.
  assert _check(params, _expected_cogs) == 2 + 2 * (14 + 4) + 10


def test_clutrr_et_draws_every_parameter_as_the_authors_code():
  config = ETConfig(num_layers=1, num_heads=4, head_dim=16, init="bergen")
  model = clutrr_models.ClutrrEdgeTransformer(config)
  n = 4
  params = model.init(
      jax.random.PRNGKey(1),
      np.zeros((1, n, n), np.int32),
      np.array([[0, 1]], np.int32),
      np.ones((1, n), bool),
  )["params"]

  def expected(path, shape):
    if path[0] == "embed":  # Their edge-label table is the encoder's.
      return _xavier(shape[0], shape[1])
    if path[0] == "head":  # Their get_mlp: PyTorch's Linear defaults.
      return _torch_linear(D)
    return _expected_cogs(path, shape)

  assert _check(params, expected) == 1 + 18 + 4


def test_flax_is_the_default_and_a_bad_scheme_is_refused():
  assert ETConfig().init == "flax"
  with pytest.raises(ValueError, match=r"init 'torch'.*\['bergen', 'flax'\]"):
    ETConfig(init="torch")
