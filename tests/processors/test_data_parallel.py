"""CarryModel on a 4-device CPU mesh equals one device with the same global batch."""

import inspect
import os
import subprocess
import sys
import textwrap

import jax
import pytest

import processors
from relational_jax.parallel import mesh as mesh_lib

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)

_SCRIPT = textwrap.dedent("""
    import jax, numpy as np
    assert jax.device_count() == 4, jax.devices()
    import processors
    from relational_jax.training.clrs import data as clrs_data
    from relational_jax.parallel import mesh as mesh_lib

    stream = clrs_data.TrainStream("bellman_ford", [5], batch_size=8, seed=0)
    batches = [next(stream) for _ in range(2)]
    factory = processors.get_processor_factory(
        "rt", use_ln=True, nb_triplet_fts=4, nb_heads=2, num_layers=1,
        head_dim=4, node_ffn_dim=4, edge_msg_dim=4, edge_ffn_dim=4)

    def run(devices):
      model = processors.CarryModel(
          stream.spec, batches[0], factory, hidden_dim=8, encode_hints=True,
          decode_hints=True, learning_rate=1e-2, ptr_from_edges=True,
          mesh=mesh_lib.make_data_mesh(devices))
      model.init(batches[0].features, seed=0)
      losses = [float(model.feedback(jax.random.PRNGKey(i), b)) for i, b in enumerate(batches)]
      return model, losses

    one, losses1 = run(jax.devices()[:1])
    four, losses4 = run(jax.devices())
    assert four.num_devices == 4 and one.num_devices == 1
    np.testing.assert_allclose(losses4, losses1, rtol=1e-4)
    for module, leaves in one.params.items():
      for name, b in leaves.items():
        if "ptr_from_edges" in module and name == "b":
          # The edge pointer decoder's bias shifts a whole row of logits:
          # the softmax ignores it, its gradient is rounding noise, which
          # Adam scales up to lr-sized steps; it differs by design.
          continue
        np.testing.assert_allclose(four.params[module][name], b, rtol=1e-4,
                                   atol=1e-5, err_msg=module + "/" + name)
    sharding = jax.tree_util.tree_leaves(four.state()["params"])[0].sharding
    assert sharding.is_fully_replicated
    odd = clrs_data.TrainStream("bellman_ford", [5], batch_size=6, seed=0)
    try:
      four.feedback(jax.random.PRNGKey(0), next(odd))
      raise SystemExit("expected a divisibility error")
    except ValueError as e:
      assert "6" in str(e) and "4" in str(e), e
    print("DATA_PARALLEL_OK", losses1, losses4)
""")


def test_carry_model_takes_a_data_mesh():
  """The seam the 4-device run below drives, in-process on one device
  (this module's fast-tier test)."""
  assert "mesh" in inspect.signature(processors.CarryModel).parameters
  mesh = mesh_lib.make_data_mesh(jax.devices()[:1])
  assert mesh_lib.num_data_shards(mesh) == 1


@pytest.mark.slow
def test_four_devices_equal_one_device():
  flags = (
      os.environ.get("XLA_FLAGS", "")
      + " --xla_force_host_platform_device_count=4"
  )
  env = dict(os.environ, XLA_FLAGS=flags.strip(), JAX_PLATFORMS="cpu")
  proc = subprocess.run(
      [sys.executable, "-c", _SCRIPT],
      cwd=REPO,
      env=env,
      capture_output=True,
      text=True,
      timeout=900,
  )
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
  assert "DATA_PARALLEL_OK" in proc.stdout
