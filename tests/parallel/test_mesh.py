"""relational_jax.training: the data mesh (1 and 4 CPU devices); checkpoints
are tested in test_checkpoints.py."""

import json
import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from relational_jax.parallel import mesh as mesh_lib

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)


def test_mesh_over_all_devices_and_shardings():
  mesh = mesh_lib.make_data_mesh()
  assert mesh.axis_names == ("data",)
  assert mesh_lib.num_data_shards(mesh) == jax.device_count()
  assert mesh_lib.replicated(mesh).spec == P()
  assert mesh_lib.batch_sharded(mesh).spec == P("data")
  batch = {"x": np.ones((4, 3), np.float32), "y": np.arange(4)}
  sharded = mesh_lib.shard_batch(batch, mesh)
  assert sharded["x"].sharding == mesh_lib.batch_sharded(mesh)
  np.testing.assert_array_equal(sharded["y"], np.arange(4))
  one = mesh_lib.make_data_mesh(jax.devices()[:1])
  assert mesh_lib.num_data_shards(one) == 1


def test_batch_errors_name_the_numbers():
  with pytest.raises(
      ValueError,
      match=r"global batch size 6 is not divisible by the number of devices 4",
  ):
    mesh_lib.check_divisible(6, 4)
  mesh_lib.check_divisible(8, 4)
  mesh = mesh_lib.make_data_mesh(jax.devices()[:1])
  with pytest.raises(ValueError, match=r"disagree on the batch size: \[2, 3\]"):
    mesh_lib.shard_batch({"a": np.zeros((2,)), "b": np.zeros((3,))}, mesh)
  with pytest.raises(ValueError, match="scalar"):
    mesh_lib.shard_batch({"a": np.float32(1.0)}, mesh)
  with pytest.raises(ValueError, match="at least one device"):
    mesh_lib.make_data_mesh([])


def test_maybe_initialize_distributed(monkeypatch):
  calls = []
  monkeypatch.setattr(
      jax.distributed, "initialize", lambda **kw: calls.append(kw)
  )
  assert mesh_lib.maybe_initialize_distributed(False) is False and not calls
  assert mesh_lib.maybe_initialize_distributed(True, num_processes=1) is True
  assert calls == [{"num_processes": 1}]


# A least-squares step under jit with NamedShardings and donation, run on a
# 4-device mesh and on a 1-device mesh in one process with 4 CPU devices.
_FOUR_DEVICES = textwrap.dedent("""
  import json
  import jax, jax.numpy as jnp, numpy as np
  from relational_jax.parallel import mesh as mesh_lib

  def run(mesh):
    rep, bsh = mesh_lib.replicated(mesh), mesh_lib.batch_sharded(mesh)
    def step(state, batch):
      def loss_fn(w):
        return jnp.mean((batch["x"] @ w - batch["y"]) ** 2)
      loss, g = jax.value_and_grad(loss_fn)(state["w"])
      return {"w": state["w"] - 0.1 * g}, loss
    step = jax.jit(step, in_shardings=(rep, bsh), out_shardings=(rep, rep),
                   donate_argnums=0)
    state = mesh_lib.replicate({"w": jnp.zeros((3,))}, mesh)
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(3):
      batch = mesh_lib.shard_batch(
          {"x": rng.normal(size=(8, 3)).astype(np.float32),
           "y": rng.normal(size=(8,)).astype(np.float32)}, mesh)
      state, loss = step(state, batch)
      losses.append(float(loss))
    return losses, np.asarray(state["w"]).tolist(), len(batch["x"].sharding.device_set)

  four = run(mesh_lib.make_data_mesh())
  one = run(mesh_lib.make_data_mesh(jax.devices()[:1]))
  try:
    mesh_lib.shard_batch({"x": np.zeros((6, 3))}, mesh_lib.make_data_mesh())
    error = None
  except ValueError as e:
    error = str(e)
  print("RESULT " + json.dumps({"n": jax.device_count(), "four": four, "one": one, "error": error}))
""")


def test_four_devices_match_one_device():
  env = dict(os.environ)
  env["XLA_FLAGS"] = (
      env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
  ).strip()
  env["JAX_PLATFORMS"] = "cpu"
  proc = subprocess.run(
      [sys.executable, "-c", _FOUR_DEVICES],
      cwd=REPO,
      env=env,
      capture_output=True,
      text=True,
      timeout=300,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1]
  out = json.loads(line[len("RESULT ") :])
  assert out["n"] == 4
  (losses4, w4, shards4), (losses1, w1, shards1) = out["four"], out["one"]
  assert (shards4, shards1) == (4, 1)
  np.testing.assert_allclose(losses4, losses1, rtol=1e-5)
  np.testing.assert_allclose(w4, w1, rtol=1e-5, atol=1e-6)
  assert (
      "global batch size 6 is not divisible by the number of devices 4"
      in out["error"]
  )


def test_process_rows_and_shard_process_batch_in_one_process():
  # One process holds every row; a share of the wrong size is refused.
  mesh = mesh_lib.make_data_mesh()
  assert mesh_lib.process_rows(8, mesh) == slice(0, 8)
  hints = np.arange(24.0).reshape(3, 8)  # time-major: batch on axis 1
  sharded = mesh_lib.shard_process_batch({"h": hints}, mesh, 8, batch_axis=1)
  assert sharded["h"].sharding.spec == P(None, "data")
  np.testing.assert_array_equal(sharded["h"], hints)
  np.testing.assert_array_equal(
      mesh_lib.take_rows(hints, slice(2, 4), batch_axis=1), hints[:, 2:4]
  )
  with pytest.raises(
      ValueError,
      match=r"must give its 8 rows \(0:8\) of the " r"global batch of 8, got 4",
  ):
    mesh_lib.shard_process_batch({"x": np.zeros((4, 2))}, mesh, 8)


def test_distributed_flags(monkeypatch):
  from absl import flags  # pylint: disable=g-import-not-at-top
  from relational_jax.parallel import distributed  # pylint: disable=g-import-not-at-top

  calls = []
  monkeypatch.setattr(
      jax.distributed, "initialize", lambda **kw: calls.append(kw)
  )

  def parsed(*argv):
    values = flags.FlagValues()
    distributed.define_flags(values)
    values(["prog", *argv])
    return values

  assert distributed.initialize_from_flags(parsed()) is False
  with pytest.raises(
      ValueError,
      match="--coordinator_address, --process_id given without --distributed",
  ):
    distributed.initialize_from_flags(
        parsed("--coordinator_address=h:1", "--process_id=0")
    )
  with pytest.raises(
      ValueError, match="--process_id=2 must be below --num_processes=2"
  ):
    distributed.initialize_from_flags(
        parsed("--distributed", "--num_processes=2", "--process_id=2")
    )
  assert not calls
  assert distributed.initialize_from_flags(
      parsed(
          "--distributed",
          "--coordinator_address=10.0.0.1:1234",
          "--num_processes=2",
          "--process_id=1",
      )
  )
  assert distributed.initialize_from_flags(parsed("--distributed"))  # env
  assert calls == [
      {
          "coordinator_address": "10.0.0.1:1234",
          "num_processes": 2,
          "process_id": 1,
      },
      {},
  ]
  assert distributed.is_primary()
  distributed.barrier("one process: returns at once")
