"""relational_jax.layers.dense and processors.linear: the same function,
parameters and gradients as nn.Dense / nn.DenseGeneral / hk.Linear."""

import flax.linen as nn
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from processors import linear as linear_lib
from relational_jax.layers import dense


def _naive_affine(x, w, b):
  """Loop reference: y[r, o] = sum_i x[r, i] w[i, o] + b[o]."""
  x2 = np.asarray(x, np.float64).reshape(-1, x.shape[-1])
  w = np.asarray(w, np.float64)
  y = np.zeros((x2.shape[0], w.shape[1]))
  for r in range(x2.shape[0]):
    for o in range(w.shape[1]):
      y[r, o] = sum(x2[r, i] * w[i, o] for i in range(w.shape[0]))
      if b is not None:
        y[r, o] += float(b[o])
  return y.reshape(x.shape[:-1] + (w.shape[1],))


def _inputs(shape, seed=0):
  return jnp.asarray(np.random.RandomState(seed).randn(*shape), jnp.float32)


def _assert_same_module(ours_init, ours_apply, ref_init, ref_apply, x):
  """Same parameters, identical outputs, and gradients equal (to float
  summation order) with and without jit."""
  params = ref_init(jax.random.PRNGKey(0), x)
  jax.tree.map(
      np.testing.assert_array_equal, ours_init(jax.random.PRNGKey(0), x), params
  )
  np.testing.assert_array_equal(ours_apply(params, x), ref_apply(params, x))

  def grads(apply, jit):
    fn = jax.grad(lambda p, x: jnp.sum(jnp.tanh(apply(p, x))), argnums=(0, 1))
    return (jax.jit(fn) if jit else fn)(params, x)

  ref = grads(ref_apply, False)
  for jit in (False, True):
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5),
        grads(ours_apply, jit),
        ref,
    )


@pytest.mark.parametrize("use_bias", [True, False])
def test_affine_matches_loop_reference_and_autodiff(use_bias):
  x, w = _inputs((2, 3, 4, 5)), _inputs((5, 6), 1)
  b = _inputs((6,), 2) if use_bias else None
  np.testing.assert_allclose(
      dense.affine(x, w, b), _naive_affine(x, w, b), rtol=1e-5, atol=1e-5
  )
  cot = _inputs((2, 3, 4, 6), 3)

  def loss(fn):
    return lambda x, w, b: jnp.sum(fn(x, w, b) * cot)

  def autodiff_affine(x, w, b):
    y = jnp.einsum("...i,io->...o", x, w)
    return y if b is None else y + b

  ours = jax.grad(loss(dense.affine), argnums=(0, 1, 2))(x, w, b)
  ref = jax.grad(loss(autodiff_affine), argnums=(0, 1, 2))(x, w, b)
  for got, want in zip(ours, ref):
    if want is None:
      assert got is None
    else:
      np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("use_bias", [True, False])
def test_dense_equals_flax_dense(use_bias):
  ours, ref = dense.Dense(3, use_bias=use_bias), nn.Dense(3, use_bias=use_bias)
  _assert_same_module(
      ours.init, ours.apply, ref.init, ref.apply, _inputs((2, 4, 4, 6))
  )


@pytest.mark.parametrize(
    "features,axis", [((2, 3), -1), (5, (-2, -1)), (4, -1)]
)
def test_dense_general_equals_flax(features, axis):
  ours = dense.DenseGeneral(features, axis=axis)
  ref = nn.DenseGeneral(features, axis=axis)
  _assert_same_module(
      ours.init, ours.apply, ref.init, ref.apply, _inputs((2, 3, 3, 2, 4))
  )


def test_dense_general_rejects_non_trailing_axes():
  x = _inputs((2, 3, 4))
  with pytest.raises(ValueError, match=r"trailing axes only.*axis=0"):
    dense.DenseGeneral(5, axis=0).init(jax.random.PRNGKey(0), x)


def test_dense_promotes_to_dtype():
  x = _inputs((4, 6))
  module = dense.Dense(3, dtype=jnp.bfloat16)
  params = module.init(jax.random.PRNGKey(0), x)
  y = module.apply(params, x)
  assert y.dtype == jnp.bfloat16
  np.testing.assert_array_equal(
      y, nn.Dense(3, dtype=jnp.bfloat16).apply(params, x)
  )


@pytest.mark.parametrize("with_bias", [True, False])
def test_linear_equals_haiku_linear(with_bias):
  ours = hk.without_apply_rng(
      hk.transform(
          lambda x: linear_lib.Linear(3, with_bias=with_bias, name="lin")(x)
      )
  )
  ref = hk.without_apply_rng(
      hk.transform(lambda x: hk.Linear(3, with_bias=with_bias, name="lin")(x))
  )
  _assert_same_module(
      ours.init, ours.apply, ref.init, ref.apply, _inputs((2, 4, 4, 6))
  )
