"""The data shipped with the package: pinned sums, licences, default paths."""

import os

import pytest

from relational_jax.data import paths
from relational_jax.training import clutrr
from relational_jax.training import cogs_graph
from relational_jax.training.seq2seq import config as seq2seq_config


def test_shipped_files_have_their_pinned_sums():
  checked = paths.verify()
  assert len(checked) == len(paths.SHA256)
  # Every dataset carries its licence beside its files.
  for dataset in ("scan", "cogs", "clutrr", "semparse"):
    assert f"{dataset}/LICENSE" in checked
  # Nothing shipped goes unpinned (README.md is ours).
  shipped = {
      os.path.relpath(os.path.join(root, name), paths.OFFICIAL_DIR)
      for root, _, names in os.walk(paths.OFFICIAL_DIR)
      for name in names
  }
  assert shipped - set(paths.SHA256) == {"README.md"}


def test_verify_names_a_changed_or_missing_file(tmp_path):
  (tmp_path / "a.txt").write_text("a\n")
  good = paths.file_sha256(str(tmp_path / "a.txt"))
  assert paths.verify(str(tmp_path), {"a.txt": good}) == ("a.txt",)
  with pytest.raises(ValueError, match=r"a\.txt has SHA-256 .*, expected 0+"):
    paths.verify(str(tmp_path), {"a.txt": "0" * 64})
  with pytest.raises(FileNotFoundError, match=r"b\.txt is missing"):
    paths.verify(str(tmp_path), {"b.txt": good})


def test_every_default_data_path_is_inside_the_package():
  package = os.path.dirname(os.path.dirname(os.path.abspath(paths.__file__)))
  for default in (
      clutrr.default_config().data.data_dir,
      cogs_graph.default_config().data.data_dir,
      seq2seq_config.default_config().data.data_dir,
  ):
    assert os.path.commonpath([package, default]) == package
    assert os.path.isdir(default)
