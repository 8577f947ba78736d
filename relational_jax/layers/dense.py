"""An affine map y = x W + b with a hand-written VJP (same function as nn.Dense).

Why: inside the RT edge update's scanned backward pass, XLA:CPU lowers the
autodiff weight gradient of the narrow maps (W_4..W_7, widths 8 to 16 on one
side and E = 192 on the other, contracted over B N^2 = 8192 rows) to a GEMM
with both operands transposed, after copying the incoming gradient into a
transposed layout. Written as dW = (dy^T x)^T the same product runs as one
plain GEMM (docs/performance.md, "CLRS training throughput against the RT
authors' RT", for the measured speed-up).
Outputs are bit-identical to nn.Dense; gradients equal it up to float
summation order.
"""

import math
from typing import Any, Callable, Optional, Sequence, Union

import flax.linen as nn
from flax.linen import dtypes
import jax
import jax.numpy as jnp

Array = jax.Array


@jax.custom_vjp
def affine(x: Array, w: Array, b: Optional[Array]) -> Array:
  """x W (+ b) over the last axis of x (any leading axes; w is in x out);
  b may be None."""
  return _affine_fwd(x, w, b)[0]


def _affine_fwd(x, w, b):
  y = jnp.dot(x, w)
  if b is not None:
    y = y + jnp.reshape(b, (1,) * (y.ndim - 1) + (-1,))
  return y, (x, w, b)


def _affine_bwd(residuals, dy):
  x, w, b = residuals
  dx = jnp.dot(dy, w.T)
  x_rows = x.reshape(-1, x.shape[-1])  # The leading axes flattened.
  dy_rows = dy.reshape(-1, dy.shape[-1])
  # (dy^T x)^T rather than x^T dy: see the module docstring.
  dw = jnp.dot(dy_rows.T, x_rows).T
  db = None if b is None else jnp.sum(dy_rows, axis=0).astype(b.dtype)
  return dx, dw.astype(w.dtype), db


affine.defvjp(_affine_fwd, _affine_bwd)


class DenseGeneral(nn.Module):
  """flax.linen.DenseGeneral without batch_dims, contracting the trailing
  axes `axis` (e.g. -1, or (-2, -1) for heads x head width): same parameters
  (initialised in their flattened 2-D shape, as Flax does), computed by
  `affine`."""

  features: Union[int, Sequence[int]]
  axis: Union[int, Sequence[int]] = -1
  use_bias: bool = True
  dtype: Optional[Any] = None
  param_dtype: Any = jnp.float32
  kernel_init: Callable = nn.initializers.lecun_normal()
  bias_init: Callable = nn.initializers.zeros_init()

  @nn.compact
  def __call__(self, x: Array) -> Array:
    features = (
        (self.features,)
        if isinstance(self.features, int)
        else tuple(self.features)
    )
    axes = (self.axis,) if isinstance(self.axis, int) else tuple(self.axis)
    axes = tuple(sorted(a % x.ndim for a in axes))
    trailing = tuple(range(x.ndim - len(axes), x.ndim))
    if axes != trailing:
      raise ValueError(
          "DenseGeneral contracts trailing axes only: got axis="
          f"{self.axis!r} for an input of rank {x.ndim}; valid "
          f"are the last k axes, e.g. {trailing}."
      )
    lead, contracted = x.shape[: -len(axes)], x.shape[-len(axes) :]
    size_i, size_o = math.prod(contracted), math.prod(features)
    flat_init = lambda init, flat: (
        lambda rng, shape, dtype: jnp.reshape(init(rng, flat, dtype), shape)
    )
    kernel = self.param(
        "kernel",
        flat_init(self.kernel_init, (size_i, size_o)),
        contracted + features,
        self.param_dtype,
    )
    bias = (
        self.param(
            "bias",
            flat_init(self.bias_init, (size_o,)),
            features,
            self.param_dtype,
        )
        if self.use_bias
        else None
    )
    x, kernel, bias = dtypes.promote_dtype(x, kernel, bias, dtype=self.dtype)
    y = affine(
        x.reshape(lead + (size_i,)),
        kernel.reshape(size_i, size_o),
        None if bias is None else bias.reshape(size_o),
    )
    return y.reshape(lead + features)


class Dense(DenseGeneral):
  """flax.linen.Dense: `DenseGeneral` over the last axis (the same
  parameters 'kernel' (I, O) and 'bias' (O,), the same dtype promotion)."""

  features: int
