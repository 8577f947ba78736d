"""processors.nets.EdgePointerDecoder: logits from e_t's blocks equal
hk.Linear(1) of their concatenation (the RT authors' decoder)."""

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from processors import nets


def test_block_logits_equal_linear_of_concatenation():
  rng = np.random.RandomState(0)
  blocks = [jnp.asarray(rng.randn(2, 4, 4, f), jnp.float32) for f in (3, 5, 2)]
  ours = hk.transform(
      lambda b: nets.EdgePointerDecoder("pointer", "dec")(b, repred=True)
  )
  ref = hk.transform(lambda e: jnp.squeeze(hk.Linear(1, name="linear")(e), -1))
  e_t = jnp.concatenate(blocks, axis=-1)
  params = ours.init(jax.random.PRNGKey(0), blocks)
  assert params["dec/linear"]["w"].shape == (10, 1)
  ref_params = {"linear": params["dec/linear"]}
  want = ref.apply(ref_params, None, e_t)
  np.testing.assert_allclose(
      ours.apply(params, None, blocks), want, rtol=1e-6, atol=1e-6
  )
  # Loop reference: logit[b, i, j] = sum_f e_t[b, i, j, f] w[f] + c.
  w, c = np.asarray(params["dec/linear"]["w"])[:, 0], float(
      params["dec/linear"]["b"][0]
  )
  naive = np.zeros((2, 4, 4))
  for b, i, j in np.ndindex(2, 4, 4):
    naive[b, i, j] = sum(float(e_t[b, i, j, f]) * w[f] for f in range(10)) + c
  np.testing.assert_allclose(want, naive, rtol=1e-5, atol=1e-5)
  # One array is one block.
  np.testing.assert_allclose(
      ours.apply(params, None, [e_t]), want, rtol=1e-6, atol=1e-6
  )
  grads = jax.grad(lambda p: jnp.sum(jnp.sin(ours.apply(p, None, blocks))))(
      params
  )
  ref_grads = jax.grad(lambda p: jnp.sum(jnp.sin(ref.apply(p, None, e_t))))(
      ref_params
  )
  np.testing.assert_allclose(
      grads["dec/linear"]["w"], ref_grads["linear"]["w"], rtol=1e-5, atol=1e-6
  )
