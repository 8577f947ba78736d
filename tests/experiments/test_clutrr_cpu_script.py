"""scripts/clutrr_cpu.sh: which reproductions it runs, where, and with which
seeds, checked with a stand-in `python3` on PATH (no training)."""

import os
import shutil
import stat
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))

# Records each `-m` call and writes the results.json the script copies; the
# figure step (`-c CODE SETTING BUDGET`) is marked with its arguments.
FAKE_PYTHON = """#!/bin/bash
if [ "$1" = "-m" ]; then
  echo "$*" >> "$CALLS"
  for a in "$@"; do
    case "$a" in --workdir=*) mkdir -p "${a#--workdir=}"
      echo "{\\"args\\": \\"$*\\"}" > "${a#--workdir=}/results.json";; esac
  done
elif [ "$1" = "-c" ]; then
  echo "figure $3 $4" >> "$CALLS"
else
  echo "unexpected call: $*" >&2; exit 1
fi
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
      **env,
  )
  proc = subprocess.run(
      ["bash", str(root / "scripts" / "clutrr_cpu.sh")],
      env=full_env,
      capture_output=True,
      text=True,
      timeout=60,
  )
  lines = calls.read_text().splitlines() if calls.exists() else []
  return proc, lines, root


def test_seeds_add_tagged_runs_and_results(tmp_path):
  proc, calls, root = run_script(
      tmp_path, BUDGET="paper", NAMES="clutrr_et_k23", SEEDS="43 44"
  )
  assert proc.returncode == 0, proc.stderr
  runs = "runs/clutrr_paper/clutrr_et_k23"
  assert calls == [
      f"-m experiments.reproduce clutrr_et_k23 --budget=paper --workdir={runs}",
      (
          "-m experiments.reproduce clutrr_et_k23 --budget=paper"
          f" --set=train.seed=43 --workdir={runs}__seed43"
      ),
      (
          "-m experiments.reproduce clutrr_et_k23 --budget=paper"
          f" --set=train.seed=44 --workdir={runs}__seed44"
      ),
      "figure k23 paper",
  ]
  assert sorted(os.listdir(root / "results" / "clutrr")) == [
      "clutrr_et_k23_paper.json",
      "clutrr_et_k23_paper__seed43.json",
      "clutrr_et_k23_paper__seed44.json",
  ]


def test_base_0_runs_only_the_seeds(tmp_path):
  proc, calls, root = run_script(
      tmp_path, BUDGET="paper", NAMES="clutrr_et_k23", SEEDS="43", BASE="0"
  )
  assert proc.returncode == 0, proc.stderr
  assert calls == [
      (
          "-m experiments.reproduce clutrr_et_k23 --budget=paper"
          " --set=train.seed=43"
          " --workdir=runs/clutrr_paper/clutrr_et_k23__seed43"
      ),
      "figure k23 paper",
  ]
  assert os.listdir(root / "results" / "clutrr") == [
      "clutrr_et_k23_paper__seed43.json"
  ]


def test_default_is_one_run_per_name_at_the_cpu_budget(tmp_path):
  proc, calls, root = run_script(tmp_path, NAMES="clutrr_rt_k23")
  assert proc.returncode == 0, proc.stderr
  assert calls == [
      (
          "-m experiments.reproduce clutrr_rt_k23 --budget=cpu"
          " --workdir=runs/clutrr_cpu/clutrr_rt_k23"
      ),
      "figure k23 cpu",
  ]
  assert os.listdir(root / "results" / "clutrr") == ["clutrr_rt_k23.json"]


@pytest.mark.parametrize(
    "env, message",
    [
        ({"SEEDS": "43 x4"}, "'x4' is not a non-negative integer"),
        ({"BUDGET": "smoke"}, "valid budgets are cpu, paper"),
        ({"SETTING": "k2"}, "valid settings are k23, k234"),
        ({"BASE": "no"}, "BASE=no: valid values are 1"),
        ({"BASE": "0"}, "BASE=0 with no SEEDS: nothing to run"),
    ],
)
def test_bad_values_are_named_before_any_run(tmp_path, env, message):
  proc, calls, _ = run_script(tmp_path, NAMES="clutrr_et_k23", **env)
  assert proc.returncode == 2 and message in proc.stderr, proc.stderr
  assert calls == []
