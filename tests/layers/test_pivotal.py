"""Tests for pivotal attention (FloydNet, arXiv 2601.19094).

y_ik = sum_j softmax_j(s)_ikj (v_ij + v_jk),
s_ikj = (q_ik . k_ij + q_ik . k_jk) * scale  (the paper's letters).
Goldens of the authors' own code: tests/fidelity (pivotal_*).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relational_jax.layers import pivotal
from relational_jax.layers.pivotal import PivotalAttention
from relational_jax.layers.pivotal import pivotal_attention
from tests.jit_check import assert_jit_equals_eager
from tests.layers.impls import IMPL_PARAMS
from tests.layers.impls import IMPLS

B, H, N, K = 2, 2, 5, 4
NAMES = ("q_ik", "k_ij", "k_jk", "v_ij", "v_jk")


def _inputs(seed=0, b=B, h=H, ni=N, nk=N, nj=N, k=K):
  """q_ik, k_ij, k_jk, v_ij, v_jk in the authors' (B, H, ., ., D) layout."""
  shapes_of = (
      (b, h, ni, nk, k),
      (b, h, ni, nj, k),
      (b, h, nj, nk, k),
      (b, h, ni, nj, k),
      (b, h, nj, nk, k),
  )
  keys = jax.random.split(jax.random.PRNGKey(seed), 5)
  return [jax.random.normal(key, s) for key, s in zip(keys, shapes_of)]


def naive_pivotal(
    q, k_ij, k_jk, v_ij, v_jk, attn_mask=None, scale=None, cap=-1.0, keep=None,
    rate=0.0, inf=1e9,
):  # fmt: skip
  """The equation with Python loops over the pair (i, k) and the pivot j
  (float64 numpy). keep: an optional dropout keep mask (B, H, I, K, J)."""
  q, k_ij, k_jk, v_ij, v_jk = (
      np.asarray(a, np.float64) for a in (q, k_ij, k_jk, v_ij, v_jk)
  )
  b_, h_, ni, nk, d = q.shape
  nj = k_ij.shape[3]
  scale = 1.0 / np.sqrt(2.0 * d) if scale is None else scale
  mask = None
  if attn_mask is not None:
    mask = np.broadcast_to(np.asarray(attn_mask), (b_, h_, ni, nk, nj))
  y = np.zeros((b_, h_, ni, nk, d))
  for b in range(b_):
    for h in range(h_):
      for i in range(ni):
        for k in range(nk):
          s = np.array([
              (q[b, h, i, k] @ k_ij[b, h, i, j] + q[b, h, i, k] @ k_jk[b, h, j, k])
              * scale
              for j in range(nj)
          ])  # fmt: skip
          if cap > 0:
            s = cap * np.tanh(s / cap)
          if mask is not None:
            if mask.dtype == bool:
              s = np.where(mask[b, h, i, k], -inf, s)
            else:
              s = s + mask[b, h, i, k]
          w = np.exp(s - s.max())
          w = w / w.sum()
          if keep is not None:
            w = w * np.asarray(keep)[b, h, i, k] / (1.0 - rate)
          y[b, h, i, k] = sum(
              w[j] * (v_ij[b, h, i, j] + v_jk[b, h, j, k]) for j in range(nj)
          )
  return y


def naive_pivotal_jnp(q, k_ij, k_jk, v_ij, v_jk, attn_mask, cap):
  """The same loops in jnp (vectorised over B and H only), for jax.grad.

  attn_mask is additive, (B, H, I, K, J)."""
  _, _, ni, nk, d = q.shape
  nj = k_ij.shape[3]
  scale = 1.0 / np.sqrt(2.0 * d)
  rows = []
  for i in range(ni):
    row = []
    for k in range(nk):
      s = jnp.stack(
          [
              jnp.sum(q[:, :, i, k] * (k_ij[:, :, i, j] + k_jk[:, :, j, k]), -1)
              * scale
              for j in range(nj)
          ],
          axis=-1,
      )  # BxHxJ
      s = cap * jnp.tanh(s / cap) + attn_mask[:, :, i, k]
      w = jax.nn.softmax(s, axis=-1)
      row.append(
          sum(
              w[:, :, j, None] * (v_ij[:, :, i, j] + v_jk[:, :, j, k])
              for j in range(nj)
          )
      )
    rows.append(jnp.stack(row, axis=2))
  return jnp.stack(rows, axis=2)


