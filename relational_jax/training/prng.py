"""Dropout random streams: JAX's threefry, or a counter hash that is ~6x
cheaper on CPU.

Dropout draws one random number per activation (about 25M per SCAN training
step at the Csordas settings). On XLA:CPU, `jax.random.bernoulli` with the
default threefry2x32 costs ~14 ns per number (0.34 s for 25M on one core,
`experiments.bench.dropout_prng` -> results/bench_dropout_prng.json; rbg and
unsafe_rbg are no faster), about a quarter of the whole step. The
PyTorch reference draws its masks with a cheap CPU generator.

`COUNTER_HASH` is a JAX PRNG implementation (`jax.extend.random.
define_prng_impl`) with threefry's key shape (2 x uint32), split and fold_in
(so keys are derived exactly as with threefry, and checkpoints keep the same
raw key data), whose `random_bits` hashes a counter instead:

    bits[i] = fmix32(fmix32(i * 0x9E3779B9 ^ k0) + k1)

with murmur3's 32-bit finaliser fmix32 (Appleby; full avalanche), i the
element's flat index and (k0, k1) the key. That is ~5 integer ops per number
(55 ms for 25M on one core: 6.2x less). Masks differ from threefry's but have
the same distribution (keep iff uniform < 1 - rate), so what is trained is the
same model; the stream is not a cryptographic one, which dropout does not need.

    rngs={"dropout": dropout_key(raw_key_uint32x2, "counter_hash")}
"""

import jax
import jax.extend.random as jex_random
import jax.numpy as jnp
import numpy as np

from relational_jax.layers.shapes import check_choice

DROPOUT_PRNGS = ("threefry", "counter_hash")

_GOLDEN = np.uint32(0x9E3779B9)


def _fmix32(x):
  """murmur3's 32-bit finaliser (uint32 -> uint32, a bijection)."""
  x = x ^ (x >> 16)
  x = x * np.uint32(0x85EBCA6B)
  x = x ^ (x >> 13)
  x = x * np.uint32(0xC2B2AE35)
  return x ^ (x >> 16)


def _hash_bits32(key, n: int):
  """n uint32 words of the counter hash under `key` (uint32[2])."""
  i = jax.lax.iota(jnp.uint32, n)
  return _fmix32(_fmix32(i * _GOLDEN ^ key[0]) + key[1])


def _random_bits(key, bit_width: int, shape):
  n = int(np.prod(shape, dtype=np.int64))
  if bit_width == 64:
    words = _hash_bits32(key, 2 * n).reshape(2, n).astype(jnp.uint64)
    return ((words[0] << 32) | words[1]).reshape(shape)
  dtype = {8: jnp.uint8, 16: jnp.uint16, 32: jnp.uint32}[bit_width]
  bits = _hash_bits32(key, n)
  if bit_width < 32:  # The high bits (fmix32 mixes every bit into them).
    bits = bits >> (32 - bit_width)
  return bits.astype(dtype).reshape(shape)


_THREEFRY = jex_random.threefry_prng_impl

COUNTER_HASH = jex_random.define_prng_impl(
    key_shape=(2,),
    seed=lambda seed: jax.random.key_data(
        jax.random.key(seed, impl="threefry2x32")
    ),
    split=lambda key, shape: jax.random.key_data(
        jax.random.split(
            jax.random.wrap_key_data(key, impl="threefry2x32"), shape
        )
    ),
    random_bits=_random_bits,
    fold_in=lambda key, data: jax.random.key_data(
        jax.random.fold_in(
            jax.random.wrap_key_data(key, impl="threefry2x32"), data
        )
    ),
    name="counter_hash",
    tag="ch",
)


def dropout_key(raw_key, prng: str):
  """The dropout key for raw key data uint32[2] (a `jax.random.PRNGKey`):
  unchanged for 'threefry', a typed `COUNTER_HASH` key for 'counter_hash'.

  Raises:
    ValueError: for an unknown `prng` (names the choices).
  """
  check_choice(prng, DROPOUT_PRNGS, "dropout_prng")
  if prng == "threefry":
    return raw_key
  return jax.random.wrap_key_data(raw_key, impl=COUNTER_HASH)
