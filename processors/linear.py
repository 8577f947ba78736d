"""hk.Linear computed by `relational_jax.layers.dense.affine` (hand-written VJP).

Same parameters ('w', 'b'), initialisers and outputs as hk.Linear; the
weight gradient is computed as (dy^T x)^T, which XLA:CPU runs as one plain
GEMM inside the scanned CLRS backward pass (see `relational_jax.layers.dense`).
"""

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from relational_jax.layers import dense


class Linear(hk.Linear):
  """hk.Linear with `dense.affine`'s VJP (no `precision` argument)."""

  def __call__(self, inputs: jax.Array) -> jax.Array:
    if not inputs.shape:
      raise ValueError("Input must not be scalar.")
    inputs = jnp.asarray(inputs)
    input_size = self.input_size = inputs.shape[-1]
    w_init = self.w_init
    if w_init is None:
      w_init = hk.initializers.TruncatedNormal(stddev=1.0 / np.sqrt(input_size))
    w = hk.get_parameter(
        "w", [input_size, self.output_size], inputs.dtype, init=w_init
    )
    b = (
        hk.get_parameter(
            "b", [self.output_size], inputs.dtype, init=self.b_init
        )
        if self.with_bias
        else None
    )
    return dense.affine(inputs, w, b)
