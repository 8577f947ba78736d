"""relational_jax.training.checkpoints: save/restore, keep, NaN refusal, and
surviving a corrupted newest checkpoint (fall back, report, never restart
from scratch silently)."""

import glob
import json
import logging
import os

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest

from relational_jax.training import checkpoints as ckpt_lib
from relational_jax.training import errors
from relational_jax.parallel import mesh as mesh_lib

# orbax leaves the reads of a failed restore as coroutines that report their
# own errors when collected: expected here, where restores are meant to fail.
pytestmark = pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnraisableExceptionWarning"
)


def _state(value):
  return {
      "params": {"w": jnp.full((2, 3), value, jnp.float32)},
      "step": jnp.asarray(3, jnp.int32),
      "rng": jax.random.PRNGKey(7),
  }


def test_checkpoints_roundtrip_keep_and_refuse_nan(tmp_path):
  mesh = mesh_lib.make_data_mesh(jax.devices()[:1])
  with ckpt_lib.RunCheckpoints(str(tmp_path / "ck")) as ckpts:
    assert ckpts.restore(ckpt_lib.abstract_like(_state(0.0))) is None
    for step in (1, 2, 3):
      ckpts.save(
          step,
          _state(float(step)),
          {"step": step, "stream": [step, 0]},
          best=step == 2,
      )
    assert ckpts.all_steps("latest") == [2, 3]  # keep 2
    assert ckpts.all_steps("best") == [2]
    with pytest.raises(
        ckpt_lib.NonFiniteStateError, match="step 4: the state contains NaN"
    ):
      ckpts.save(4, _state(float("nan")), {"step": 4})
    assert ckpts.all_steps("latest") == [2, 3]  # nothing deleted
    abstract = ckpt_lib.abstract_like(_state(0.0), mesh_lib.replicated(mesh))
    state, meta = ckpts.restore(abstract)
    assert meta == {"step": 3, "stream": [3, 0]}  # no integrity key
    assert ckpts.skipped == []
    np.testing.assert_array_equal(state["params"]["w"], np.full((2, 3), 3.0))
    np.testing.assert_array_equal(state["rng"], jax.random.PRNGKey(7))
    assert state["params"]["w"].sharding == mesh_lib.replicated(mesh)
    best, best_meta = ckpts.restore(abstract, "best")
    assert best_meta["step"] == 2 and float(best["params"]["w"][0, 0]) == 2.0
    with pytest.raises(
        ValueError,
        match=(
            r"Unknown checkpoint set 'worst'; valid choices are \['latest',"
            r" 'best'\]"
        ),
    ):
      ckpts.latest_step("worst")
  assert ckpt_lib.is_finite(_state(1.0)) and not ckpt_lib.is_finite(
      _state(float("inf"))
  )


# -- Corruption. ---------------------------------------------------------------


def _train_state(step):
  """A generic pytree state: distinct data per step."""
  rng = np.random.default_rng(step)
  return {
      "params": {
          "w": jnp.asarray(rng.normal(size=(32, 32)), jnp.float32),
          "b": jnp.asarray(rng.normal(size=(32,)), jnp.bfloat16),
      },
      "mask": jnp.asarray(rng.random(8) > 0.5),
      "step": jnp.asarray(step, jnp.int32),
      "rng": jax.random.PRNGKey(step),
  }


def _save_steps(directory, steps, best=()):
  with ckpt_lib.RunCheckpoints(directory) as ckpts:
    for step in steps:
      ckpts.save(
          step,
          _train_state(step),
          {"step": step, "stream": [0, step]},
          best=step in best,
      )


def _largest_array_file(step_dir):
  files = glob.glob(
      os.path.join(step_dir, "state", "**", "d", "*"), recursive=True
  )
  return max(files, key=os.path.getsize)