def _bool_mask(seed=1, shape=(B, H, N, N, N)):
  mask = np.asarray(jax.random.bernoulli(jax.random.PRNGKey(seed), 0.3, shape))
  mask = mask.copy()
  mask[0, 0, 1, min(2, shape[3] - 1), :] = (
      True  # a pair with every pivot masked
  )
  return mask


def _additive_mask(seed=2, shape=(B, 1, N, 1, N)):
  mask = 0.5 * np.asarray(jax.random.normal(jax.random.PRNGKey(seed), shape))
  mask[np.asarray(jax.random.bernoulli(jax.random.PRNGKey(9), 0.2, shape))] = (
      -1e4
  )
  return mask.astype(np.float32)


# ----------------------------------------------------------------------------
# The functional form against the loops.
# ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"attn_mask": "bool", "softmax_cap": 2.0},
        {"attn_mask": "additive", "scale": 0.3},
        {"attn_mask": "bool_broadcast"},
    ],
    ids=["plain", "bool_cap", "additive_scale", "bool_broadcast"],
)
@pytest.mark.parametrize("chunk_size", [None, 2])
def test_matches_naive_loops(options, chunk_size):
  args = _inputs()
  options = dict(options)
  kind = options.pop("attn_mask", None)
  mask = {
      None: None,
      "bool": _bool_mask(),
      "additive": _additive_mask(),
      "bool_broadcast": _bool_mask(shape=(B, 1, N, 1, N)),
  }[kind]
  got = pivotal_attention(
      *args, attn_mask=mask, chunk_size=chunk_size, **options
  )
  want = naive_pivotal(
      *args,
      attn_mask=mask,
      scale=options.get("scale"),
      cap=options.get("softmax_cap", -1.0),
  )
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


def test_rectangular_matches_naive_loops():
  """As theirs, I, K (the pair) and J (the pivots) may all differ."""
  args = _inputs(ni=3, nk=4, nj=5)
  mask = _bool_mask(shape=(B, H, 3, 4, 5))
  got = pivotal_attention(*args, attn_mask=mask, chunk_size=2)
  np.testing.assert_allclose(
      np.asarray(got),
      naive_pivotal(*args, attn_mask=mask),
      rtol=1e-5,
      atol=1e-5,
  )


def test_every_pivot_masked_gives_uniform_weights():
  """A boolean mask fills -inf with the finite -1e9 (their `inf`): a pair
  whose every pivot is masked averages v_ij + v_jk over all j, as theirs;
  an additive mask of -inf everywhere gives nan, as torch.softmax."""
  args = _inputs()
  mask = np.zeros((B, H, N, N, N), bool)
  mask[0, 1, 2, 3] = True
  y = pivotal_attention(*args, attn_mask=mask, chunk_size=2)
  q, k_ij, k_jk, v_ij, v_jk = (np.asarray(a) for a in args)
  mean = (v_ij[0, 1, 2] + v_jk[0, 1, :, 3]).mean(axis=0)
  np.testing.assert_allclose(np.asarray(y[0, 1, 2, 3]), mean, atol=1e-6)
  additive = np.where(mask, -np.inf, 0.0).astype(np.float32)
  y = pivotal_attention(*args, attn_mask=additive, chunk_size=2)
  assert np.isnan(np.asarray(y[0, 1, 2, 3])).all()
  assert np.isfinite(np.asarray(y[1])).all()


# ----------------------------------------------------------------------------
# Chunking, gradients, the custom VJP.
# ----------------------------------------------------------------------------


def _loss(fn, cotangent):
  return lambda *a: jnp.sum(fn(*a) * cotangent)


def _value_and_grads(attention):
  args = _inputs()
  dy = jax.random.normal(jax.random.PRNGKey(5), args[0].shape)
  mask = _bool_mask()
  fn = _loss(lambda *a: attention(*a, attn_mask=mask, softmax_cap=1.5), dy)
  return jax.jit(jax.value_and_grad(fn, argnums=(0, 1, 2, 3, 4)))(*args)


def _chunked_value_and_grads(chunk_size):
  return _value_and_grads(
      functools.partial(pivotal_attention, chunk_size=chunk_size)
  )


@functools.lru_cache(maxsize=None)
def _reference_value_and_grads():
  """The materialising reference: one softmax over every pivot, plain
  autodiff (no online softmax, no custom backward)."""
  return _value_and_grads(pivotal.pivotal_attention_reference)


