"""docs/extending.md's code runs as written: a new task module, registered,
trains through the engine, and a rerun resumes the finished run."""

import pathlib
import re
import sys

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
