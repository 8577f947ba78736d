"""relational_jax.training.trainer on a toy regression: batches, exact
resume, best-validation selection, a non-finite loss, fetches, the record."""

import dataclasses
import os
import re
import subprocess

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from relational_jax.parallel import mesh as mesh_lib
from relational_jax.training import prng
from relational_jax.training import reporting
from relational_jax.training import trainer
from relational_jax.training.errors import NonFiniteLossError
from relational_jax.training.errors import UserError

X = np.random.default_rng(0).normal(size=(10, 3)).astype(np.float32)
Y = X @ np.array([1.0, -2.0, 0.5], np.float32)


def _loss(params, batch, rng):
  del rng
  err = batch["x"] @ params["w"] * params["scale"] - batch["y"]
  return jnp.mean(err**2), -jnp.mean(err**2)


def _task(scale=1.0, val=None, seed=3):
  mesh = mesh_lib.mesh_of_first(1)
  tx = optax.sgd(0.1)

  def init(key):
    params = {"w": jnp.zeros(3), "scale": jnp.asarray(scale, jnp.float32)}
    return trainer.train_state(params, tx, key)

  def batch_at(idx):
    idx = np.resize(idx, 4)  # pad the short last batch by repeating
    return mesh_lib.shard_batch({"x": X[idx], "y": Y[idx]}, mesh)

  scores = iter(val or [])
  return trainer.FunctionalTrainee(
      init=init,
      train_step=trainer.make_train_step(_loss, tx, mesh),
      stream=trainer.EpochStream(len(X), 4, seed, batch_at),
      evaluate=(
          (lambda params: {"val_accuracy": next(scores)})
          if val
          else (lambda params: {})
      ),
      mesh=mesh,
      seed=seed,
  )


def _fit(workdir, steps=6, stop_at_step=0, task=None, **loop):
  loop = trainer.LoopSettings(
      steps=steps,
      eval_every=2,
      stop_at_step=stop_at_step,
      progress=False,
      **loop,
  )
  return trainer.fit(task or _task(), loop, str(workdir), log=lambda m: None)


def test_epoch_indices_cover_each_epoch_once_and_are_seeded():
  for epoch in range(3):
    seen = np.concatenate(
        [trainer.epoch_indices(epoch * 3 + i, 10, 4, 7) for i in range(3)]
    )
    assert sorted(seen) == list(range(10))
  assert len(trainer.epoch_indices(2, 10, 4, 7)) == 2  # the short batch
  np.testing.assert_array_equal(
      trainer.epoch_indices(4, 10, 4, 7), trainer.epoch_indices(4, 10, 4, 7)
  )
  assert not np.array_equal(
      trainer.epoch_indices(0, 10, 4, 7), trainer.epoch_indices(3, 10, 4, 7)
  )
  with pytest.raises(ValueError, match="batch_size"):
    trainer.epoch_indices(0, 10, 0, 7)


def test_pad_indices_repeats_the_first_row_with_zero_weight():
  padded, weights = trainer.pad_indices([5, 2], 4)
  np.testing.assert_array_equal(padded, [5, 2, 5, 5])
  np.testing.assert_array_equal(weights, [1, 1, 0, 0])
  assert weights.dtype == np.float32
  full, ones = trainer.pad_indices(np.arange(3), 3)
  np.testing.assert_array_equal(full, [0, 1, 2])
  assert ones.sum() == 3
  for bad in ([], [0, 1, 2, 3, 4]):
    with pytest.raises(ValueError, match=f"1 to 4 rows, got {len(bad)}"):
      trainer.pad_indices(bad, 4)


def test_map_rows_calls_full_batches_and_returns_rows_in_order():
  calls = []

  def fn(idx):
    calls.append(list(idx))
    return np.stack([idx * 10, -idx], axis=1)  # 2 outputs per row.

  order = [4, 0, 3, 1, 2]
  out = trainer.map_rows(fn, 5, 2, order=order)
  np.testing.assert_array_equal(out[:, 0], np.arange(5) * 10)
  np.testing.assert_array_equal(out[:, 1], -np.arange(5))
  assert calls == [[4, 0], [3, 1], [2, 2]]  # Every call has 2 rows.
  np.testing.assert_array_equal(
      trainer.map_rows(lambda idx: idx + 1, 3, 8), [1, 2, 3]
  )
  with pytest.raises(ValueError, match="order has 2 rows, expected 3"):
    trainer.map_rows(fn, 3, 2, order=[0, 1])