# N = 5: uneven last chunks (2, 3), one chunk (5, None) and one larger than N.
@pytest.mark.parametrize("chunk_size", [1, 2, 3, 5, 7, None])
def test_chunked_equals_unchunked_values_and_grads(chunk_size):
  v_ref, g_ref = _reference_value_and_grads()
  v, g = _chunked_value_and_grads(chunk_size)
  np.testing.assert_allclose(float(v), float(v_ref), rtol=1e-5)
  for a, b in zip(g, g_ref):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=2e-6)


@pytest.mark.slow
def test_grads_match_naive_loops():
  """Gradients of every input and of an additive mask, with a cap, against
  jax.grad of the loops (N = 3, chunks of 2)."""
  n = 3
  args = _inputs(ni=n, nk=n, nj=n)
  mask = jnp.asarray(_additive_mask(shape=(B, H, n, n, n)))
  dy = jax.random.normal(jax.random.PRNGKey(5), args[0].shape)
  argnums = (0, 1, 2, 3, 4, 5)
  got = jax.jit(
      jax.grad(
          _loss(
              lambda *a: pivotal_attention(
                  *a[:5], attn_mask=a[5], softmax_cap=1.5, chunk_size=2
              ),
              dy,
          ),
          argnums=argnums,
      )
  )(*args, mask)
  want = jax.jit(
      jax.grad(
          _loss(lambda *a: naive_pivotal_jnp(*a, cap=1.5), dy),
          argnums=argnums,
      )
  )(*args, mask)
  for name, a, b in zip(NAMES + ("attn_mask",), got, want):
    np.testing.assert_allclose(
        np.asarray(a), np.asarray(b), atol=2e-5, err_msg=name
    )


@pytest.mark.parametrize(
    "mask_kind, node", [("bool", False), ("additive", True)]
)
@pytest.mark.slow
def test_custom_vjp_equals_autodiff_of_its_forward(mask_kind, node):
  """The hand-written backward against autodiff through the same chunked
  forward (scan and all), with dropout, a cap and each kind of mask."""
  args = _inputs()
  mask = {None: None, "bool": _bool_mask(), "additive": _additive_mask()}[
      mask_kind
  ]
  node_mask = (
      jnp.array([[True] * N, [True] * 3 + [False] * 2]) if node else None
  )
  static = pivotal._Static(  # pylint: disable=protected-access
      chunk_size=2,
      scale=0.4,
      softmax_cap=1.5,
      mask_value=1e9,
      dropout_rate=0.3,
      mask_kind=mask_kind,
  )
  rng = jax.random.PRNGKey(11)
  mask5 = None if mask is None else jnp.asarray(mask)
  dy = jax.random.normal(jax.random.PRNGKey(5), args[0].shape)
  argnums = (0, 1, 2, 3, 4) + ((5,) if mask_kind == "additive" else ())

  def custom(*a):
    m = a[5] if mask_kind == "additive" else mask5
    return pivotal._pivotal(static, *a[:5], m, node_mask, rng)  # pylint: disable=protected-access

  def plain(*a):
    m = a[5] if mask_kind == "additive" else mask5
    return pivotal._forward(static, *a[:5], m, node_mask, rng)[0]  # pylint: disable=protected-access

  extra = (mask5,) if mask_kind == "additive" else ()
  got = jax.jit(jax.grad(_loss(custom, dy), argnums=argnums))(*args, *extra)
  want = jax.jit(jax.grad(_loss(plain, dy), argnums=argnums))(*args, *extra)
  for a, b in zip(got, want):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=2e-5)


def test_dropout_matches_naive_loops():
  """dropout=rate drops the softmax weights with the keep mask
  bernoulli(fold_in(key, chunk index), 1 - rate, (B, H, I, K, C)) and
  scales kept ones by 1 / (1 - rate); in one chunk, index 0."""
  args = _inputs()
  rate, key = 0.4, jax.random.PRNGKey(7)
  got = pivotal_attention(*args, dropout=rate, dropout_rng=key)
  keep = jax.random.bernoulli(
      jax.random.fold_in(key, 0), 1.0 - rate, (B, H, N, N, N)
  )
  want = naive_pivotal(*args, keep=keep, rate=rate)
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
  with pytest.raises(ValueError, match="needs a dropout_rng"):
    pivotal_attention(*args, dropout=rate)


