"""Work directories saved by earlier versions still resume."""

import os

import numpy as np

from relational_jax.data import paths as data_paths
from relational_jax.training import compat
from relational_jax.training import config as config_lib
from relational_jax.training import optim
from relational_jax.training.seq2seq import config as seq2seq_config


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


def test_a_graph_task_record_from_before_the_trainer_reads_in_its_layout():
  old = {"history": [{"step": 5, "val_accuracy": 0.5}, {"step": 10}]}
  old["history"].append({"step": 15, "val_accuracy": 0.7})
  record = compat.upgrade_run_record(old, {"step": np.int32(15)})
  assert (record["step"], record["stream"], record["losses"]) == (
      15,
      {"step": 15},
      [],
  )
  assert record["best"] == {"step": 15, "score": 0.7}
  assert compat.upgrade_run_record(record, None) is record  # today's layout


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