def test_a_metric_named_loss_is_refused():
  mesh = mesh_lib.mesh_of_first(1)
  for name in ("loss", "grad_norm"):
    with pytest.raises(ValueError, match=f"metric='{name}' would overwrite"):
      trainer.make_train_step(_loss, optax.sgd(0.1), mesh, metric=name)


def test_an_evaluation_without_the_score_key_is_an_error(tmp_path):
  task = _task()
  task._evaluate = lambda params: {"val_acc": 0.5}  # Not 'val_accuracy'.
  with pytest.raises(ValueError, match=r"returned \['val_acc'\], without"):
    _fit(tmp_path, task=task)
  task = _task()
  task._evaluate = lambda params: {"val_acc": 0.5}
  task.score_key = None  # No selection score: the last state.
  assert _fit(tmp_path / "none", task=task).best["score"] is None


def test_the_step_names_its_metric_and_keys_dropout_by_the_step():
  mesh, tx = mesh_lib.mesh_of_first(1), optax.sgd(0.1)
  key = np.asarray(jax.random.PRNGKey(5))  # A copy: the state is donated.

  def loss(params, batch, rng):  # -> (loss, a uniform draw of the key)
    return jnp.mean(batch["x"] @ params["w"]), jax.random.uniform(rng, ())

  batch = mesh_lib.shard_batch({"x": X[:4]}, mesh)
  draws = {}
  for name in prng.DROPOUT_PRNGS:
    step = trainer.make_train_step(
        loss, tx, mesh, metric="draw", dropout_prng=name
    )
    state = trainer.train_state({"w": jnp.zeros(3)}, tx, jnp.asarray(key))
    state, first = step(state, batch, 0)
    state, second = step(state, batch, 1)
    assert set(first) == {"loss", "draw", "grad_norm"}
    np.testing.assert_array_equal(state["rng"], key)  # The run's key stays.
    draws[name] = (float(first["draw"]), float(second["draw"]))
  assert draws["threefry"] == tuple(
      float(jax.random.uniform(jax.random.fold_in(key, i), ())) for i in (0, 1)
  )
  assert draws["counter_hash"] != draws["threefry"]
  with pytest.raises(ValueError, match="dropout_prng 'fast'"):
    trainer.make_train_step(loss, tx, mesh, dropout_prng="fast")


def test_resume_equals_an_uninterrupted_run(tmp_path):
  straight = _fit(tmp_path / "a")
  first = _fit(tmp_path / "b", stop_at_step=3)
  assert not first.complete and first.step == 3
  resumed = _fit(tmp_path / "b")
  assert resumed.complete and resumed.step == 6
  np.testing.assert_array_equal(
      straight.state["params"]["w"], resumed.state["params"]["w"]
  )
  assert straight.losses == resumed.losses and len(straight.losses) == 6
  assert straight.history == resumed.history
  assert straight.num_params == 4


def test_a_checkpoint_past_the_steps_is_refused(tmp_path):
  """A run resumed with fewer steps than its checkpoint has would record
  the old run under the new count: refused, the checkpoints kept."""
  _fit(tmp_path, steps=6)
  before = sorted(os.listdir(tmp_path))
  with pytest.raises(
      UserError, match=r"at step 6, past train.steps=4: rerun with"
  ):
    _fit(tmp_path, steps=4)
  assert sorted(os.listdir(tmp_path)) == before
  assert _fit(tmp_path, steps=6).step == 6


def test_the_record_says_which_steps_ran_in_which_sitting(tmp_path):
  _fit(tmp_path, stop_at_step=3)
  resumed = _fit(tmp_path)
  assert [(s["from_step"], s["to_step"]) for s in resumed.sittings] == [
      (0, 3),
      (3, 6),
  ]
  for sitting in resumed.sittings:
    assert sitting["seconds"] >= 0 and sitting["cpu_seconds"] >= 0
    assert sitting["steps_per_s"] == pytest.approx(
        (sitting["to_step"] - sitting["from_step"]) / sitting["seconds"]
    )
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", sitting["started"])
    # The code that ran it: this checkout's commit (None outside git).
    assert sitting["code"] == reporting.code_version()
    assert sitting["host"] == reporting.host()
    assert sitting["host"]["cpus"] >= 1
    assert sitting["host"]["versions"]["jax"] == jax.__version__
    assert sitting["host"]["cpu"]
  head = subprocess.run(
      ["git", "-C", os.path.dirname(__file__), "rev-parse", "HEAD"],
      capture_output=True,
      text=True,
  )
  if head.returncode == 0:
    assert re.fullmatch(r"[0-9a-f]{12}(\+dirty)?", reporting.code_version())
    assert head.stdout.startswith(reporting.code_version()[:12])
  else:
    assert reporting.code_version() is None
  assert sum(s["seconds"] for s in resumed.sittings) == pytest.approx(
      resumed.train_seconds
  )
  # Rerunning a finished run trains nothing and adds no sitting.
  assert _fit(tmp_path).sittings == resumed.sittings


