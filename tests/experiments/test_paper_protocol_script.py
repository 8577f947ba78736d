"""scripts/paper_protocol_runs.sh, the queue of long paper-protocol runs:
which reproductions it runs in which order, where, and that each command's
config is valid (`reproduce.check`), with a stand-in `python3` on PATH (no
training)."""

import os

from experiments import reproduce
from tests.experiments import stand_in_python


def run_script(tmp_path, *args, **env):
  return stand_in_python.run_script(
      tmp_path, "paper_protocol_runs.sh", args, **env
  )


def overrides_of(call):
  """A call's --set overrides, as reproduce parses them."""
  return reproduce.parse_overrides(
      [a[len("--set=") :] for a in call if a.startswith("--set=")]
  )


# (work directory, reproduction, its algorithm) in the queue's order.
QUEUE = (
    ("rt_bf_protocol", "rt_clrs_core8", "bellman_ford"),
    ("scan26_relative_paper", "scan_cutoff26_relative_universal", None),
    ("scan26_absolute_paper", "scan_cutoff26_absolute_universal", None),
    ("floyd_bf_protocol", "floyd_clrs_core8", "bellman_ford"),
    ("rt_insertion_sort_protocol", "rt_clrs_core8", "insertion_sort"),
    ("mpnn_insertion_sort_protocol", "mpnn_clrs_core8", "insertion_sort"),
    ("rt_binary_search_protocol", "rt_clrs_core8", "binary_search"),
    ("mpnn_binary_search_protocol", "mpnn_clrs_core8", "binary_search"),
    ("cogs_et_paper", "cogs_graph_edge_transformer", None),
)


def test_runs_the_queue_in_order_each_with_a_valid_config(tmp_path):
  proc, _, calls = run_script(tmp_path, RUNS=str(tmp_path / "runs"))
  assert proc.returncode == 0, proc.stderr
  assert [c[:3] for c in calls] == [
      ["-m", "experiments.reproduce", name] for _, name, _ in QUEUE
  ]
  workdirs = [c[-1] for c in calls]
  assert workdirs == [f"--workdir={tmp_path}/runs/{w}" for w, _, _ in QUEUE]
  for call, (_, name, algorithm) in zip(calls, QUEUE):
    if algorithm:  # One algorithm and seed 42 of a CLRS protocol run.
      assert overrides_of(call) == {
          "algorithms": (algorithm,),
          "seeds": (42,),
          "results_path": (
              f"results/reproductions/{name}_paper__{algorithm}_seed42.json"
          ),
      }
  for call in calls:
    assert "--budget=paper" in call
    reproduce.check(call[2], "paper", overrides_of(call))
  # Each run's output goes to its own log.
  assert sorted(os.listdir(tmp_path / "runs")) == sorted(
      w.rsplit("/", 1)[1] + ".log" for w in workdirs
  )


def test_default_work_directories_are_under_runs_paper(tmp_path):
  proc, root, calls = run_script(tmp_path)
  assert proc.returncode == 0, proc.stderr
  assert calls[0][-1] == "--workdir=runs/paper/rt_bf_protocol"
  assert (root / "runs" / "paper").is_dir()


def test_named_runs_only_in_the_order_given(tmp_path):
  proc, _, calls = run_script(
      tmp_path, "scan26_absolute", "floyd_bf", RUNS=str(tmp_path / "runs")
  )
  assert proc.returncode == 0, proc.stderr
  assert [(c[2], c[-1]) for c in calls] == [
      (
          "scan_cutoff26_absolute_universal",
          f"--workdir={tmp_path}/runs/scan26_absolute_paper",
      ),
      ("floyd_clrs_core8", f"--workdir={tmp_path}/runs/floyd_bf_protocol"),
  ]


def test_an_unknown_run_is_refused_before_any_runs(tmp_path):
  proc, _, calls = run_script(tmp_path, "scan26_relative", "scan26_rel")
  assert proc.returncode == 2
  assert "unknown run 'scan26_rel'" in proc.stderr
  assert "rt_bf scan26_relative scan26_absolute floyd_bf rt_insertion_sort" in (
      proc.stderr
  )
  assert calls == []
