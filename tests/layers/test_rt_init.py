"""RT initialisation schemes: 'diao' (the authors' Haiku default over each
linear map's concatenated input) and 'flax' (LeCun normal per kernel).

The expected fan-ins are written here from the authors' code
(CameronDiao/relational-transformer, clrs/_src/processors.py RT and
base_modules/Basic_Transformer_jax.py): one hk.Linear per map over
[node_fts, hidden, graph_fts] (node_enc), [edge_fts, e_hidden, graph_fts]
(edge_enc), nodes (Wnq, Wnk, Wnv, NL1, NL2), edges (Weq, Wek, Wev, EL3),
[e_ij, e_ji, n_i, n_j] (EL1), and the hidden widths (NL3, EL2, EL4).
"""

import functools
import math

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from processors.relational_transformer import RelationalTransformerProcessor
from relational_jax.layers import init as init_lib
from relational_jax.layers.relational import EdgeUpdate
from relational_jax.models.relational_transformer import RTConfig

# Std of a normal truncated at +-2 standard deviations, in units of the
# untruncated stddev (Haiku's TruncatedNormal keeps the untruncated one).
TRUNCATED_STD = 0.87962566
B, N = 2, 5
Z_NODE, Z_EDGE, Z_GRAPH = 64, 96, 64  # CLRS encoder widths (hidden size)


@functools.lru_cache(maxsize=None)
def _processor_params(init: str):
  cfg = RTConfig(
      num_layers=1,
      num_heads=8,
      head_dim=16,
      node_ffn_dim=96,
      edge_msg_dim=64,
      edge_ffn_dim=80,
      edge_dim=112,
      init=init,
  )

  def fwd(node_fts, edge_fts, graph_fts, adj, hidden):
    return RelationalTransformerProcessor(Z_NODE, cfg, name="rt")(
        node_fts, edge_fts, graph_fts, adj, hidden
    )

  rng = np.random.default_rng(0)
  args = (
      rng.normal(size=(B, N, Z_NODE)),
      rng.normal(size=(B, N, N, Z_EDGE)),
      rng.normal(size=(B, Z_GRAPH)),
      np.ones((B, N, N)),
      rng.normal(size=(B, N, Z_NODE)),
  )
  args = [jnp.asarray(a, jnp.float32) for a in args]
  params = jax.jit(hk.transform(fwd).init)(jax.random.PRNGKey(0), *args)
  return cfg, params


def _kernels(params):
  """{path: kernel} of every weight matrix (Haiku 'w', Flax 'kernel')."""
  out = {}
  for module, leaves in params.items():
    for name, value in leaves.items():
      if name in ("w", "kernel", "value_edge_kernel"):
        out[f"{module}/{name}"] = np.asarray(value)
      elif isinstance(value, dict):  # the lifted Flax stack
        for path, leaf in jax.tree_util.tree_flatten_with_path(value)[0]:
          key = "/".join(str(getattr(p, "key", p)) for p in path)
          if key.endswith("kernel"):
            out[f"{module}/{name}/{key}"] = np.asarray(leaf)
  return out


def _expected_fan_in_diao(path: str, cfg: RTConfig) -> int:
  d, e = cfg.node_width, cfg.edge_width
  table = {
      "/node_in/w": 2 * Z_NODE + Z_GRAPH,
      "/edge_in/w": Z_EDGE + e + Z_GRAPH,
      "/edge_hidden_in/w": Z_EDGE + e + Z_GRAPH,
      "/edge_graph_in/w": Z_EDGE + e + Z_GRAPH,
      "/node_out/w": d,
      "attention/query_node/kernel": d,
      "attention/key_node/kernel": d,
      "attention/value_node/kernel": d,
      "attention/edge_qk/kernel": e,
      "attention/value_edge_kernel": e,
      "node_update/w1/kernel": d,
      "node_update/w2/kernel": d,
      "node_update/w3/kernel": cfg.node_ffn_dim,
      "edge_update/w4_e_ij/kernel": 2 * e + 2 * d,
      "edge_update/w4_e_ji/kernel": 2 * e + 2 * d,
      "edge_update/w4_n_i/kernel": 2 * e + 2 * d,
      "edge_update/w4_n_j/kernel": 2 * e + 2 * d,
      "edge_update/w5/kernel": cfg.edge_msg_dim,
      "edge_update/w6/kernel": e,
      "edge_update/w7/kernel": cfg.edge_ffn_dim,
  }
  matches = [k for k in table if path.endswith(k)]
  assert len(matches) == 1, (path, matches)
  return table[matches[0]]


@pytest.mark.slow
def test_diao_init_draws_every_kernel_with_the_authors_fan_in():
  cfg, params = _processor_params("diao")
  kernels = _kernels(params)
  assert len(kernels) == 20, sorted(kernels)
  for path, w in kernels.items():
    stddev = 1.0 / math.sqrt(_expected_fan_in_diao(path, cfg))
    # Truncated at +-2 stddev, with the truncated normal's std.
    assert np.abs(w).max() <= 2 * stddev + 1e-7, path
    assert np.std(w) == pytest.approx(TRUNCATED_STD * stddev, rel=0.05), path


def test_flax_init_is_lecun_normal_over_each_kernels_own_input():
  _, params = _processor_params("flax")
  for path, w in _kernels(params).items():
    fan_in = w.shape[0]
    if path.endswith("/w"):  # the processor's Haiku linears, per block
      expected = TRUNCATED_STD / math.sqrt(fan_in)
    else:  # lecun_normal: truncation-corrected std 1/sqrt(fan_in)
      expected = 1.0 / math.sqrt(fan_in)
    assert np.std(w) == pytest.approx(expected, rel=0.05), path


def test_schemes_differ_where_the_authors_concatenate():
  """The check above can tell the schemes apart: W_4 blocks and the edge
  input linears are at least 1.5x narrower under 'diao'."""
  diao = _kernels(_processor_params("diao")[1])
  flax = _kernels(_processor_params("flax")[1])
  for suffix in (
      "w4_n_i/kernel",
      "w4_e_ji/kernel",
      "/edge_in/w",
      "/edge_graph_in/w",
  ):
    (path,) = [p for p in diao if p.endswith(suffix)]
    assert np.std(flax[path]) > 1.5 * np.std(diao[path]), path


def test_unknown_init_is_a_clear_error():
  with pytest.raises(ValueError, match=r"'haiku'.*diao.*flax"):
    RTConfig(init="haiku")
  with pytest.raises(ValueError, match=r"'xavier'.*diao"):
    EdgeUpdate(msg_dim=4, ffn_dim=4, init_scheme="xavier").init(
        jax.random.PRNGKey(0), jnp.zeros((1, 3, 3, 8)), jnp.zeros((1, 3, 8))
    )
  with pytest.raises(ValueError, match="fan_in"):
    init_lib.haiku_linear_kernel(0)
