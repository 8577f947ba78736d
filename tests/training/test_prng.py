"""The counter-hash dropout stream (training/prng.py): distribution, bit
widths, key derivation equal to threefry's, and its use in a train step."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relational_jax.training import prng


def _key(seed=3):
  return prng.dropout_key(jax.random.PRNGKey(seed), "counter_hash")


def test_threefry_choice_returns_the_raw_key_and_unknown_names_choices():
  raw = jax.random.PRNGKey(1)
  assert prng.dropout_key(raw, "threefry") is raw
  with pytest.raises(ValueError, match="'philox'.*counter_hash"):
    prng.dropout_key(raw, "philox")


def test_uniform_and_bernoulli_have_the_right_moments():
  u = np.asarray(jax.random.uniform(_key(), (400_000,)))
  assert abs(u.mean() - 0.5) < 3e-3 and abs(u.var() - 1 / 12) < 1e-3
  # Neighbouring counters are uncorrelated.
  assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 1e-2
  b = np.asarray(jax.random.bernoulli(_key(), 0.3, (500, 400)))
  assert abs(b.mean() - 0.3) < 5e-3
  # Every bit position is fair.
  bits = np.asarray(jax.random.bits(_key(), (100_000,), jnp.uint32))
  ones = ((bits[:, None] >> np.arange(32, dtype=np.uint32)) & 1).mean(0)
  assert np.all(np.abs(ones - 0.5) < 0.01), ones


@pytest.mark.parametrize(
    "dtype", [jnp.uint8, jnp.uint16, jnp.uint32, jnp.uint64]
)
def test_bits_of_every_width(dtype):
  with jax.enable_x64(dtype == jnp.uint64):
    bits = jax.random.bits(_key(), (3, 5), dtype)
    assert bits.shape == (3, 5) and bits.dtype == dtype
    assert len(np.unique(np.asarray(bits))) > 10


def test_keys_derive_as_threefry_and_streams_differ_by_key():
  raw = jax.random.PRNGKey(7)
  key = prng.dropout_key(raw, "counter_hash")
  np.testing.assert_array_equal(
      jax.random.key_data(jax.random.fold_in(key, 5)),
      jax.random.fold_in(raw, 5),
  )
  np.testing.assert_array_equal(
      jax.random.key_data(jax.random.split(key, 3)), jax.random.split(raw, 3)
  )
  a = jax.random.bits(key, (64,))
  np.testing.assert_array_equal(a, jax.random.bits(key, (64,)))
  assert not np.array_equal(
      a, jax.random.bits(jax.random.fold_in(key, 1), (64,))
  )


def test_flax_dropout_with_the_counter_hash_key():
  x = jnp.ones((8, 2000))
  y = nn.Dropout(0.25).apply(
      {}, x, deterministic=False, rngs={"dropout": _key()}
  )
  kept = np.asarray(y != 0)
  assert abs(kept.mean() - 0.75) < 0.01
  np.testing.assert_allclose(np.asarray(y)[kept], 1 / 0.75, rtol=1e-6)
