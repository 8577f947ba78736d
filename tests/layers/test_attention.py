"""Tests for relational_jax.layers.attention."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relational_jax.layers import attention

from tests.fast_jit import FAST_COMPILE, jit  # noqa: E402,F401


def random_params(module, *args, seed=0, scale=0.5, **kwargs):
  """N(0, scale^2) values (biases included) for every parameter of `module`.

  Shapes come from jax.eval_shape, so nothing is compiled.
  """
  shapes = jax.eval_shape(module.init, jax.random.key(0), *args, **kwargs)[
      "params"
  ]
  rng = np.random.default_rng(seed)
  return jax.tree.map(
      lambda s: jnp.asarray(rng.normal(0.0, scale, s.shape), s.dtype), shapes
  )


def _np_sinusoid(pos, dim):
  out = np.zeros(dim)
  for f in range(dim):
    angle = pos / 10000 ** (2 * (f // 2) / dim)
    out[f] = math.sin(angle) if f % 2 == 0 else math.cos(angle)
  return out


def _np_softmax(x):
  x = x - x.max()
  e = np.exp(x)
  return e / e.sum()


def _naive_relative(params, x, mask, causal, num_heads):
  """logit_ij = [(q_i + u).k_j + (q_i + v).W_R r(j - i)] / sqrt(K), loops."""
  x = np.asarray(x, np.float64)
  p = jax.tree.map(lambda a: np.asarray(a, np.float64), params)
  num_b, num_n, d_model = x.shape
  head_dim = d_model // num_heads
  out = np.zeros_like(x)
  for b in range(num_b):
    z = np.zeros((num_n, num_heads, head_dim))
    for h in range(num_heads):
      wq, wk, wv = (p[n]["kernel"][:, h, :] for n in ("query", "key", "value"))
      wr = p["pos_proj"]["kernel"][:, h, :]
      u, v = p["u_bias"][h], p["v_bias"][h]
      for i in range(num_n):
        q_i = x[b, i] @ wq
        logits = np.full(num_n, -np.inf)
        for j in range(num_n):
          if not mask[b, j] or (causal and j > i):
            continue
          k_j = x[b, j] @ wk
          r_ij = _np_sinusoid(j - i, d_model) @ wr
          logits[j] = ((q_i + u) @ k_j + (q_i + v) @ r_ij) / math.sqrt(head_dim)
        alpha = _np_softmax(logits)
        for j in range(num_n):
          z[i, h] += alpha[j] * (x[b, j] @ wv)
    out[b] = np.einsum("nhk,hkd->nd", z, p["out"]["kernel"]) + p["out"]["bias"]
  return out


def _naive_mha(params, x_q, x_kv, kv_mask, causal, num_heads):
  """[V17] eq. 1 with loops: logit_ts = q_t . k_s / sqrt(K) over the
  unmasked keys s (s <= t when causal), z_t = sum_s alpha_ts v_s, then W_O."""
  x_q, x_kv = np.asarray(x_q, np.float64), np.asarray(x_kv, np.float64)
  p = jax.tree.map(lambda a: np.asarray(a, np.float64), params)
  num_b, num_t, d_model = x_q.shape
  num_s, head_dim = x_kv.shape[1], d_model // num_heads
  out = np.zeros_like(x_q)
  for b in range(num_b):
    z = np.zeros((num_t, num_heads, head_dim))
    for h in range(num_heads):
      wq, wk, wv = (p[n]["kernel"][:, h, :] for n in ("query", "key", "value"))
      for t in range(num_t):
        logits = np.full(num_s, -np.inf)
        for s_ in range(num_s):
          if kv_mask[b, s_] and not (causal and s_ > t):
            logits[s_] = (x_q[b, t] @ wq) @ (x_kv[b, s_] @ wk)
        alpha = _np_softmax(logits / math.sqrt(head_dim))
        for s_ in range(num_s):
          z[t, h] += alpha[s_] * (x_kv[b, s_] @ wv)
    out[b] = np.einsum("thk,hkd->td", z, p["out"]["kernel"]) + p["out"]["bias"]
  return out


@pytest.mark.parametrize("causal", [False, True])
def test_attention_matches_naive_loop(causal):
  """Cross-attention (T = 3 queries, S = 5 keys, padded keys) and causal
  self-attention against the loops."""
  d_model, heads = 8, 2
  attn = attention.MultiHeadAttention(d_model, heads, causal=causal)
  x_q = jax.random.normal(jax.random.key(0), (2, 5 if causal else 3, d_model))
  x_kv = (
      x_q if causal else jax.random.normal(jax.random.key(1), (2, 5, d_model))
  )
  mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], bool)
  params = random_params(attn, x_q, x_kv, mask)
  got = jit(attn.apply)({"params": params}, x_q, x_kv, jnp.asarray(mask))
  want = _naive_mha(params, x_q, x_kv, mask, causal, heads)
  np.testing.assert_allclose(np.asarray(got), want, atol=1e-4)


def test_attention_is_token_permutation_equivariant():
  """Without positions or causality, permuting the tokens (and their key
  mask) permutes the output alike."""
  d_model = 8
  attn = attention.MultiHeadAttention(d_model, 2)
  x = jax.random.normal(jax.random.key(3), (2, 6, d_model))
  mask = jnp.array([[1, 1, 1, 1, 1, 1], [1, 1, 0, 1, 1, 0]], bool)
  params = {"params": random_params(attn, x, None, mask)}
  perm = np.random.RandomState(0).permutation(6)
  out = attn.apply(params, x, None, mask)
  permuted = attn.apply(params, x[:, perm], None, mask[:, perm])
  np.testing.assert_allclose(permuted, out[:, perm], atol=1e-5)


@pytest.mark.parametrize(
    "cls", [attention.MultiHeadAttention, attention.RelativeMultiHeadAttention]
)
def test_jit_equals_eager(cls):
  attn = cls(8, 2, causal=True)
  x = jax.random.normal(jax.random.key(6), (2, 5, 8))
  mask = jnp.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], bool)
  args = (x, None, mask) if cls is attention.MultiHeadAttention else (x, mask)
  params = {"params": random_params(attn, *args, seed=2)}
  np.testing.assert_allclose(
      jax.jit(attn.apply)(params, *args),
      attn.apply(params, *args),
      rtol=1e-5,
      atol=1e-6,
  )


@pytest.mark.parametrize("causal", [False, True])
def test_relative_attention_matches_naive_loop(causal):
  d_model, heads = 8, 2
  attn = attention.RelativeMultiHeadAttention(d_model, heads, causal=causal)
  x = jax.random.normal(jax.random.key(0), (2, 5, d_model))
  mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], bool)
  params = random_params(attn, x, mask)
  got = jit(attn.apply)({"params": params}, x, jnp.asarray(mask))
  want = _naive_relative(params, x, mask, causal, heads)
  np.testing.assert_allclose(np.asarray(got), want, atol=1e-4)


@pytest.mark.parametrize(
    "cls", [attention.MultiHeadAttention, attention.RelativeMultiHeadAttention]
)
def test_incremental_decoding_equals_full_causal_pass(cls):
  d_model, heads, length = 8, 2, 6
  attn = cls(d_model, heads, causal=True)
  x = jax.random.normal(jax.random.key(2), (2, length, d_model))
  params = random_params(attn, x, seed=1)
  full = jit(attn.apply)({"params": params}, x)
  cache = attention.init_cache(2, length + 2, heads, d_model // heads)
  step = jit(
      lambda p, x_t, c: attn.apply(
          {"params": p}, x_t, c, method=cls.decode_step
      )
  )
  # Prefill two positions at once, then one token per step.
  outs = []
  out, cache = step(params, x[:, :2], cache)
  outs.append(out)
  for t in range(2, length):
    out, cache = step(params, x[:, t : t + 1], cache)
    outs.append(out)
  assert int(cache["index"]) == length
  np.testing.assert_allclose(
      np.asarray(jnp.concatenate(outs, axis=1)), np.asarray(full), atol=1e-5
  )


def test_key_padding_mask_hides_padded_keys():
  d_model = 8
  attn = attention.MultiHeadAttention(d_model, 2)
  q = jax.random.normal(jax.random.key(4), (1, 3, d_model))
  kv = jax.random.normal(jax.random.key(5), (1, 4, d_model))
  mask = jnp.array([[True, True, False, False]])
  params = random_params(attn, q, kv, mask)
  apply = jit(attn.apply)
  out = apply({"params": params}, q, kv, mask)
  kv_changed = kv.at[:, 2:].set(100.0)
  np.testing.assert_allclose(
      np.asarray(apply({"params": params}, q, kv_changed, mask)),
      np.asarray(out),
      atol=1e-6,
  )
  np.testing.assert_allclose(
      np.asarray(apply({"params": params}, q, kv[:, :2], None)),
      np.asarray(out),
      atol=1e-5,
  )


def test_bad_heads_raise():
  attn = attention.RelativeMultiHeadAttention(d_model=8, num_heads=3)
  with pytest.raises(ValueError, match="num_heads=3 must divide"):
    attn.init(jax.random.key(0), jnp.zeros((1, 2, 8)))