@pytest.mark.slow
def test_chunked_memory_has_no_cubic_buffer():
  """Forward and backward's temporary memory grows as N^2 (the gradient
  accumulators and one chunk's B x H x N x N x C scores), not N^3."""

  def temp_bytes(fn, n, h=1, k=4):
    ones = jnp.ones((1, h, n, n, k), jnp.float32)
    grad = jax.grad(lambda *a: jnp.sum(fn(*a)), argnums=(0, 1, 2, 3, 4))
    compiled = jax.jit(grad).lower(*[ones] * 5).compile()
    analysis = compiled.memory_analysis()
    if analysis is None:
      pytest.skip("memory_analysis() is not available on this backend")
    return analysis.temp_size_in_bytes

  chunked = functools.partial(pivotal_attention, chunk_size=2)
  small, large = temp_bytes(chunked, 64), temp_bytes(chunked, 128)
  assert large < 5 * small, (small, large)  # x4 when N doubles; x8 if cubic
  cubic_buffer = 128**3 * 4  # one B x H x N x N x N fp32 score tensor
  assert temp_bytes(pivotal.pivotal_attention_reference, 128) >= cubic_buffer
  assert large < cubic_buffer / 3, (large, cubic_buffer)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(chunk_size=0), "chunk_size"),
        (dict(attn_mask=np.zeros((B, H, N, N, 3), bool)), "broadcastable"),
        (dict(dropout=1.0, dropout_rng=jax.random.PRNGKey(0)), "dropout_rate"),
    ],
)
def test_bad_inputs_raise(kwargs, match):
  with pytest.raises(ValueError, match=match):
    pivotal_attention(*_inputs(), **kwargs)


def test_bad_shapes_raise():
  q, k_ij, k_jk, v_ij, v_jk = _inputs()
  with pytest.raises(ValueError, match="k_BxHxLxJxK"):
    pivotal_attention(q, k_ij, k_jk[:, :, :, :3], v_ij, v_jk)


# ----------------------------------------------------------------------------
# The Flax module.
# ----------------------------------------------------------------------------

D = 8


def _x(seed=0, b=B, n=N, d=D):
  return jax.random.normal(jax.random.PRNGKey(seed), (b, n, n, d))


def _random_params(module, x, seed=3):
  """Non-trivial parameters (their init zeroes the output map)."""
  params = jax.eval_shape(module.init, jax.random.PRNGKey(0), x)
  leaves, tree = jax.tree_util.tree_flatten(params)
  keys = jax.random.split(jax.random.PRNGKey(seed), len(leaves))
  return jax.tree_util.tree_unflatten(
      tree,
      [0.5 * jax.random.normal(k, l.shape) for k, l in zip(keys, leaves)],
  )


def test_module_is_the_equation_on_its_projections():
  module = PivotalAttention(num_heads=H, use_bias=True, chunk_size=3)
  x = _x()
  params = _random_params(module, x)
  p = params["params"]
  qkv = (
      jnp.einsum("bijd,dshk->sbhijk", x, p["qkv"]["kernel"])
      + p["qkv"]["bias"][:, None, :, None, None, :]
  )
  y = naive_pivotal(*qkv)  # B x H x N x N x K
  want = np.einsum(
      "bhijk,hkd->bijd", y, np.asarray(p["out"]["kernel"])
  ) + np.asarray(p["out"]["bias"])
  got = jax.jit(module.apply)(params, x)
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


