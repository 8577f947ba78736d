"""docs/extending.md's code runs as written: a new task module, registered,
trains through the engine, and a rerun resumes the finished run; a new
processor module, registered with one factory line, builds, runs and is a
CLRS run config's processor_type."""

import pathlib
import re
import sys

import processors
from relational_jax.training import registry

DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "extending.md"


def _blocks():
  return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_the_new_task_walkthrough_runs_as_written(tmp_path, monkeypatch):
  module, usage = _blocks()[:2]
  name = module.splitlines()[0].removeprefix("# ").strip()
  assert name == "toy_regression.py"
  (tmp_path / name).write_text(module)
  monkeypatch.chdir(tmp_path)
  monkeypatch.syspath_prepend(str(tmp_path))
  try:
    exec(compile(usage, str(DOC), "exec"), {})  # pylint: disable=exec-used
  finally:
    registry.TASKS.pop("toy_regression", None)
    sys.modules.pop("toy_regression", None)
  assert (tmp_path / "runs" / "toy" / "metrics.jsonl").is_file()
  assert (tmp_path / "runs" / "toy" / "config.json").is_file()


def test_the_new_processor_walkthrough_runs_as_written(tmp_path, monkeypatch):
  module, usage = _blocks()[2:4]
  name = module.splitlines()[0].removeprefix("# ").strip()
  assert name == "mean_mix.py"
  (tmp_path / name).write_text(module)
  monkeypatch.syspath_prepend(str(tmp_path))
  try:
    exec(compile(usage, str(DOC), "exec"), {})  # pylint: disable=exec-used
    assert "mean_mix" in processors.all_kinds()
  finally:
    processors.PROCESSORS.pop("mean_mix", None)
    sys.modules.pop("mean_mix", None)
  assert "mean_mix" not in processors.all_kinds()