def test_the_record_has_the_same_keys_for_every_task(tmp_path):
  record = _fit(tmp_path).to_json()
  assert set(record) == {
      "steps",
      "complete",
      "num_params",
      "train_seconds",
      "sittings",
      "losses",
      "history",
      "best",
      "checkpoint_fallbacks",
  }
  # History: the mean loss since the previous evaluation and the other
  # per-step metrics as train_<name>.
  first = record["history"][0]
  assert first["step"] == 2
  assert first["loss"] == pytest.approx(np.mean(record["losses"][:2]))
  assert {"train_accuracy", "train_grad_norm"} <= set(first)


def test_fetching_rarely_changes_nothing(tmp_path):
  every = _fit(tmp_path / "a", fetch_every=1)
  rarely = _fit(tmp_path / "b", fetch_every=100)
  assert every.losses == rarely.losses and every.history == rarely.history


def test_val_selection_returns_the_best_checkpoint(tmp_path):
  task = _task(val=[0.2, 0.9, 0.5])
  done = _fit(tmp_path, task=task)
  assert done.best["step"] == 4 and done.best["score"] == 0.9
  state, selected = trainer.selected_state(
      done, task.abstract_state(), str(tmp_path), "val"
  )
  assert selected == "val (step 4)"
  assert not np.array_equal(state["params"]["w"], done.state["params"]["w"])
  last, selected = trainer.selected_state(
      done, task.abstract_state(), str(tmp_path), "last"
  )
  assert selected == "last" and last is done.state


def test_evaluate_best_scores_new_bests_and_the_last_step_across_a_resume(
    tmp_path,
):
  val = {2: 0.2, 4: 0.9, 6: 0.5, 8: 0.95, 10: 0.95, 12: 0.1}
  tested = []

  def task():
    t = _task()
    t.evaluate = lambda state, step: ({"val": val[step]}, val[step])
    t.evaluate_best = lambda state, step: tested.append(step) or {"test": step}
    return t

  assert not _fit(tmp_path, steps=12, stop_at_step=6, task=task()).complete
  done = _fit(tmp_path, steps=12, task=task())
  # New bests (the first of equal scores) and the last step only; the best
  # seen before the resume counts after it.
  assert tested == [2, 4, 8, 12]
  assert [h.get("test") for h in done.history] == [2, 4, None, 8, None, 12]
  assert done.best["step"] == 8 and done.best["entry"] == {
      "val": 0.95,
      "test": 8,
  }


def test_a_resume_that_changes_the_selection_chooses_the_best_anew(tmp_path):
  def task(selection, scores):
    t = _task()
    t.selection = selection
    t.evaluate = lambda state, step: ({"val": step}, scores.get(step))
    return t

  # Selected on nothing (no scores: every evaluation is the best), then on
  # scores: neither a None best compared with a number nor an old score
  # compared with a new one.
  _fit(tmp_path, 12, 4, task("last", {}))
  logs = []
  loop = trainer.LoopSettings(12, 2, stop_at_step=8, progress=False)
  done = trainer.fit(
      task("val", {6: 0.4, 8: 0.3}), loop, str(tmp_path), logs.append
  )
  assert done.best == {
      "step": 6,
      "score": 0.4,
      "entry": {"val": 6},
      "selection": "val",
  }
  assert any(
      "selected on 'last', this sitting selects on 'val'" in m for m in logs
  )
  loop = dataclasses.replace(loop, stop_at_step=0)
  done = trainer.fit(
      task("gen", {10: 0.1, 12: 0.2}), loop, str(tmp_path), print
  )
  assert (done.best["step"], done.best["selection"]) == (12, "gen")
  assert _fit(tmp_path / "b", 4).best["selection"] == ""  # Without one.


