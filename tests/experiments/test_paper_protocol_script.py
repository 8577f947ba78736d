"""scripts/paper_protocol_runs.sh, the queue of long paper-protocol runs:
which reproductions it runs in which order, where, and that each command's
config is valid (`reproduce.check`), with a stand-in `python3` on PATH (no
training)."""

import os
import shutil
import stat
import subprocess

from experiments import reproduce

REPO = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))

# One line per call, its arguments tab-separated.
FAKE_PYTHON = """#!/bin/bash
printf '%s\\t' "$@" >> "$CALLS"
echo >> "$CALLS"
"""


def run_script(tmp_path, **env):
  root = tmp_path / "repo"
  (root / "scripts").mkdir(parents=True)
  shutil.copy(
      os.path.join(REPO, "scripts", "paper_protocol_runs.sh"), root / "scripts"
  )
  bin_dir = tmp_path / "bin"
  bin_dir.mkdir()
  fake = bin_dir / "python3"
  fake.write_text(FAKE_PYTHON)
  fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
  calls = tmp_path / "calls.txt"
  full_env = dict(
      os.environ,
      PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
      CALLS=str(calls),
      **env,
  )
  proc = subprocess.run(
      ["bash", str(root / "scripts" / "paper_protocol_runs.sh")],
      env=full_env,
      capture_output=True,
      text=True,
      timeout=60,
      cwd=tmp_path,
  )
  lines = calls.read_text().splitlines() if calls.exists() else []
  return proc, root, [line.rstrip("\t").split("\t") for line in lines]


def test_runs_the_four_in_order_each_with_a_valid_config(tmp_path):
  proc, root, calls = run_script(tmp_path, RUNS=str(tmp_path / "runs"))
  assert proc.returncode == 0, proc.stderr
  assert [c[:3] for c in calls] == [
      ["-m", "experiments.reproduce", name]
      for name in (
          "rt_clrs_core8",
          "scan_cutoff26_relative_universal",
          "scan_cutoff26_absolute_universal",
          "floyd_clrs_core8",
      )
  ]
  workdirs = [c[-1] for c in calls]
  assert workdirs == [
      f"--workdir={tmp_path}/runs/{w}"
      for w in (
          "rt_bf_protocol",
          "scan26_relative_paper",
          "scan26_absolute_paper",
          "floyd_bf_protocol",
      )
  ]
  for call in calls:
    assert "--budget=paper" in call
    sets = [a[len("--set=") :] for a in call if a.startswith("--set=")]
    reproduce.check(call[2], "paper", reproduce.parse_overrides(sets))
  assert reproduce.parse_overrides(
      [a[len("--set=") :] for a in calls[0] if a.startswith("--set=")]
  ) == {
      "algorithms": ("bellman_ford",),
      "seeds": (0,),
      "results_path": (
          "results/reproductions/rt_clrs_core8_paper__bellman_ford_seed0.json"
      ),
  }
  # Each run's output goes to its own log.
  assert sorted(os.listdir(tmp_path / "runs")) == sorted(
      w.rsplit("/", 1)[1] + ".log" for w in workdirs
  )


def test_default_work_directories_are_under_runs_paper(tmp_path):
  proc, root, calls = run_script(tmp_path)
  assert proc.returncode == 0, proc.stderr
  assert calls[0][-1] == "--workdir=runs/paper/rt_bf_protocol"
  assert (root / "runs" / "paper").is_dir()
