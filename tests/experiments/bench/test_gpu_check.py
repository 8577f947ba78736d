"""bench.gpu_check: the error figures, the tolerance and exit logic, the JSON
and table writer (fast), and `--quick` end to end on the CPU (slow)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from experiments.bench import gpu_check

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)


def test_errors_are_max_abs_and_relative_to_the_reference():
  want = np.array([[2.0, -4.0], [1.0, 0.0]], np.float32)
  got = want + np.array([[0.0, 0.0], [0.5, 0.0]], np.float32)
  assert gpu_check.errors(got, want) == {"max_abs": 0.5, "rel": 0.125}
  with pytest.raises(ValueError, match="shapes differ"):
    gpu_check.errors(got[0], want)
  with pytest.raises(ValueError, match="outputs missing"):
    gpu_check.compare({"o": got}, {"o": want, "dq": want})


def test_over_tolerance_flags_large_and_nan_errors():
  per = gpu_check.compare(
      {"o": np.ones(3), "dq": np.array([1.0, np.nan, 1.0])},
      {"o": np.ones(3) + 1e-6, "dq": np.ones(3)},
  )
  assert gpu_check.worst(per)["output"] in ("o", "dq")
  messages = gpu_check.over_tolerance(per, 1e-4, "N=8 pallas vs xla")
  assert messages == ["N=8 pallas vs xla dq: rel error nan > 0.0001"]
  assert not gpu_check.over_tolerance({"o": per["o"]}, 1e-4, "x")
  assert gpu_check.over_tolerance({"o": per["o"]}, 1e-7, "x")


def _ok(s, budget):
  del s
  assert budget.left() > 0
  return {"summary": "fine", "figure": 1.5}


def _mismatch(s, budget):
  del s, budget
  per = {"o": gpu_check.errors(np.ones(2), np.zeros(2) + 0.5)}
  return {"mismatches": gpu_check.over_tolerance(per, 1e-4, "N=4")}


def _skipped(s, budget):
  del s, budget
  raise gpu_check.Skip("no GPU")


def _broken(s, budget):
  del s, budget
  raise RuntimeError("kernel failed to compile")


def test_parts_statuses_json_table_and_exit_status(tmp_path):
  lines = []
  parts = [
      ("ok", _ok, 10.0),
      ("mismatch", _mismatch, 10.0),
      ("skipped", _skipped, 10.0),
      ("error", _broken, 10.0),
  ]
  snapshots = []  # what main writes after each part
  report = {
      "parts": gpu_check.run_parts(
          parts,
          gpu_check.settings(True),
          lines.append,
          after_part=lambda done: snapshots.append(list(done)),
      )
  }
  assert snapshots == [[n for n, _, _ in parts[:i]] for i in range(1, 5)]
  assert gpu_check.finish(report, str(tmp_path), lines.append) == 1
  written = json.loads((tmp_path / gpu_check.REPORT_NAME).read_text())
  assert written["exit_status"] == 1
  got = written["parts"]
  assert {name: p["status"] for name, p in got.items()} == {
      "ok": "ok",
      "mismatch": "mismatch",
      "skipped": "skipped",
      "error": "error",
  }
  assert got["ok"]["figure"] == 1.5 and not got["ok"]["over_budget"]
  assert got["mismatch"]["mismatches"] == ["N=4 o: rel error 1 > 0.0001"]
  assert got["skipped"]["reason"] == "no GPU"
  assert "kernel failed to compile" in got["error"]["error"]
  assert "RuntimeError" in got["error"]["traceback"]
  table = "\n".join(lines).splitlines()
  for name, summary in (
      ("ok", "fine"),
      ("mismatch", "1 over: N=4 o: rel error 1"),
      ("skipped", "no GPU"),
      ("error", "RuntimeError: kernel failed"),
  ):
    assert any(l.startswith(name) and summary in l for l in table), table
  assert lines[-1].startswith("exit status 1")
  # Skipped parts alone do not fail the check.
  fine = {"parts": gpu_check.run_parts(parts[::2], None, lines.append)}
  assert gpu_check.finish(fine, str(tmp_path), lines.append) == 0


def test_pytest_counts_read_the_closing_line():
  assert gpu_check.pytest_counts(
      "....F.\nFAILED tests/a.py::t - x\n"
      "=== 1 failed, 219 passed, 97 deselected, 2 warnings in 95.12s ===\n"
  ) == {"failed": 1, "passed": 219, "deselected": 97, "warnings": 2}
  assert gpu_check.pytest_counts("9 passed, 1 error in 3.00s") == {
      "passed": 9,
      "errors": 1,
  }
  assert gpu_check.pytest_counts("collected 3 items\nno summary") == {}


def test_sizes_stop_on_budget_or_memory():
  budget = gpu_check.Budget(100.0)
  assert gpu_check._stop_before(64, budget, None, 10, None) is None
  # 2 s compiling + 1 s running -> 2 + 8 s predicted: fits.
  assert gpu_check._stop_before(128, budget, (3.0, 1.0), 10, 1000) is None
  assert "predicted 82 s" in gpu_check._stop_before(
      128, gpu_check.Budget(50.0), (12.0, 10.0), 10, None
  )
  assert "GiB" in gpu_check._stop_before(128, budget, None, 900, 1000)


def test_parts_that_cannot_run_here_say_why():
  s = gpu_check.settings(False)
  with pytest.raises(gpu_check.Skip, match="no GPU"):
    gpu_check.part_triangular_pallas(s, gpu_check.Budget(1.0))
  with pytest.raises(gpu_check.Skip, match="--floyd_checkout"):
    gpu_check.part_pivotal_torch(s, gpu_check.Budget(1.0))
  s = gpu_check.settings(False, floyd_checkout=REPO)
  with pytest.raises(gpu_check.Skip, match="src/floydnet/functional.py"):
    gpu_check.part_pivotal_torch(s, gpu_check.Budget(1.0))


def test_the_chosen_parts_share_the_total_in_proportion():
  assert set(gpu_check.BUDGETS_S) == set(gpu_check.PARTS)
  every = gpu_check.budgets(list(gpu_check.PARTS), 480.0)
  assert sum(every.values()) == pytest.approx(480.0)
  some = gpu_check.budgets(["tests", "main_job"], 480.0)
  assert sum(some.values()) == pytest.approx(480.0)
  ratio = gpu_check.BUDGETS_S["main_job"] / gpu_check.BUDGETS_S["tests"]
  assert some["main_job"] / some["tests"] == pytest.approx(ratio)
  assert some["tests"] > every["tests"]


def test_processors_flag_picks_and_orders_entries():
  from absl import app  # pylint: disable=g-import-not-at-top
  from experiments.bench import processors as bench_processors  # pylint: disable=g-import-not-at-top

  assert set(gpu_check.PROCESSOR_ENTRIES) <= set(bench_processors.ENTRIES)
  full = gpu_check.settings(False)
  assert gpu_check.with_processors(full, []) == full
  picked = gpu_check.with_processors(full, ["floyd", "et"])
  assert picked.processor_entries == ("floyd", "et")
  with pytest.raises(app.UsageError, match=r"unknown \['gnn'\]; valid: "):
    gpu_check.with_processors(full, ["floyd", "gnn"])


def test_quick_settings_name_existing_tests():
  quick = gpu_check.settings(True)
  assert quick.quick and set(quick.test_targets) == set(gpu_check.QUICK_TESTS)
  for target in quick.test_targets:
    assert os.path.isfile(os.path.join(REPO, target.split("::")[0])), target


@pytest.mark.slow
def test_quick_runs_every_part_end_to_end(tmp_path):
  done = subprocess.run(
      [
          sys.executable,
          "-m",
          "experiments.bench.gpu_check",
          "--quick",
          f"--out={tmp_path}",
      ],
      cwd=REPO,
      env=dict(os.environ, JAX_PLATFORMS="cpu"),
      capture_output=True,
      text=True,
      timeout=900,
  )
  assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
  report = json.loads((tmp_path / gpu_check.REPORT_NAME).read_text())
  assert report["quick"] and report["exit_status"] == 0
  assert report["device"]["backend"] == "cpu"
  assert report["versions"]["jax"]
  parts = report["parts"]
  assert list(parts) == list(gpu_check.PARTS)
  for name, part in parts.items():
    assert part["status"] in ("ok", "skipped"), (name, part)
    assert part["wall_s"] >= 0 and part["budget_s"] > 0
  assert parts["tests"]["counts"]["passed"] >= 5
  assert not parts["tests"]["counts"].get("failed")
  highest = parts["precision"]["cases"]["pivotal_fn"]["highest"]
  assert max(e["max_abs"] for e in highest["outputs"].values()) < 1e-5
  assert parts["triangular_pallas"]["interpret"] is True
  for cell in [
      *parts["triangular_pallas"]["sizes"].values(),
      *parts["pivotal_pallas"]["sizes"].values(),
  ]:
    for variant in ("pallas", "pallas_fused"):
      errors = cell[f"{variant}_vs_xla_highest"].values()
      assert max(e["rel"] for e in errors) < 1e-4, variant
      assert cell[f"{variant}_forward_backward"]["median_s"] > 0
  if parts["pivotal_torch"]["status"] == "skipped":
    assert parts["pivotal_torch"]["reason"]
  assert parts["processors"]["entries"]["mpnn512"]["train_step_s"] > 0
  assert parts["main_job"]["processor_type"] == "rt"
  assert parts["main_job"]["step_s"] > 0
  assert "exit status 0" in done.stdout