def test_a_non_finite_loss_stops_and_keeps_the_checkpoint(tmp_path):
  with pytest.raises(NonFiniteLossError, match="at step 1;.*no checkpoint"):
    _fit(tmp_path / "a", task=_task(scale=float("nan")))
  # A NaN batch at step 3: the step-2 checkpoint is named and kept, and
  # nothing of the failed sitting is saved.
  task = _task()
  batch_at, calls = task.stream.batch_at, []

  def poisoned(idx):
    calls.append(idx)
    batch = batch_at(idx)
    return dict(batch, x=batch["x"] * np.nan) if len(calls) == 3 else batch

  task.stream.batch_at = poisoned
  with pytest.raises(
      NonFiniteLossError, match=r"at step 3;.*last good checkpoint \(step 2\)"
  ):
    _fit(tmp_path / "b", task=task)
  state, record = trainer.restore(task.abstract_state(), str(tmp_path / "b"))
  assert record["step"] == 2
  assert all(
      np.all(np.isfinite(x)) for x in jax.tree_util.tree_leaves(state["params"])
  )


def test_bad_loop_settings_are_named():
  with pytest.raises(ValueError, match="eval_every must be an int >= 1, got 0"):
    trainer.LoopSettings(steps=3, eval_every=0)
  with pytest.raises(ValueError, match="steps must be an int >= 1, got '10'"):
    trainer.LoopSettings(steps="10", eval_every=1)
  with pytest.raises(ValueError, match="steps must be an int >= 1, got 2.5"):
    trainer.LoopSettings(steps=2.5, eval_every=1)
  with pytest.raises(
      ValueError, match="LoopSettings.progress must be a bool, got 'no'"
  ):
    trainer.LoopSettings(steps=3, eval_every=1, progress="no")
  assert trainer.LoopSettings(steps=np.int64(3), eval_every=1).steps == 3
  with pytest.raises(
      ValueError, match=r"stop_at_step=4 is past steps=3: the run would never"
  ):
    trainer.LoopSettings(steps=3, eval_every=1, stop_at_step=4)
  assert (
      trainer.LoopSettings(steps=3, eval_every=1, stop_at_step=3).stop_at_step
      == 3
  )
  with pytest.raises(ValueError, match="'newest'.*'latest', 'best'"):
    trainer.restore(None, "/nonexistent", "newest")
  with pytest.raises(ValueError, match="keep_every must be an int >= 0"):
    trainer.LoopSettings(steps=3, eval_every=1, keep_every=-1)
  with pytest.raises(
      ValueError,
      match=r"keep_every=3 is a multiple of neither eval_every=2 nor "
      r"checkpoint_every=0: the steps it keeps would never be saved",
  ):
    trainer.LoopSettings(steps=6, eval_every=2, keep_every=3)
  # Saved: the evaluations (every 2) and the multiples of 3.
  for keep in (2, 3, 4, 6):
    assert trainer.LoopSettings(
        steps=12, eval_every=2, checkpoint_every=3, keep_every=keep
    )


def test_keep_every_keeps_those_steps_to_restore_and_guards_them(tmp_path):
  ckpt = str(tmp_path)  # _fit checkpoints into the directory it is given.
  straight = _fit(tmp_path, steps=10, keep_every=4)
  assert trainer.ckpt_lib.saved_steps(ckpt) == [4, 8, 10]  # Saved every 2.
  task = _task()
  state_4, record_4 = trainer.restore(task.abstract_state(), ckpt, step=4)
  assert int(state_4["step"]) == 4 and record_4["step"] == 4
  newest, _ = trainer.restore(task.abstract_state(), ckpt)
  np.testing.assert_array_equal(
      newest["params"]["w"], straight.state["params"]["w"]
  )
  with pytest.raises(
      UserError, match=r"no latest checkpoint at step 6 .* \[4, 8, 10\]"
  ):
    trainer.restore(task.abstract_state(), ckpt, step=6)
  # A resume whose keep_every would delete kept steps at its next save.
  for keep, lost in ((0, "[4, 8]"), (8, "[4]"), (6, "[4, 8]")):
    with pytest.raises(
        UserError,
        match=re.escape(
            f"train.keep_every={keep} would delete the checkpoints at steps "
            f"{lost} that train.keep_every=4 kept"
        ),
    ):
      _fit(tmp_path, steps=12, keep_every=keep)
  assert trainer.ckpt_lib.saved_steps(ckpt) == [4, 8, 10]
  _fit(tmp_path, steps=12, keep_every=2)  # Keeps them (and 10, 12).
  assert trainer.ckpt_lib.saved_steps(ckpt) == [4, 8, 10, 12]
  # The kept step can be the second newest: [8, 10] after keep_every=8.
  other = tmp_path / "other"
  _fit(other, steps=10, keep_every=8)
  assert trainer.ckpt_lib.saved_steps(str(other)) == [8, 10]
  with pytest.raises(UserError, match=r"at steps \[8\] that"):
    _fit(other, steps=12)
  # A run that never kept a step resumes with any keep_every.
  plain = tmp_path / "plain"
  _fit(plain, steps=6)
  _fit(plain, steps=8, keep_every=4)
  assert trainer.ckpt_lib.saved_steps(str(plain)) == [4, 6, 8]


