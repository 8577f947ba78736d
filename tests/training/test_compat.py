"""Work directories saved by earlier versions still resume."""

import os

from relational_jax.data import paths as data_paths
from relational_jax.training import compat
from relational_jax.training import config as config_lib
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
