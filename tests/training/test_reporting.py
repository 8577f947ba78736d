"""relational_jax.training.reporting: a results JSON is never half-written."""

import json
import os

import pytest

from relational_jax.training import reporting


def test_write_json_replaces_the_file_whole_or_not_at_all(
    tmp_path, monkeypatch
):
  path = str(tmp_path / "results.json")
  reporting.write_json(path, {"step": 1})
  real_dump = json.dump

  def dump_then_fail(value, f, **kwargs):  # A crash halfway through.
    f.write('{"step": ')
    raise RuntimeError("disk full")

  monkeypatch.setattr(json, "dump", dump_then_fail)
  with pytest.raises(RuntimeError, match="disk full"):
    reporting.write_json(path, {"step": 2})
  monkeypatch.setattr(json, "dump", real_dump)
  # The old results stay readable and no temporary file is left behind.
  assert reporting.read_json(path) == {"step": 1}
  assert os.listdir(tmp_path) == ["results.json"]
  reporting.write_json(path, {"step": 2})
  assert reporting.read_json(path) == {"step": 2}
