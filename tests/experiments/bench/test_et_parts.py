"""bench.et_parts: the core-free stand-in really removes the pivot sum, and
the script writes its JSON (tiny sizes)."""

import json

import jax
import numpy as np
import pytest

from experiments.bench import et_parts
from relational_jax.layers import triangular
from relational_jax.models import edge_transformer as etm


@pytest.mark.slow  # A benchmark's helper: the full suite.
def test_core_replaced_swaps_and_restores_the_pivot_sum():
  config = etm.ETConfig(num_layers=1, num_heads=2, head_dim=4)
  x = jax.random.normal(jax.random.PRNGKey(0), (2, 5, 5, 8))
  stack = etm.EdgeTransformer(config)
  params = stack.init(jax.random.PRNGKey(1), x)
  core = triangular.triangular_attention_core
  with et_parts._core_replaced(et_parts._free_core):  # pylint: disable=protected-access
    free = stack.apply(params, x)
    # With o = q * k + V^1 x * V^2 x the layer is that function of the
    # four projections.
    layer = stack.bind(params).layer(0)
    q, k, v1, v2 = layer.project(x)
    expected = layer.update(x, q * k + v1 * v2)
  assert triangular.triangular_attention_core is core
  np.testing.assert_allclose(free, expected, rtol=1e-5, atol=1e-5)
  assert not np.allclose(free, stack.apply(params, x), atol=1e-3)


@pytest.mark.slow
def test_run_times_every_pass_and_reports_shares():
  config = etm.ETConfig(num_layers=2, num_heads=2, head_dim=4)
  result = et_parts.run(batch_size=2, nodes=4, config=config, rounds=2)
  json.dumps(result)  # JSON-serialisable as written by main
  assert set(result["ms"]) == {
      "stack",
      "stack_core_free",
      "core",
      "ffn",
      "gemm",
  }
  assert all(m["min"] > 0 for m in result["ms"].values())
  assert result["gemm_gflop_per_s"] > 0
  assert result["core_gflop_per_layer"] > 0
  assert result["stack_core_free_over_stack"] == pytest.approx(
      result["ms"]["stack_core_free"]["min"] / result["ms"]["stack"]["min"]
  )
