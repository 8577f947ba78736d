"""README.md stays a short user guide, and CI runs its full test command."""

import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[1]


def test_readme_is_at_most_200_lines():
  lines = (REPO / "README.md").read_text().splitlines()
  assert len(lines) <= 200, len(lines)


def test_ci_runs_the_readme_install_and_full_test_commands():
  readme = (REPO / "README.md").read_text()
  ci = (REPO / ".ci" / "run").read_text()
  install = re.search(r"^(python3 -m pip install -e \S+)", readme, re.M)
  full = re.search(r"^(python3 -m pytest [^#\n]*?tests)\s+# full", readme, re.M)
  assert install and full, "README names no install or full test command"
  assert install.group(1) in ci
  assert full.group(1) in ci


def test_every_linked_doc_exists():
  readme = (REPO / "README.md").read_text()
  for target in re.findall(r"\]\(([^)#]+)\)", readme):
    if "://" not in target:
      assert (REPO / target).exists(), target


def test_the_trainer_snippet_runs_as_written(tmp_path, monkeypatch):
  """The README's own-task example: pasted as it stands, it trains the toy
  regression to its weights (in a scratch directory: it writes runs/toy)."""
  readme = (REPO / "README.md").read_text()
  [code] = [
      block
      for block in re.findall(r"```python\n(.*?)```", readme, re.S)
      if "trainer.fit(" in block
  ]
  monkeypatch.chdir(tmp_path)
  scope = {}
  exec(compile(code, "README.md", "exec"), scope)  # pylint: disable=exec-used
  record = scope["record"]
  assert record.complete and record.step == 200
  assert record.history[-1]["val_accuracy"] > -1e-3  # -MSE: fitted.
  assert (tmp_path / "runs" / "toy").is_dir()
