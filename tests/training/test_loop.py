"""relational_jax.training.loop on a toy regression: batches, resume,
best-validation selection, a non-finite loss."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from relational_jax.training import config as config_lib
from relational_jax.training import loop as loop_lib
from relational_jax.parallel import mesh as mesh_lib
from relational_jax.training.errors import NonFiniteLossError

X = np.random.default_rng(0).normal(size=(10, 3)).astype(np.float32)
Y = X @ np.array([1.0, -2.0, 0.5], np.float32)


def _loss(params, batch, rng):
  del rng
  err = batch["x"] @ params["w"] * params["scale"] - batch["y"]
  return jnp.mean(err**2), -jnp.mean(err**2)


def _run(
    workdir, steps=6, stop_at_step=0, select_on="last", scale=1.0, val=None
):
  t = config_lib.ConfigDict(
      dict(
          steps=steps,
          eval_every=2,
          checkpoint_every=0,
          stop_at_step=stop_at_step,
          seed=3,
          select_on=select_on,
      )
  )
  mesh = mesh_lib.mesh_of_first(1)
  tx = optax.sgd(0.1)

  def init(key):
    params = {"w": jnp.zeros(3), "scale": jnp.asarray(scale, jnp.float32)}
    return loop_lib.train_state(params, tx, key)

  def batch_at(step):
    idx = loop_lib.epoch_indices(step, len(X), 4, t.seed)
    idx = np.resize(idx, 4)  # pad the short last batch by repeating
    return mesh_lib.shard_batch({"x": X[idx], "y": Y[idx]}, mesh)

  scores = iter(val or [])
  evaluate = (
      (lambda params: {"val_accuracy": next(scores)})
      if val
      else (lambda params: {})
  )
  return loop_lib.run(
      init=init,
      step_fn=loop_lib.make_train_step(_loss, tx, mesh),
      batch_at=batch_at,
      evaluate=evaluate,
      train_config=t,
      workdir=str(workdir),
      mesh=mesh,
      log=lambda m: None,
  )


def test_epoch_indices_cover_each_epoch_once_and_are_seeded():
  for epoch in range(3):
    seen = np.concatenate(
        [loop_lib.epoch_indices(epoch * 3 + i, 10, 4, 7) for i in range(3)]
    )
    assert sorted(seen) == list(range(10))
  assert len(loop_lib.epoch_indices(2, 10, 4, 7)) == 2  # the short batch
  np.testing.assert_array_equal(
      loop_lib.epoch_indices(4, 10, 4, 7), loop_lib.epoch_indices(4, 10, 4, 7)
  )
  assert not np.array_equal(
      loop_lib.epoch_indices(0, 10, 4, 7), loop_lib.epoch_indices(3, 10, 4, 7)
  )
  with pytest.raises(ValueError, match="batch_size"):
    loop_lib.epoch_indices(0, 10, 0, 7)


def test_resume_equals_an_uninterrupted_run(tmp_path):
  straight = _run(tmp_path / "a")
  first = _run(tmp_path / "b", stop_at_step=3)
  assert first.stopped and first.step == 3
  resumed = _run(tmp_path / "b")
  assert not resumed.stopped and resumed.step == 6
  np.testing.assert_array_equal(straight.params["w"], resumed.params["w"])
  assert [h["loss"] for h in straight.meta["history"]] == [
      h["loss"] for h in resumed.meta["history"]
  ]
  assert straight.num_params == 4


def test_val_selection_returns_the_best_checkpoint(tmp_path):
  done = _run(tmp_path, select_on="val", val=[0.2, 0.9, 0.5])
  assert done.selected == "val (step 4)"
  assert done.meta["best_val"] == 0.9
  last = _run(tmp_path / "last", select_on="last", val=[0.2, 0.9, 0.5])
  assert not np.array_equal(done.params["w"], last.params["w"])


def test_a_non_finite_loss_stops_and_keeps_the_checkpoint(tmp_path):
  with pytest.raises(NonFiniteLossError, match="step 2"):
    _run(tmp_path, scale=float("nan"))
