"""scripts/clutrr_cpu.sh, a thin loop over experiments.reproduce: which
reproductions it runs, where, and with which seeds, checked with a stand-in
`python3` on PATH (no training; the seed runs, results copies and figures
are reproduce's, tests/experiments/test_reproduce_seeds.py)."""

import os
import shutil
import stat
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))

FAKE_PYTHON = """#!/bin/bash
echo "$*" >> "$CALLS"
"""


def run_script(tmp_path, **env):
  root = tmp_path / "repo"
  (root / "scripts").mkdir(parents=True)
  shutil.copy(os.path.join(REPO, "scripts", "clutrr_cpu.sh"), root / "scripts")
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
  )
  full_env.pop("BASE", None)  # The caller's, if any.
  full_env.update(env)
  proc = subprocess.run(
      ["bash", str(root / "scripts" / "clutrr_cpu.sh")],
      env=full_env,
      capture_output=True,
      text=True,
      timeout=60,
  )
  lines = calls.read_text().splitlines() if calls.exists() else []
  return proc, lines


def test_seeds_reach_reproduce(tmp_path):
  proc, calls = run_script(
      tmp_path, BUDGET="paper", NAMES="clutrr_et_k23", SEEDS="42,43,44"
  )
  assert proc.returncode == 0, proc.stderr
  assert calls == [
      "-m experiments.reproduce clutrr_et_k23 --budget=paper"
      " --workdir=runs/clutrr_paper/clutrr_et_k23 --seeds=42,43,44"
  ]


def test_default_is_et_rat_rt_at_the_cpu_budget(tmp_path):
  proc, calls = run_script(tmp_path, SETTING="k234")
  assert proc.returncode == 0, proc.stderr
  assert calls == [
      f"-m experiments.reproduce clutrr_{m}_k234 --budget=cpu"
      f" --workdir=runs/clutrr_cpu/clutrr_{m}_k234"
      for m in ("et", "rat", "rt")
  ]


def test_base_is_refused_before_any_run(tmp_path):
  proc, calls = run_script(tmp_path, NAMES="clutrr_et_k23", BASE="0")
  assert proc.returncode == 2 and "BASE is gone" in proc.stderr, proc.stderr
  assert calls == []
