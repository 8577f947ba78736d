"""Tests for the Pallas kernels of pivotal attention: impl='pallas' (the
forward kernel, the chunked backward) and impl='pallas_fused' (the backward
kernels as well).

FloydNet (Yu, Zeng & Ye 2026, arXiv 2601.19094):
  s_ijl = (q_ij . k_il + q_ij . k_lj) * scale,
  y_ij  = sum_l softmax_l(s)_ijl (v_il + v_lj).
The kernels run in interpret mode on CPU and must equal the chunked XLA path
and the materialising reference (values and gradients).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relational_jax.layers import online_softmax
from relational_jax.layers import pivotal
from relational_jax.layers.pivotal import PivotalAttention
from relational_jax.models.floyd import FloydConfig
from relational_jax.models.floyd import FloydTransformer

H = 2
RTOL = 1e-5
PALLAS = ("pallas", "pallas_fused")


def _inputs(seed, b, ni, nj, nl, k, h=H):
  """q_BxHxIxJxK, k_BxHxIxLxK, k_BxHxLxJxK, v_BxHxIxLxK, v_BxHxLxJxK and a
  cotangent dy_BxHxIxJxK."""
  shapes_of = (
      (b, h, ni, nj, k),
      (b, h, ni, nl, k),
      (b, h, nl, nj, k),
      (b, h, ni, nl, k),
      (b, h, nl, nj, k),
      (b, h, ni, nj, k),
  )
  keys = jax.random.split(jax.random.PRNGKey(seed), len(shapes_of))
  arrays = [jax.random.normal(key, s) for key, s in zip(keys, shapes_of)]
  return arrays[:5], arrays[5]


def _assert_rel_close(got, want, what):
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  assert np.all(np.isfinite(got)), what
  err = np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30)
  assert err < RTOL, f"{what}: relative error {err:.3g}"


def _value_and_grads(impl, args, dy_BxHxIxJxK, node_mask_BxL, **kwargs):
  """y and the gradients of sum(y * dy) with respect to all five inputs."""

  def loss(*operands):
    y = pivotal.pivotal_attention_core(
        *operands, node_mask_BxL, impl=impl, **kwargs
    )
    return jnp.sum(y * dy_BxHxIxJxK), y

  (_, y), grads = jax.value_and_grad(
      loss, argnums=(0, 1, 2, 3, 4), has_aux=True
  )(*args)
  return y, grads


def _node_mask(b, n, real_counts):
  return jnp.arange(n)[None, :] < jnp.asarray(real_counts)[:, None]


# (name, B, N, K, real nodes per batch element or None, softmax cap, block).
CASES = (
    ("plain", 1, 4, 4, None, -1.0, 2),
    ("padding_not_multiple_of_block", 2, 7, 4, (7, 4), -1.0, 4),
    ("cap_and_odd_head_width", 1, 6, 3, (5,), 1.5, 4),
    ("one_block_larger_than_n", 2, 5, 8, (3, 5), 2.0, 16),
)
_SLOW_FORWARD_CASES = ("cap_and_odd_head_width", "one_block_larger_than_n")


@pytest.mark.parametrize(
    "impl,name,b,n,k,real,cap,block",
    [
        pytest.param(
            impl,
            *case,
            id=f"{case[0]}-{impl}",
            # 'pallas' is the forward kernel of 'pallas_fused': two of its
            # cases in the fast tier.
            marks=pytest.mark.slow
            if impl == "pallas" and case[0] in _SLOW_FORWARD_CASES
            else (),
        )
        for case in CASES
        for impl in PALLAS
    ],
)
def test_values_and_grads_match_chunked(impl, name, b, n, k, real, cap, block):
  args, dy = _inputs(sum(map(ord, name)), b, n, n, n, k)
  node = None if real is None else _node_mask(b, n, real)
  options = dict(softmax_cap=cap, chunk_size=3)
  y_c, g_c = _value_and_grads("chunked", args, dy, node, **options)
  y_p, g_p = _value_and_grads(
      impl, args, dy, node, block_size=block, interpret=True, **options
  )
  _assert_rel_close(y_p, y_c, "y")
  for arg_name, got, want in zip(
      ("q", "k_il", "k_lj", "v_il", "v_lj"), g_p, g_c
  ):
    _assert_rel_close(got, want, f"d{arg_name}")


def test_fused_matches_the_materialising_reference_with_padding():
  """Values and gradients against the equation itself: all B H N^3 scores,
  plain JAX autodiff (`pivotal_attention_reference`)."""
  args, dy = _inputs(1, 2, 6, 6, 6, 4)
  node = _node_mask(2, 6, (6, 3))

  def reference(*operands):
    y = pivotal.pivotal_attention_reference(*operands, node, softmax_cap=3.0)
    return jnp.sum(y * dy), y

  (_, want), g_want = jax.value_and_grad(
      reference, argnums=(0, 1, 2, 3, 4), has_aux=True
  )(*args)
  got, g_got = _value_and_grads(
      "pallas_fused",
      args,
      dy,
      node,
      softmax_cap=3.0,
      block_size=4,
      interpret=True,
  )
  _assert_rel_close(got, want, "y")
  for got_grad, want_grad in zip(g_got, g_want):
    _assert_rel_close(got_grad, want_grad, "grad")


@pytest.mark.parametrize("impl", PALLAS)
def test_every_pivot_masked_matches_chunked(impl):
  """A batch element with every node padded: uniform weights over all
  pivots, as the chunked path (and the authors' 1e9 fill)."""
  args, dy = _inputs(2, 2, 5, 5, 5, 4)
  node = _node_mask(2, 5, (5, 0))
  y_c, g_c = _value_and_grads("chunked", args, dy, node, chunk_size=2)
  y_p, g_p = _value_and_grads(
      impl, args, dy, node, chunk_size=2, block_size=2, interpret=True
  )
  _assert_rel_close(y_p, y_c, "y")
  uniform = (
      jnp.mean(args[3][1], axis=2)[:, :, None, :]
      + jnp.mean(args[4][1], axis=1)[:, None, :, :]
  )
  np.testing.assert_allclose(y_p[1], uniform, rtol=1e-5, atol=1e-6)
  for got, want in zip(g_p, g_c):
    _assert_rel_close(got, want, "grad")


@pytest.mark.parametrize("impl", PALLAS)
def test_rectangular_matches_chunked(impl):
  """I, J and L of different sizes (the core's general shapes)."""
  args, dy = _inputs(3, 1, 3, 5, 6, 4)
  node = jnp.array([[True, True, False, True, True, False]])
  y_c, g_c = _value_and_grads("chunked", args, dy, node, chunk_size=4)
  y_p, g_p = _value_and_grads(
      impl, args, dy, node, chunk_size=4, block_size=2, interpret=True
  )
  _assert_rel_close(y_p, y_c, "y")
  for got, want in zip(g_p, g_c):
    _assert_rel_close(got, want, "grad")


def test_boolean_mask_of_whole_pivots_equals_node_mask():
  args, _ = _inputs(4, 2, 5, 5, 5, 4)
  node = _node_mask(2, 5, (4, 2))
  attn_mask = ~node[:, None, None, None, :]
  want = pivotal.pivotal_attention_core(*args, attn_mask=attn_mask)
  got = pivotal.pivotal_attention_core(
      *args, attn_mask=attn_mask, impl="pallas", interpret=True
  )
  _assert_rel_close(got, want, "y")


# Fast: test_pivotal.py::test_jit_matches_eager[pallas_fused] (the module).
@pytest.mark.slow
def test_jit_equals_eager():
  """Values and (the fused backward's) gradients."""
  args, dy = _inputs(5, 1, 5, 5, 5, 4)
  node = _node_mask(1, 5, (4,))
  run = lambda *a: _value_and_grads(
      "pallas_fused",
      a,
      dy,
      node,
      block_size=2,
      interpret=True,
      softmax_cap=2.0,
  )
  for got, want in zip(
      jax.tree_util.tree_leaves(jax.jit(run)(*args)),
      jax.tree_util.tree_leaves(run(*args)),
  ):
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_functional_form_and_default_interpret():
  args, _ = _inputs(6, 1, 4, 4, 4, 4)
  want = pivotal.pivotal_attention(*args, softmax_cap=2.0)
  got = pivotal.pivotal_attention(*args, softmax_cap=2.0, impl="pallas")
  _assert_rel_close(got, want, "y")
  assert online_softmax.interpret_mode(None) == (jax.default_backend() == "cpu")


def test_module_matches_chunked():
  b, n, d = 2, 5, 8
  x = jax.random.normal(jax.random.PRNGKey(7), (b, n, n, d))
  node = _node_mask(b, n, (5, 3))
  chunked = PivotalAttention(num_heads=H, chunk_size=2, softmax_cap=2.0)
  pallas = chunked.clone(impl="pallas", pallas_block_size=4, interpret=True)
  params = chunked.init(jax.random.PRNGKey(8), x, node)
  # A non-zero output map, so the attention reaches the output.
  params = jax.tree_util.tree_map(
      lambda p: p + 0.1 * jax.random.normal(jax.random.PRNGKey(9), p.shape),
      params,
  )
  _assert_rel_close(
      pallas.apply(params, x, node), chunked.apply(params, x, node), "a"
  )


@pytest.mark.slow
@pytest.mark.parametrize("impl", PALLAS)
def test_floyd_transformer_impl_pallas_matches_chunked(impl):
  config = FloydConfig(num_layers=1, num_heads=H, head_dim=4, chunk_size=2)
  b, n = 1, 5
  x = jax.random.normal(jax.random.PRNGKey(10), (b, n, n, config.edge_width))
  node = _node_mask(b, n, (4,))
  chunked = FloydTransformer(config)
  params = chunked.init(jax.random.PRNGKey(11), x, node)
  params = jax.tree_util.tree_map(
      lambda p: p + 0.1 * jax.random.normal(jax.random.PRNGKey(12), p.shape),
      params,
  )
  pallas = FloydTransformer(
      FloydConfig(
          num_layers=1, num_heads=H, head_dim=4, chunk_size=2, impl=impl
      )
  )
  loss = lambda model: jax.value_and_grad(
      lambda p: jnp.sum(jnp.sin(model.apply(p, x, node)))
  )(params)
  (v_p, g_p), (v_c, g_c) = loss(pallas), loss(chunked)
  _assert_rel_close(v_p, v_c, "loss")
  for got, want in zip(
      jax.tree_util.tree_leaves(g_p), jax.tree_util.tree_leaves(g_c)
  ):
    _assert_rel_close(got, want, "param grad")


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(impl="triton"), r"impl 'triton'.*'chunked', 'pallas'"),
        (dict(impl="pallas", block_size=3), "block_size"),
        (dict(impl="pallas", block_size=0), "block_size"),
        (
            dict(
                impl="pallas",
                dropout_rate=0.1,
                dropout_rng=jax.random.PRNGKey(0),
            ),
            r"dropout_rate.*impl='pallas'",
        ),
        (
            dict(
                impl="pallas_fused",
                dropout_rate=0.1,
                dropout_rng=jax.random.PRNGKey(0),
            ),
            r"dropout_rate.*impl='pallas_fused'",
        ),
        (
            dict(impl="pallas", attn_mask=jnp.zeros((1, 1, 4, 4, 4))),
            r"additive attn_mask.*impl='chunked'",
        ),
        (
            dict(impl="pallas", attn_mask=jnp.zeros((1, 1, 4, 1, 4), bool)),
            r"boolean attn_mask.*whole pivots",
        ),
    ],
)
def test_bad_options_raise(kwargs, match):
  args, _ = _inputs(0, 1, 4, 4, 4, 4)
  with pytest.raises(ValueError, match=match):
    pivotal.pivotal_attention_core(*args, interpret=True, **kwargs)


def test_module_dropout_in_training_raises():
  x = jnp.ones((1, 3, 3, 4))
  module = PivotalAttention(
      num_heads=H, attention_dropout_rate=0.1, impl="pallas", interpret=True
  )
  params = module.init(jax.random.PRNGKey(0), x)
  with pytest.raises(ValueError, match=r"attention_dropout_rate.*'pallas'"):
    module.apply(
        params,
        x,
        deterministic=False,
        rngs={"dropout": jax.random.PRNGKey(1)},
    )
  with pytest.raises(ValueError, match=r"impl 'xla'.*valid choices"):
    PivotalAttention(num_heads=H, impl="xla").init(jax.random.PRNGKey(0), x)


def test_floyd_config_checks_impl():
  assert FloydConfig().impl == "chunked"
  with pytest.raises(ValueError, match=r"impl 'cuda'.*'chunked', 'pallas'"):
    FloydConfig(impl="cuda")