def _truncate_array(step_dir):
  # Every array data file cut to half, as by a write that stopped short (a
  # data file may hold bytes no longer referenced: cutting one file alone
  # need not damage the checkpoint).
  for path in glob.glob(
      os.path.join(step_dir, "state", "**", "d", "*"), recursive=True
  ):
    with open(path, "r+b") as f:
      f.truncate(os.path.getsize(path) // 2)


def _garbage_array(step_dir):
  path = _largest_array_file(step_dir)
  size = os.path.getsize(path)
  with open(path, "wb") as f:
    f.write(np.random.default_rng(0).bytes(size))


def _flip_array_bytes(step_dir):
  # orbax/TensorStore read this back without error (wrong values): only the
  # saved checksums catch it.
  path = _largest_array_file(step_dir)
  with open(path, "r+b") as f:
    f.seek(os.path.getsize(path) // 2)
    f.write(b"\x00\x01\x02\x03")


def _delete_meta(step_dir):
  os.remove(os.path.join(step_dir, "meta", "metadata"))


def _garbage_meta(step_dir):
  with open(os.path.join(step_dir, "meta", "metadata"), "w") as f:
    f.write('{"step": 2, "str')


def _edit_meta(step_dir):
  # Still valid JSON, a different data-stream position.
  path = os.path.join(step_dir, "meta", "metadata")
  with open(path) as f:
    record = json.load(f)
  record["stream"] = [0, 99]
  with open(path, "w") as f:
    json.dump(record, f)


def _empty_step_dir(step_dir):
  for path in sorted(
      glob.glob(os.path.join(step_dir, "**"), recursive=True), reverse=True
  ):
    if os.path.isfile(path):
      os.remove(path)


CORRUPTIONS = {
    "truncated_array": _truncate_array,
    "garbage_array": _garbage_array,
    "flipped_array_bytes": _flip_array_bytes,
    "deleted_metadata": _delete_meta,
    "garbage_metadata": _garbage_meta,
    "edited_metadata": _edit_meta,
    "emptied_step": _empty_step_dir,
}


def _assert_state(state, step):
  expected = _train_state(step)
  for a, b in zip(
      jax.tree_util.tree_leaves(state), jax.tree_util.tree_leaves(expected)
  ):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_saved_steps_reads_what_the_managers_see(tmp_path):
  """The file-system query (no manager, no barrier) agrees with the orbax
  managers, and skips an unfinished (temporary) step directory."""
  directory = str(tmp_path / "ck")
  assert ckpt_lib.saved_steps(directory) == []
  with ckpt_lib.RunCheckpoints(directory) as ckpts:
    for step in (1, 2, 3):
      ckpts.save(step, _state(float(step)), {"step": step}, best=step == 2)
    os.makedirs(os.path.join(directory, "latest", "4.orbax-checkpoint-tmp-1"))
    for which in ckpt_lib.WHICH:
      assert ckpt_lib.saved_steps(directory, which) == ckpts.all_steps(which)
  assert ckpt_lib.saved_steps(directory) == [2, 3]
  with pytest.raises(ValueError, match="'newest'"):
    ckpt_lib.saved_steps(directory, "newest")


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_corrupt_newest_checkpoint_falls_back_to_the_previous_one(
    tmp_path, caplog, corruption
):
  directory = str(tmp_path / "ck")
  _save_steps(directory, (1, 2, 3))
  newest = os.path.join(directory, "latest", "3")
  CORRUPTIONS[corruption](newest)
  abstract = ckpt_lib.abstract_like(_train_state(0))
  with caplog.at_level(logging.WARNING):
    with ckpt_lib.RunCheckpoints(directory) as ckpts:
      state, meta = ckpts.restore(abstract)
      # The previous good step, exactly; the bad one is reported by path.
      assert meta["step"] == 2 and meta["stream"] == [0, 2]
      _assert_state(state, 2)
      [skipped] = ckpts.skipped
      assert skipped["path"] == newest and skipped["step"] == 3
      assert meta[ckpt_lib.FALLBACKS_KEY] == [skipped]
      assert skipped["restored_instead"] == {"which": "latest", "step": 2}
      assert os.path.isdir(skipped["moved_to"]) and not os.path.exists(newest)
      assert ckpts.all_steps() == [2]
      # The run goes on: step 3 is saved afresh, and restores cleanly.
      ckpts.save(3, _train_state(3), dict(meta, step=3, stream=[0, 3]))
      state, meta = ckpts.restore(abstract)
      assert meta["step"] == 3 and ckpts.skipped == []
      _assert_state(state, 3)
      # The record of the fallback travels with the run.
      assert meta[ckpt_lib.FALLBACKS_KEY][0]["path"] == newest
  warnings = [
      r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
  ]
  assert any(newest in w and "restored latest step 2" in w for w in warnings)


def test_both_latest_corrupt_falls_back_to_best(tmp_path):
  directory = str(tmp_path / "ck")
  _save_steps(directory, (1, 2, 3), best=(1,))
  _truncate_array(os.path.join(directory, "latest", "3"))
  _delete_meta(os.path.join(directory, "latest", "2"))
  with ckpt_lib.RunCheckpoints(directory) as ckpts:
    state, meta = ckpts.restore(ckpt_lib.abstract_like(_train_state(0)))
    assert meta["step"] == 1
    _assert_state(state, 1)
    assert [(s["which"], s["step"]) for s in ckpts.skipped] == [
        ("latest", 3),
        ("latest", 2),
    ]
    assert ckpts.all_steps("latest") == [] and ckpts.all_steps("best") == [1]


def test_no_restorable_checkpoint_is_an_error_naming_the_paths(tmp_path):
  directory = str(tmp_path / "ck")
  _save_steps(directory, (1, 2), best=(2,))
  for which, step in (("latest", 1), ("latest", 2), ("best", 2)):
    _truncate_array(os.path.join(directory, which, str(step)))
  abstract = ckpt_lib.abstract_like(_train_state(0))
  with ckpt_lib.RunCheckpoints(directory) as ckpts:
    with pytest.raises(ckpt_lib.CorruptCheckpointError) as error:
      ckpts.restore(abstract)
    for which, step in (("latest", 2), ("latest", 1), ("best", 2)):
      assert os.path.join(directory, which, str(step)) in str(error.value)
    assert "Refusing to start from scratch" in str(error.value)
    # Nothing was moved: a rerun fails the same way instead of starting over.
    assert ckpts.all_steps("latest") == [1, 2]
    assert not os.path.exists(os.path.join(directory, "corrupt"))
    # A given step is restored or refused, never replaced by another.
    with pytest.raises(
        ckpt_lib.CorruptCheckpointError,
        match=r"latest/1: [A-Za-z]*(Error|Exception): ",
    ):
      ckpts.restore(abstract, step=1)


def test_a_checkpoint_without_its_integrity_record_is_refused(tmp_path):
  """A checkpoint of another version: refused naming the converter, and
  not moved aside."""
  directory = str(tmp_path / "ck")
  with ocp.CheckpointManager(
      os.path.join(directory, "latest"),
      options=ocp.CheckpointManagerOptions(
          create=True, enable_async_checkpointing=False
      ),
  ) as mgr:
    mgr.save(
        5,
        args=ocp.args.Composite(
            state=ocp.args.StandardSave(_train_state(5)),
            meta=ocp.args.JsonSave({"step": 5}),
        ),
    )
  with ckpt_lib.RunCheckpoints(directory) as ckpts:
    with pytest.raises(
        errors.OtherFormatError, match=r"no integrity record.*migrate_workdir"
    ):
      ckpts.restore(ckpt_lib.abstract_like(_train_state(0)))
  assert os.path.isdir(os.path.join(directory, "latest", "5"))


def test_state_checksums_see_values_positions_and_dtypes():
  state = _train_state(1)
  sums = ckpt_lib.state_checksums(state)
  assert set(sums) == {
      "['params']['w']",
      "['params']['b']",
      "['mask']",
      "['step']",
      "['rng']",
  }
  assert sums == ckpt_lib.state_checksums(_train_state(1))
  assert sums["['params']['b']"][0] == "bfloat16"
  w = np.asarray(state["params"]["w"])
  swapped = w.copy()
  swapped[0, 0], swapped[0, 1] = w[0, 1], w[0, 0]
  assert (
      ckpt_lib.state_checksums({"w": jnp.asarray(swapped)})["['w']"]
      != ckpt_lib.state_checksums({"w": jnp.asarray(w)})["['w']"]
  )
  typed = jax.random.key(3)
  assert ckpt_lib.state_checksums({"k": typed})["['k']"][1] == (
      ckpt_lib.state_checksums({"k": jax.random.key_data(typed)})["['k']"][1]
  )


def test_state_checksums_keep_their_values():
  """Saved integrity records hold these numbers: a run's checkpoints verify
  only while the hash of the same bits stays the same."""
  assert ckpt_lib.state_checksums({
      "w": jnp.arange(6, dtype=jnp.float32).reshape(2, 3),
      "b": jnp.asarray([True, False]),
      "h": jnp.arange(4, dtype=jnp.bfloat16),
  }) == {
      "['b']": ["bool", 3826800581],
      "['h']": ["bfloat16", 2600822682],
      "['w']": ["float32", 1642309620],
  }
