"""Work directories saved by earlier versions still resume."""

import os

import jax.numpy as jnp
import numpy as np
import pytest

from relational_jax.data import paths as data_paths
from relational_jax.training import checkpoints as ckpt_lib
from relational_jax.training import compat
from relational_jax.training import config as config_lib
from relational_jax.training import optim
from relational_jax.training import reporting
from relational_jax.training import seq2seq
from relational_jax.training import trainer
from relational_jax.training.seq2seq import config as seq2seq_config
from tests.training.seq2seq.common import tiny as seq2seq_tiny


def test_old_default_data_dirs_read_as_the_shipped_ones():
  old_root = os.path.join("/somewhere", "main", "..", "shared", "data")
  for old, shipped in (
      (old_root, data_paths.OFFICIAL_DIR),
      (os.path.join(old_root, "cogs"), data_paths.COGS_DIR),
      (
          os.path.join(old_root, "clutrr", "gen_train23_test2to10"),
          data_paths.CLUTRR_K23_DIR,
      ),
  ):
    saved = {"data": {"data_dir": os.path.normpath(old)}, "seed": 1}
    upgraded = compat.upgrade_saved(saved)
    assert upgraded == {"data": {"data_dir": shipped}, "seed": 1}
    assert saved["data"]["data_dir"] == os.path.normpath(old)  # A copy.
  # Any other directory is the user's own data: kept.
  for other in ("/data/mine", "/x/shared/data/not_shipped"):
    saved = {"data": {"data_dir": other}}
    assert compat.upgrade_saved(saved) == saved


def test_a_seq2seq_run_saved_with_the_old_default_resumes():
  config = seq2seq_config.default_config()
  saved = config_lib.to_dict(config)
  saved["data"]["data_dir"] = "/work/shared/data"  # The old default.
  assert not config_lib.resume_conflicts(saved, config_lib.to_dict(config))
  saved["data"]["data_dir"] = "/data/mine"
  assert list(
      config_lib.resume_conflicts(saved, config_lib.to_dict(config))
  ) == ["data.data_dir"]


def test_clrs_records_and_optimiser_states_of_earlier_versions():
  from relational_jax.training.clrs import config as clrs_config  # pylint: disable=g-import-not-at-top

  old = {"protocol": {"train_steps": 9, "batch_size": 2, "test_lengths": [5]}}
  old["model"] = {"learning_rate": 0.1, "grad_clip_max_norm": 0.0}
  new = compat.upgrade_clrs(old)
  assert new["train"] == {
      "steps": 9,
      "batch_size": 2,
      "learning_rate": 0.1,
      "clip": 0.0,
  }
  assert new["protocol"] == {"test_lengths": [5]} and new["model"] == {}
  assert old["protocol"]["train_steps"] == 9  # the saved record is kept

  train = clrs_config.default_config().train
  stock = compat.stock_clrs_optimizer(train)  # clip 1.0: clip, Adam, scale
  params = {"w": np.ones(3, np.float32)}
  today = optim.make_optimizer(train)
  g = {"w": np.asarray([0.5, -1.0, 2.0], np.float32)}
  s_old, s_new = stock.init(params), today.init(params)
  for _ in range(3):  # the same updates, step for step
    u_old, s_old = stock.update(g, s_old, params)
    u_new, s_new = today.update(g, s_new, params)
    np.testing.assert_array_equal(u_old["w"], u_new["w"])
  upgraded = compat.upgrade_stock_opt_state(s_old, today.init(params))
  u_old, _ = stock.update(g, s_old, params)
  u_up, _ = today.update(g, upgraded, params)
  np.testing.assert_array_equal(u_old["w"], u_up["w"])
  train.schedule = "linear"
  assert compat.stock_clrs_optimizer(train) is None


# The position of seq2seq's former batch stream: epoch 1, two batches in.
_OLD_STREAM = {
    "seed": 3,
    "epoch": 1,
    "index": 8,
    "num_examples": 10,
    "batch_size": 4,
}


def test_checkpoint_records_read_in_todays_layout():
  # seq2seq's former stream position becomes the saved step.
  old = {"step": 4, "stream": dict(_OLD_STREAM), "losses": [1.0] * 4}
  assert compat.upgrade_record(old, state=None) == dict(old, stream={"step": 4})
  assert old["stream"] == _OLD_STREAM  # A copy.
  # The graph tasks' former loop: no step, stream or losses.
  graph = {"history": [{"step": 2, "val_accuracy": 0.5}]}
  assert compat.upgrade_record(graph, {"step": np.int32(2)}) == {
      "history": graph["history"],
      "step": 2,
      "stream": {"step": 2},
      "losses": [],
      "best": {"step": 2, "score": 0.5},
  }
  # Today's records, and other streams' positions, are kept.
  for meta in (
      {"step": 4, "stream": {"step": 4}},
      {"step": 4, "stream": {"index": 8, "sampler_rngs": []}},  # CLRS
  ):
    assert compat.upgrade_record(meta, state=None) == meta


@pytest.mark.slow
def test_a_seq2seq_work_dir_of_the_former_stream_resumes(tmp_path):
  """A work directory as the former seq2seq code left it at step 2 (its
  stream position {seed, epoch, index, ...}, built here by hand) resumes
  at step 2 and trains the new stream's batches 3 and 4."""
  config = seq2seq_tiny()
  workdir = str(tmp_path / "old")
  exp = seq2seq.Experiment(config)
  t = config.train
  state = exp.init_state()
  state["step"] = jnp.asarray(2, jnp.int32)  # As trained 2 steps.
  old_record = {
      "step": 2,
      "stream": {
          "seed": t.seed,
          "epoch": 0,
          "index": 2 * t.batch_size,
          "num_examples": len(exp.train_set),
          "batch_size": t.batch_size,
      },
      "losses": [3.5, 3.25],
      "history": [],
      "best": None,
      "train_seconds": 1.0,
      "sittings": [],
      "since_eval": {"loss": [3.5, 3.25]},
  }
  os.makedirs(workdir)
  reporting.write_json(
      os.path.join(workdir, "config.json"), config_lib.to_dict(config)
  )
  exp.src_vocab.save(os.path.join(workdir, "vocab_src.json"))
  exp.tgt_vocab.save(os.path.join(workdir, "vocab_tgt.json"))
  with ckpt_lib.RunCheckpoints(trainer.checkpoint_dir(workdir)) as ckpts:
    ckpts.save(2, state, old_record)

  seen, lines = {}, []

  def record_batch(step, batch):
    seen[step] = batch
    return batch

  resumed = seq2seq.train_and_evaluate(
      config, workdir, log=lines.append, batch_hook=record_batch
  )
  assert any("resumed at step 2" in line for line in lines)
  assert resumed["complete"] and resumed["steps"] == 4
  assert resumed["losses"][:2] == [3.5, 3.25] and len(resumed["losses"]) == 4
  assert sorted(seen) == [3, 4]
  for step, batch in seen.items():  # The new stream's batches 3 and 4.
    indices = trainer.epoch_indices(
        step - 1, len(exp.train_set), t.batch_size, t.seed
    )
    np.testing.assert_array_equal(batch["src"], exp.train_set.src[indices])
  _, meta = seq2seq.restore_checkpoint(config, workdir)
  assert meta["stream"] == {"step": 4}
