"""The jit == no-jit property test shared by the layer tests."""

import jax
import jax.numpy as jnp
import numpy as np


def assert_jit_equals_eager(apply, params, x, rtol=1e-5, atol=1e-5):
  """`apply(params, x)` jitted equals it eager: the value of a scalar loss
  of its output (sum of sin) and the gradients to `x` and every parameter."""
  loss = lambda p, x: jnp.sum(jnp.sin(apply(p, x)))
  run = jax.value_and_grad(loss, argnums=(0, 1))
  eager, jitted = run(params, x), jax.jit(run)(params, x)
  for got, want in zip(
      jax.tree_util.tree_leaves(jitted), jax.tree_util.tree_leaves(eager)
  ):
    np.testing.assert_allclose(
        np.asarray(got), np.asarray(want), rtol=rtol, atol=atol
    )