def test_module_init_as_the_authors():
  """Xavier-uniform q/k/v map over its flat (D, 5 D) shape, zero output map
  and biases."""
  d = 32
  module = PivotalAttention(num_heads=4, use_bias=True)
  p = jax.jit(module.init)(jax.random.PRNGKey(0), _x(d=d, b=1, n=2))
  p = p["params"]
  kernel = np.asarray(p["qkv"]["kernel"])
  assert kernel.shape == (d, 5, 4, d // 4)
  bound = np.sqrt(6.0 / (d + 5 * d))
  assert np.abs(kernel).max() <= bound
  np.testing.assert_allclose(kernel.std(), bound / np.sqrt(3.0), rtol=0.1)
  for leaf in (p["out"]["kernel"], p["out"]["bias"], p["qkv"]["bias"]):
    assert not np.asarray(leaf).any()


@pytest.mark.parametrize("impl", IMPL_PARAMS)
def test_padded_nodes_change_nothing_for_real_pairs(impl):
  """A graph of 3 real nodes padded to 5 (padding holding anything) gives
  the real pairs the outputs of the unpadded 3-node graph."""
  module = PivotalAttention(num_heads=H, chunk_size=2, **IMPLS[impl])
  x = _x()
  params = _random_params(module, x)
  node_mask = jnp.array([[True] * N, [True] * 3 + [False] * 2])
  garbage = _x(seed=9) * 10.0
  real = jnp.zeros((B, N, N), bool).at[1, 3:].set(True).at[1, :, 3:].set(True)
  x_padded = jnp.where(real[..., None], garbage, x)
  got = jax.jit(module.apply)(params, x_padded, node_mask)
  alone = jax.jit(module.apply)(params, x[1:, :3, :3])
  np.testing.assert_allclose(
      np.asarray(got[1, :3, :3]), np.asarray(alone[0]), atol=1e-5
  )
  np.testing.assert_allclose(
      np.asarray(got[0]),
      np.asarray(jax.jit(module.apply)(params, x[:1])[0]),
      atol=1e-5,
  )


def test_node_mask_equals_their_pair_mask_on_real_pairs():
  """Their model masks pivot j of pair (i, k) where pair (i, j) is padding
  (attn_mask = ~pair_mask[:, None, :, None, :]); for real pairs that is our
  node mask."""
  module = PivotalAttention(num_heads=H)
  x = _x()
  params = _random_params(module, x)
  node = np.array([[True] * N, [True] * 3 + [False] * 2])
  pair = node[:, :, None] & node[:, None, :]
  ours = jax.jit(module.apply)(params, x, jnp.asarray(node))
  theirs = jax.jit(module.apply)(params, x, None, ~pair[:, None, :, None, :])
  np.testing.assert_allclose(
      np.asarray(ours)[pair], np.asarray(theirs)[pair], atol=1e-6
  )


@pytest.mark.parametrize("impl", IMPL_PARAMS)
def test_node_permutation_equivariance(impl):
  module = PivotalAttention(num_heads=H, chunk_size=2, **IMPLS[impl])
  x = _x()
  params = _random_params(module, x)
  perm = np.array([3, 0, 4, 1, 2])
  node_mask = jnp.array([[True] * N, [True, False, True, True, False]])
  y = jax.jit(module.apply)(params, x, node_mask)
  y_perm = jax.jit(module.apply)(
      params, x[:, perm][:, :, perm], node_mask[:, perm]
  )
  np.testing.assert_allclose(
      np.asarray(y_perm), np.asarray(y[:, perm][:, :, perm]), atol=1e-5
  )


@pytest.mark.parametrize("impl", IMPL_PARAMS)
def test_jit_matches_eager(impl):
  """Values and gradients (to the input and every parameter)."""
  module = PivotalAttention(
      num_heads=H, chunk_size=2, softmax_cap=3.0, **IMPLS[impl]
  )
  x = _x()
  params = _random_params(module, x)
  node_mask = jnp.array([[True] * N, [True] * 4 + [False]])
  assert_jit_equals_eager(lambda p, x: module.apply(p, x, node_mask), params, x)


def test_attention_dropout_only_in_training():
  x = _x()
  plain = PivotalAttention(num_heads=H)
  dropping = PivotalAttention(num_heads=H, attention_dropout_rate=0.5)
  params = _random_params(plain, x)
  eval_out = dropping.apply(params, x)
  np.testing.assert_allclose(
      np.asarray(eval_out), np.asarray(plain.apply(params, x)), atol=1e-6
  )
  train_out = dropping.apply(
      params, x, deterministic=False, rngs={"dropout": jax.random.PRNGKey(1)}
  )
  assert np.isfinite(np.asarray(train_out)).all()
  assert not np.allclose(np.asarray(train_out), np.asarray(eval_out))


def test_bf16_close_to_fp32():
  module = PivotalAttention(num_heads=H)
  x = _x()
  params = _random_params(module, x)
  fp32 = jax.jit(module.apply)(params, x)
  bf16 = PivotalAttention(num_heads=H, dtype=jnp.bfloat16).apply(params, x)
  assert bf16.dtype == jnp.bfloat16
  np.testing.assert_allclose(
      np.asarray(bf16, np.float32), np.asarray(fp32), atol=0.1, rtol=0.05
  )
