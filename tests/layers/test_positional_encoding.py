"""Tests for relational_jax.layers.positional_encoding."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relational_jax.layers import positional_encoding

from tests.fast_jit import FAST_COMPILE, jit  # noqa: E402,F401


def _np_sinusoid(pos, dim):
  out = np.zeros(dim)
  for f in range(dim):
    angle = pos / 10000 ** (2 * (f // 2) / dim)
    out[f] = math.sin(angle) if f % 2 == 0 else math.cos(angle)
  return out


def test_sinusoidal_matches_formula():
  pe = np.asarray(positional_encoding.sinusoidal(5, 6))
  assert pe.shape == (5, 6)
  for pos in range(5):
    np.testing.assert_allclose(pe[pos], _np_sinusoid(pos, 6), atol=1e-6)
  neg = np.asarray(positional_encoding.sinusoidal_at(jnp.array([-3, 2]), 7))
  assert neg.shape == (2, 7)
  np.testing.assert_allclose(neg[0], _np_sinusoid(-3, 7), atol=1e-6)
  np.testing.assert_allclose(
      np.asarray(positional_encoding.sinusoidal(2, 6, offset=3)),
      np.stack([_np_sinusoid(3, 6), _np_sinusoid(4, 6)]),
      atol=1e-6,
  )


@pytest.mark.parametrize(
    "scaling, token_scale, pe_scale",
    [("teu", 4.0, 1.0), ("ped", 1.0, 0.25), ("none", 1.0, 1.0)],
)
def test_embedding_scaling_numbers(scaling, token_scale, pe_scale):
  # Csordas et al. 2021 appendix D with D = 16: TEU sqrt(D) E + P,
  # PED E + P / sqrt(D), none E + P.
  d_model = 16
  emb = positional_encoding.TokenEmbedding(
      vocab_size=7, d_model=d_model, scaling=scaling
  )
  tokens = jnp.array([[1, 2, 6], [0, 3, 3]])
  pe = positional_encoding.sinusoidal(3, d_model)
  params = jit(emb.init)(jax.random.key(0), tokens, pe)["params"]
  table = np.asarray(params["embedding"])
  expected = (
      token_scale * table[np.asarray(tokens)] + pe_scale * np.asarray(pe)[None]
  )
  np.testing.assert_allclose(
      np.asarray(emb.apply({"params": params}, tokens, pe)), expected, rtol=1e-6
  )
  assert positional_encoding.embedding_scales(scaling, d_model) == (
      token_scale,
      pe_scale,
  )
  no_pe = emb.apply({"params": params}, tokens)
  np.testing.assert_allclose(
      np.asarray(no_pe), token_scale * table[np.asarray(tokens)], rtol=1e-6
  )


def test_embedding_init_statistics():
  vocab, d_model = 256, 64
  tables = {}
  for scaling in positional_encoding.SCALINGS:
    emb = positional_encoding.TokenEmbedding(vocab, d_model, scaling)
    tables[scaling] = np.asarray(
        jit(emb.init)(jax.random.key(1), jnp.zeros((1, 1), jnp.int32))[
            "params"
        ]["embedding"]
    )
  # PED: Kaiming N(0, 1/sqrt(D)); none: N(0, 1); TEU: Glorot uniform.
  assert abs(tables["ped"].std() - 1 / math.sqrt(d_model)) < 0.05 / math.sqrt(
      d_model
  )
  assert abs(tables["none"].std() - 1.0) < 0.05
  bound = math.sqrt(6 / (vocab + d_model))
  assert np.abs(tables["teu"]).max() <= bound
  assert abs(tables["teu"].std() - bound / math.sqrt(3)) < 0.05 * bound


def test_bad_scaling_raises():
  with pytest.raises(ValueError, match="scaling 'xyz'.*teu"):
    positional_encoding.embedding_scales("xyz", 8)
  emb = positional_encoding.TokenEmbedding(5, 8, "xyz")
  with pytest.raises(ValueError, match="scaling 'xyz'"):
    emb.init(jax.random.key(0), jnp.zeros((1, 2), jnp.int32))
