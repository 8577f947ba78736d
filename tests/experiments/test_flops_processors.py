"""The FLOP count sees every hint step: CLRS's scan is unrolled while tracing."""

import haiku as hk
import jax
import jax.numpy as jnp
from clrs._src import nets as clrs_nets

from experiments import flops_processors

STEPS, WIDTH = 6, 32


def _scan_flops() -> float:
  """XLA's FLOP count of STEPS matrix-vector steps run by the `hk.scan` that
  CLRS's nets module sees (as `Net.__call__` runs its hint steps)."""

  def net(x):
    w = hk.get_parameter("w", (WIDTH, WIDTH), init=jnp.ones)
    body = lambda h, _: (jnp.tanh(h @ w), None)
    return clrs_nets.hk.scan(body, x, None, length=STEPS)[0]

  f = hk.transform(net)
  x = jnp.ones((WIDTH, WIDTH))
  params = f.init(None, x)
  cost = jax.jit(f.apply).lower(params, None, x).compile().cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  return float(cost["flops"])


def test_unrolled_hint_scan_counts_every_step_and_restores_haiku():
  rolled = _scan_flops()
  with flops_processors._unrolled_hint_scan(True):  # pylint: disable=protected-access
    unrolled = _scan_flops()
  assert clrs_nets.hk is hk
  matmul = 2 * WIDTH ** 3
  # Unrolled, every step is counted (XLA 2026 counts a loop's body once).
  assert STEPS * matmul <= unrolled < (STEPS + 1) * matmul
  assert rolled <= unrolled
  with flops_processors._unrolled_hint_scan(False):  # pylint: disable=protected-access
    assert clrs_nets.hk is hk
