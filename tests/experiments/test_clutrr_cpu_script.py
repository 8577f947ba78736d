"""scripts/clutrr_cpu.sh, a thin loop over experiments.reproduce: which
reproductions it runs, where, and with which seeds, checked with a stand-in
`python3` on PATH (no training; the seed runs, results copies and figures
are reproduce's, tests/experiments/test_reproduce_seeds.py)."""

from tests.experiments import stand_in_python


def run_script(tmp_path, **env):
  env.setdefault("BASE", None)  # Not the caller's, if any.
  proc, _, calls = stand_in_python.run_script(tmp_path, "clutrr_cpu.sh", **env)
  return proc, [" ".join(args) for args in calls]


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
