"""Tests for triangular attention (Edge Transformer eq. 4-9)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relational_jax.layers import triangular
from relational_jax.layers.triangular import TriangularAttention
from tests.jit_check import assert_jit_equals_eager
from tests.layers.impls import IMPL_PARAMS
from tests.layers.impls import IMPLS

B, N, D, H = 2, 4, 6, 2


def _x(key, b=B, n=N, d=D, dtype=jnp.float32):
  return jax.random.normal(jax.random.PRNGKey(key), (b, n, n, d), dtype)


def _init(module, x, mask=None):
  # lazy_init creates the parameters without compiling the forward pass.
  return module.lazy_init(jax.random.PRNGKey(0), x, mask)


def naive_triangular_attention(
    params, x_BxNxNxD, mask_BxN, num_heads, ablation, time_BxN=None
):
  """eq. 4-9 with explicit Python loops over the edge (i, j) and the pivot l.

  With node times, pivot l of edge (i, j) is used only if
  t_l <= max(t_i, t_j) (causal masking)."""
  p = params["params"]
  b, n, _, d = x_BxNxNxD.shape
  k_size = d // num_heads

  def proj(name):  # x W + bias, per head: BxNxNxHxK.
    return (
        jnp.einsum("bijd,dhk->bijhk", x_BxNxNxD, p[name]["kernel"])
        + p[name]["bias"]
    )

  q, key, v1 = proj("query"), proj("key"), proj("value_left")
  v2 = None if ablation == "value" else proj("value_right")
  rows = []
  for i in range(n):
    row = []
    for j in range(n):
      scores, values = [], []
      for l in range(n):
        k_vec = key[:, i, j] if ablation == "attention" else key[:, l, j]
        s_BxH = jnp.sum(q[:, i, l] * k_vec, axis=-1) / np.sqrt(k_size)  # eq. 5
        allowed_B = mask_BxN[:, l]
        if time_BxN is not None:
          allowed_B = allowed_B & (
              time_BxN[:, l] <= jnp.maximum(time_BxN[:, i], time_BxN[:, j])
          )
        scores.append(jnp.where(allowed_B[:, None], s_BxH, -1e30))
        if ablation == "value":
          values.append(v1[:, i, l])  # 4.5
        else:
          values.append(v1[:, i, l] * v2[:, l, j])  # eq. 8
      alpha_BxHxL = jax.nn.softmax(jnp.stack(scores, axis=-1), axis=-1)
      a_BxHxK = sum(alpha_BxHxL[:, :, l, None] * values[l] for l in range(n))
      row.append(a_BxHxK)  # eq. 4
    rows.append(jnp.stack(row, axis=1))
  a_BxNxNxHxK = jnp.stack(rows, axis=1)
  return (
      jnp.einsum("bijhk,hkd->bijd", a_BxNxNxHxK, p["out"]["kernel"])
      + p["out"]["bias"]
  )  # eq. 9


def _loss(apply, cotangent):
  return lambda params, x: jnp.sum(apply(params, x) * cotangent)


def _assert_trees_close(a, b, rtol=1e-5, atol=1e-5):
  for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_allclose(
        np.asarray(u), np.asarray(v), rtol=rtol, atol=atol
    )


@pytest.mark.parametrize(
    "ablation, unroll_nodes_max",
    [("none", 16), ("value", 16), ("attention", 16), ("none", 0)],
)  # 0: the per-pivot backward of graphs above the limit.
@pytest.mark.slow
def test_matches_naive_loops_values_and_grads(
    ablation, unroll_nodes_max, monkeypatch
):
  monkeypatch.setattr(triangular, "UNROLL_NODES_MAX", unroll_nodes_max)
  n = 3
  x = _x(1, n=n)
  mask = jnp.array([[True, False, True], [True] * n])
  # chunk_size=2 does not divide N=3: exercises the clamped last chunk.
  module = TriangularAttention(num_heads=H, ablation=ablation, chunk_size=2)
  params = _init(module, x, mask)
  if ablation == "value":
    assert "value_right" not in params["params"]
  _assert_matches_naive(
      lambda prm, x: module.apply(prm, x, mask),
      lambda prm, x: naive_triangular_attention(prm, x, mask, H, ablation),
      params,
      x,
      _x(2, n=n),
  )


def _assert_matches_naive(ours, naive, params, x, cotangent):
  """Outputs and VJPs (params, x) of `ours` and `naive` agree."""

  def out_and_grads(f):  # Output, and the VJP of the cotangent (params, x).
    out, vjp = jax.vjp(f, params, x)
    return out, vjp(cotangent)

  # Ours goes through the custom VJP; the naive loops through plain autodiff
  # (eagerly: compiling the unrolled loops takes longer than running them).
  out_ours, grads_ours = jax.jit(out_and_grads, static_argnums=0)(ours)
  out_naive, grads_naive = out_and_grads(naive)
  np.testing.assert_allclose(out_ours, out_naive, rtol=1e-5, atol=1e-5)
  _assert_trees_close(grads_ours, grads_naive, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "impl, chunk_size", [("chunked", 2), ("chunked", None), ("reference", None)]
)
@pytest.mark.slow
def test_causal_matches_naive_loops_values_and_grads(impl, chunk_size):
  n = 5
  x = _x(13, n=n)
  mask = jnp.array([[True, False, True, True, True], [True] * n])
  # Two "source" nodes at time 0, then one node per time step; the second
  # row's times are not sorted by index.
  time = jnp.array([[0, 0, 1, 2, 3], [2, 0, 0, 3, 1]], jnp.int32)
  module = TriangularAttention(num_heads=H, chunk_size=chunk_size, impl=impl)
  params = _init(module, x, mask)
  _assert_matches_naive(
      lambda prm, x: module.apply(prm, x, mask, time),
      lambda prm, x: naive_triangular_attention(prm, x, mask, H, "none", time),
      params,
      x,
      _x(14, n=n),
  )


def test_causal_edges_ignore_later_nodes():
  """An edge of time tau is unchanged when edges of later times change."""
  n = 5
  time = jnp.array([[0, 0, 1, 2, 3]] * B, jnp.int32)
  x = _x(15, n=n)
  edge_time = np.maximum(
      np.asarray(time)[0][:, None], np.asarray(time)[0][None, :]
  )
  late = jnp.asarray(edge_time >= 2)[None, :, :, None]
  x_changed = jnp.where(late, 10.0 * _x(16, n=n), x)
  module = TriangularAttention(num_heads=H, chunk_size=2)
  params = _init(module, x)
  apply = jax.jit(module.apply)
  out, out_changed = apply(params, x, None, time), apply(
      params, x_changed, None, time
  )
  early = edge_time < 2
  np.testing.assert_allclose(
      out[:, early], out_changed[:, early], rtol=1e-5, atol=1e-5
  )
  assert not np.allclose(out[:, ~early], out_changed[:, ~early])


def test_chunked_equals_unchunked():
  n = 5
  x = _x(3, n=n)
  mask = jnp.array([[True, True, True, False, True], [True] * n])
  cotangent = _x(4, n=n)
  # The materialising implementation, differentiated by plain autodiff.
  reference = TriangularAttention(num_heads=H, impl="reference")
  params = _init(reference, x, mask)

  def value_and_grad(module):
    f = lambda prm, x: module.apply(prm, x, mask)
    return jax.jit(jax.value_and_grad(_loss(f, cotangent), argnums=(0, 1)))(
        params, x
    )

  expected = value_and_grad(reference)
  for chunk_size in (None, 1, 3, 7):  # 3 does not divide 5; 7 > N.
    module = TriangularAttention(num_heads=H, chunk_size=chunk_size)
    got = value_and_grad(module)
    _assert_trees_close(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("impl", IMPL_PARAMS)
def test_node_permutation_equivariance(impl):
  x = _x(6)
  module = TriangularAttention(num_heads=H, chunk_size=3, **IMPLS[impl])
  params = _init(module, x)
  perm = np.array([2, 0, 3, 1])
  x_perm = x[:, perm][:, :, perm]  # P X P^T
  apply = jax.jit(module.apply)
  out = apply(params, x)
  out_perm = apply(params, x_perm)
  np.testing.assert_allclose(
      out_perm, out[:, perm][:, :, perm], rtol=1e-5, atol=1e-5
  )


@pytest.mark.parametrize("impl", IMPL_PARAMS)
def test_masked_pivots_change_nothing_for_real_nodes(impl):
  n_real, n_pad = 3, 5
  x_real = _x(7, n=n_real)
  garbage = 100.0 * _x(8, n=n_pad)
  x_pad = garbage.at[:, :n_real, :n_real].set(x_real)
  mask = jnp.arange(n_pad)[None, :].repeat(B, 0) < n_real
  module = TriangularAttention(num_heads=H, chunk_size=2, **IMPLS[impl])
  params = _init(module, x_real)
  # Gradients reach the real block only through real pivots.
  out_pad, grad_pad = jax.jit(
      jax.value_and_grad(
          lambda x: jnp.sum(
              module.apply(params, x, mask)[:, :n_real, :n_real] ** 2
          )
      )
  )(x_pad)
  out_real, grad_real = jax.jit(
      jax.value_and_grad(lambda x: jnp.sum(module.apply(params, x) ** 2))
  )(x_real)
  np.testing.assert_allclose(out_pad, out_real, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(
      grad_pad[:, :n_real, :n_real], grad_real, rtol=1e-4, atol=1e-5
  )


def test_all_pivots_masked_is_finite():
  x = _x(9)
  mask = jnp.zeros((B, N), bool)
  module = TriangularAttention(num_heads=H, use_bias=False)
  params = _init(module, x)
  out, grad = jax.jit(
      jax.value_and_grad(
          lambda x: jnp.sum(jnp.abs(module.apply(params, x, mask)))
      )
  )(x)
  assert np.isfinite(grad).all()
  assert out == 0.0


@pytest.mark.parametrize("impl", IMPL_PARAMS)
def test_jit_matches_eager(impl):
  """Values and gradients (to the input and every parameter)."""
  x = _x(10)
  module = TriangularAttention(num_heads=H, chunk_size=3, **IMPLS[impl])
  assert_jit_equals_eager(module.apply, _init(module, x), x)


def test_bf16_input_close_to_fp32():
  x = _x(11)
  module = TriangularAttention(num_heads=H, chunk_size=3)
  params = _init(module, x)

  @jax.jit
  def run(x32):
    x16 = x32.astype(jnp.bfloat16)
    out16, vjp16 = jax.vjp(lambda x: module.apply(params, x), x16)
    out32, vjp32 = jax.vjp(lambda x: module.apply(params, x), x32)
    ones = jnp.ones_like(out32)
    return out16, out32, vjp16(ones.astype(jnp.bfloat16))[0], vjp32(ones)[0]

  out16, out32, grad16, grad32 = run(x)
  assert out16.dtype == grad16.dtype == jnp.bfloat16
  np.testing.assert_allclose(
      np.asarray(out16, np.float32), out32, rtol=0.05, atol=0.05
  )
  np.testing.assert_allclose(
      np.asarray(grad16, np.float32), grad32, rtol=0.05, atol=0.1
  )


@pytest.mark.parametrize(
    "ablation, impl",
    [
        # The fast tier's check of impl='pallas' (the fused kernels have
        # their own file); the rest in the slow tier.
        pytest.param(
            a, i, marks=() if (a, i) == ("none", "pallas") else pytest.mark.slow
        )
        for a in ("none", "value", "attention")
        for i in ("pallas", "pallas_fused")
    ],
)
def test_pallas_interpret_matches_chunked(ablation, impl):
  n = 5  # Padded to 8 by the 4 x 4 tiles.
  x = _x(12, b=1, n=n)
  mask = jnp.array([[True, True, False, True, True]])
  chunked = TriangularAttention(num_heads=H, ablation=ablation, chunk_size=2)
  pallas = chunked.clone(impl=impl, pallas_block_size=4, interpret=True)
  params = _init(chunked, x, mask)
  if ablation == "none" or impl == "pallas_fused":  # Values and gradients.
    f = lambda m, x: jnp.sum(m.apply(params, x, mask) ** 2)
    run = lambda m: jax.jit(jax.value_and_grad(functools.partial(f, m)))(x)
  else:
    run = lambda m: jax.jit(m.apply)(params, x, mask)
  _assert_trees_close(run(pallas), run(chunked), rtol=1e-5, atol=1e-5)


def test_pallas_picks_interpret_mode_on_cpu_as_pivotal_attention():
  """interpret=None (the default): the kernel runs in interpret mode on a
  CPU backend, so impl='pallas' needs no flag there."""
  b, n, h, k = 1, 5, 2, 4
  keys = jax.random.split(jax.random.PRNGKey(3), 4)
  q, kk, v1 = (jax.random.normal(key, (b, n, n, h, k)) for key in keys[:3])
  v2 = jax.random.normal(keys[3], (b, n, n, h, k))
  mask = jnp.array([[True, True, False, True, True]])
  want = triangular.triangular_attention_core(q, kk, v1, v2, mask)
  got = triangular.triangular_attention_pallas(
      q, kk, v1, v2, mask, block_size=4
  )
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "make, args, match",
    [
        (
            lambda: TriangularAttention(num_heads=H),
            (jnp.ones((B, 4, 5, D)),),
            "equal node axes",
        ),
        (
            lambda: TriangularAttention(num_heads=4),
            (jnp.ones((B, N, N, D)),),
            r"num_heads=4 must divide the width D 6; "
            r"valid head counts are \[1, 2, 3, 6\]",
        ),
        (
            lambda: TriangularAttention(num_heads=H, ablation="keys"),
            (jnp.ones((B, N, N, D)),),
            r"Unknown ablation 'keys'; "
            r"valid choices are \['none', 'value', 'attention'\]",
        ),
        (
            lambda: TriangularAttention(num_heads=H),
            (jnp.ones((B, N, D)),),
            "x_BxNxNxD must have rank 4",
        ),
        (
            lambda: TriangularAttention(num_heads=H),
            (jnp.ones((B, N, N, D)), jnp.ones((B, N + 1), bool)),
            "node_mask_BxN axis 1 must have size 4",
        ),
        (
            lambda: TriangularAttention(num_heads=H, chunk_size=0),
            (jnp.ones((B, N, N, D)),),
            "chunk_size must be a positive int",
        ),
        (
            lambda: TriangularAttention(num_heads=H, impl="cuda"),
            (jnp.ones((B, N, N, D)),),
            r"Unknown impl 'cuda'; valid choices",
        ),
        (
            lambda: TriangularAttention(
                num_heads=H, impl="pallas", pallas_block_size=6
            ),
            (jnp.ones((B, N, N, D)),),
            "block_size must be a positive power of two",
        ),
        (
            lambda: TriangularAttention(
                num_heads=H, impl="pallas", interpret=True
            ),
            (jnp.ones((B, N, N, D)), None, jnp.zeros((B, N), jnp.int32)),
            (
                r"not supported by impl='pallas'; use impl='chunked' or"
                r" 'reference'"
            ),
        ),
        (
            lambda: TriangularAttention(num_heads=H),
            (jnp.ones((B, N, N, D)), None, jnp.zeros((B, N))),
            "node_time_BxN must be integer, got dtype float32",
        ),
        (
            lambda: TriangularAttention(num_heads=H),
            (jnp.ones((B, N, N, D)), None, jnp.zeros((B, N + 1), jnp.int32)),
            "node_time_BxN axis 1 must have size 4",
        ),
    ],
)
def test_bad_inputs_raise(make, args, match):
  with pytest.raises(ValueError, match=match):
    make().init(jax.random.PRNGKey(0), *args)


def test_chunked_memory_has_no_cubic_buffer():
  """The chunked core's gradient holds no B x N x N x N x H score tensor
  (the one buffer every unchunked form needs for its softmax; XLA on a GPU
  fuses the reference's larger N^3 x D product away, XLA on a CPU does not)."""
  b, n, h, k = 1, 128, 2, 8
  ones = jnp.ones((b, n, n, h, k), jnp.float32)
  mask = jnp.ones((b, n), bool)

  def temp_bytes(core):
    grad = jax.grad(
        lambda q, k, v1, v2: jnp.sum(core(q, k, v1, v2)), argnums=(0, 1, 2, 3)
    )
    analysis = jax.jit(grad).lower(ones, ones, ones, ones).compile()
    analysis = analysis.memory_analysis()
    if analysis is None:
      pytest.skip("memory_analysis() is not available on this backend")
    return analysis.temp_size_in_bytes

  chunked = temp_bytes(
      lambda *a: triangular.triangular_attention_core(*a, mask, chunk_size=4)
  )
  naive = temp_bytes(
      lambda *a: triangular.triangular_attention_reference(*a, mask)
  )
  scores_bytes = b * n**3 * h * 4  # one B x N x N x N x H fp32 tensor
  assert naive >= scores_bytes  # the reference does hold one
  assert chunked < scores_bytes / 3, (chunked, scores_bytes)


def test_attention_dropout_matches_naive_loops():
  """attention_dropout=(rate, key): the softmax weights alpha_ilj^h are
  dropped with the keep mask bernoulli(key, 1 - rate, BxNxLxNxH) and scaled
  by 1 / (1 - rate) (the ET authors' `att = self.dropout(att)`)."""
  rate, key = 0.4, jax.random.PRNGKey(7)
  ks = jax.random.split(jax.random.PRNGKey(3), 4)
  q, k, v1, v2 = (jax.random.normal(kk, (B, N, N, H, D // H)) for kk in ks)
  mask = jnp.array([[True] * N, [True] * (N - 1) + [False]])
  got = triangular.triangular_attention_reference(
      q, k, v1, v2, mask, attention_dropout=(rate, key)
  )
  keep = np.asarray(jax.random.bernoulli(key, 1.0 - rate, (B, N, N, N, H)))
  qn, kn, v1n, v2n = (np.asarray(a, np.float64) for a in (q, k, v1, v2))
  want = np.zeros((B, N, N, H, D // H))
  for b in range(B):
    for i in range(N):
      for j in range(N):
        for h in range(H):
          s = np.array([qn[b, i, l, h] @ kn[b, l, j, h] for l in range(N)])
          s = s / np.sqrt(D // H)
          s = np.where(np.asarray(mask[b]), s, -np.inf)
          alpha = np.exp(s - s.max())
          alpha /= alpha.sum()
          alpha = alpha * keep[b, i, :, j, h] / (1.0 - rate)
          want[b, i, j, h] = sum(
              alpha[l] * v1n[b, i, l, h] * v2n[b, l, j, h] for l in range(N)
          )
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


def test_attention_dropout_only_in_training():
  """deterministic=True ignores attention_dropout_rate (equal to the
  chunked layer); deterministic=False drops weights (needs a dropout rng)."""
  x = _x(0)
  plain = TriangularAttention(num_heads=H)
  dropping = TriangularAttention(num_heads=H, attention_dropout_rate=0.5)
  params = _init(plain, x)
  eval_out = dropping.apply(params, x)
  np.testing.assert_allclose(
      np.asarray(eval_out),
      np.asarray(plain.apply(params, x)),
      rtol=1e-5,
      atol=1e-6,
  )
  train_out = dropping.apply(
      params, x, deterministic=False, rngs={"dropout": jax.random.PRNGKey(1)}
  )
  assert np.all(np.isfinite(np.asarray(train_out)))
  assert not np.allclose(np.asarray(train_out), np.asarray(eval_out))
  with pytest.raises(ValueError, match="attention_dropout_rate must be in"):
    TriangularAttention(num_heads=H, attention_dropout_rate=1.0).apply(
        params, x
    )
