"""The FLOP count sees every hint step and every chunk: CLRS's scan and
`jax.lax.scan` are unrolled while tracing."""

import haiku as hk
import jax
import jax.numpy as jnp
from clrs._src import nets as clrs_nets

from experiments.bench import flops_processors
from relational_jax.layers import triangular

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


def test_unrolled_scans_counts_every_step_and_restores_haiku():
  rolled = _scan_flops()
  with flops_processors._unrolled_scans(True):  # pylint: disable=protected-access
    unrolled = _scan_flops()
  assert clrs_nets.hk is hk
  matmul = 2 * WIDTH**3
  # Unrolled, every step is counted (XLA 2026 counts a loop's body once).
  assert STEPS * matmul <= unrolled < (STEPS + 1) * matmul
  assert rolled <= unrolled
  with flops_processors._unrolled_scans(False):  # pylint: disable=protected-access
    assert clrs_nets.hk is hk


def _core_flops(chunk_size) -> float:
  """XLA's FLOP count of the triangular attention core's forward and
  backward (a `jax.lax.scan` over pivot chunks)."""
  q = jnp.ones((1, 8, 8, 2, 4))
  loss = lambda q: triangular.triangular_attention_core(
      q, q, q, q, chunk_size=chunk_size
  ).sum()
  cost = jax.jit(jax.grad(loss)).lower(q).compile().cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  return float(cost["flops"])


def test_unrolled_scans_count_every_chunk_and_restore_lax_scan():
  scan = jax.lax.scan
  one_chunk = _core_flops(None)
  rolled = _core_flops(2)  # 4 chunks, the loop body counted once
  with flops_processors._unrolled_scans(True):  # pylint: disable=protected-access
    unrolled = _core_flops(2)
  assert jax.lax.scan is scan
  assert rolled < 0.5 * one_chunk
  # Unrolled, the four chunks do the one chunk's work (up to the online
  # softmax's per-chunk rescaling).
  assert 0.9 * one_chunk < unrolled < 1.5 * one_chunk
