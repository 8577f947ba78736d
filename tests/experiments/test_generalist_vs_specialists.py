"""experiments/generalist_vs_specialists.py: the per-seed scores, their
summary and plot (the runs themselves are the generalist reproductions'
smoke runs, tests/experiments/test_reproduce.py)."""

import pytest

from experiments import generalist_vs_specialists as gvs


def results(scores_by_algorithm):
  return {
      "algorithms": {
          a: {
              "runs": [
                  {"seed": s, "test": {"16": 0.5, "64": v}} for s, v in runs
              ]
          }
          for a, runs in scores_by_algorithm.items()
      }
  }


def test_scores_are_percent_per_seed_with_mean_and_sample_sd():
  out = gvs.scores(results({"bfs": [(42, 0.5), (43, 0.7)]}), 64)
  assert out["bfs"]["seeds"] == {"42": 50.0, "43": 70.0}
  assert out["bfs"]["mean"] == pytest.approx(60.0)
  assert out["bfs"]["sd"] == pytest.approx(14.142135, rel=1e-6)
  assert gvs.scores(results({"bfs": [(42, 0.5)]}), 16)["bfs"]["sd"] == 0.0


def test_plot_writes_a_png(tmp_path):
  row = {
      "table19_single_task": 90.0,
      "generalist": {"seeds": {"42": 50.0}, "mean": 50.0, "sd": 0.0},
      "specialists": {"seeds": {"42": 60.0}, "mean": 60.0, "sd": 0.0},
  }
  record = {
      "budget": "cpu",
      "metric": "test micro-F1 at n=64 (%)",
      "results": {"rt": {"bfs": row, "mean": {"generalist": 50.0}}},
  }
  gvs.plot(record, str(tmp_path / "p.png"))
  assert (tmp_path / "p.png").stat().st_size > 1000