def _events(directory):
  """(step, tag, value) of every scalar in TensorBoard event files: their
  TFRecord framing (length, CRC, event proto, CRC) read directly."""
  from tensorboardX.proto import event_pb2  # pylint: disable=g-import-not-at-top

  out = []
  for path in sorted(directory.iterdir()):
    data, i = path.read_bytes(), 0
    while i < len(data):
      (length,) = np.frombuffer(data[i : i + 8], "<u8")
      event = event_pb2.Event.FromString(data[i + 12 : i + 12 + int(length)])
      i += 12 + int(length) + 4
      out += [(event.step, v.tag, v.simple_value) for v in event.summary.value]
  return out


def test_metrics_are_written_as_the_run_goes_and_read_back(tmp_path):
  from relational_jax.training import metrics_log  # pylint: disable=g-import-not-at-top

  # Stopped at step 3, then resumed: every step once, in order.
  val = [0.5, 0.25, 0.75]
  _fit(tmp_path, 6, 3, _task(val=val), tensorboard=True)
  done = _fit(tmp_path, 6, task=_task(val=val[1:]), tensorboard=True)
  records = metrics_log.read(str(tmp_path))
  train = [r for r in records if r["kind"] == "train"]
  evals = [r for r in records if r["kind"] == "eval"]
  assert [r["step"] for r in train] == [1, 2, 3, 4, 5, 6]
  np.testing.assert_allclose([r["loss"] for r in train], done.losses)
  assert [r["step"] for r in evals] == [2, 4, 6]
  for r, h in zip(evals, done.history):
    assert r["loss"] == pytest.approx(h["loss"])
    assert r["val_accuracy"] == pytest.approx(h["val_accuracy"])
  events = _events(tmp_path / metrics_log.TENSORBOARD_DIR)
  tb_loss = {s: v for s, tag, v in events if tag == "train/loss"}
  assert sorted(tb_loss) == [1, 2, 3, 4, 5, 6]
  np.testing.assert_allclose(
      [tb_loss[s] for s in range(1, 7)], done.losses, rtol=1e-6
  )
  assert sorted(s for s, tag, _ in events if tag == "eval/val_accuracy") == [
      2,
      4,
      6,
  ]


def test_a_resume_drops_metrics_past_its_checkpoint(tmp_path):
  from relational_jax.training import metrics_log  # pylint: disable=g-import-not-at-top

  _fit(tmp_path, steps=6, stop_at_step=4)
  with open(tmp_path / metrics_log.FILENAME, "a") as f:  # An unsaved step 5.
    f.write('{"step": 5, "kind": "train", "loss": 9.0}\n')
  _fit(tmp_path, steps=6)
  steps = [r["step"] for r in metrics_log.read(str(tmp_path))]
  assert steps == [1, 2, 2, 3, 4, 4, 5, 6, 6]  # train, and eval every 2.
  assert 9.0 not in [r.get("loss") for r in metrics_log.read(str(tmp_path))]


def test_a_resume_after_a_kill_mid_line_drops_the_cut_line(tmp_path):
  from relational_jax.training import metrics_log  # pylint: disable=g-import-not-at-top

  _fit(tmp_path, steps=6, stop_at_step=4)
  path = tmp_path / metrics_log.FILENAME
  with open(path, "a") as f:  # Killed while writing step 5's line.
    f.write('{"step": 5, "kind": "train", "lo')
  assert [r["step"] for r in metrics_log.read(str(tmp_path))][-1] == 4
  _fit(tmp_path, steps=6)
  steps = [r["step"] for r in metrics_log.read(str(tmp_path))]
  assert steps == [1, 2, 2, 3, 4, 4, 5, 6, 6]
  # A bad line before the last is no cut line: named, not dropped.
  lines = path.read_text().splitlines(keepends=True)
  path.write_text("".join(lines[:3] + ['{"step": 3,\n'] + lines[3:]))
  with pytest.raises(ValueError, match=r"metrics.jsonl, line 4: not a JSON"):
    metrics_log.read(str(tmp_path))
