"""experiments.clrs_train, the absl entry point: --config.* flags only, and
resuming a library run from the command line."""

import json
import os
import subprocess
import sys

import pytest

from relational_jax.training.clrs import loop as clrs_loop
from tests.training.clrs.test_loop import tiny

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)


def test_flat_run_py_names_are_unknown_flags():
  """Only `--config.<path>` sets the config: a flat CLRS run.py name is an
  unknown flag (one line, exit 2)."""
  proc = subprocess.run(
      [sys.executable, "-m", "experiments.clrs_train", "--hidden_size=16"],
      cwd=REPO,
      capture_output=True,
      text=True,
      timeout=300,
  )
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert "hidden_size" in proc.stderr.strip().splitlines()[-1]


@pytest.mark.slow
def test_command_line_resumes_a_library_run(tmp_path):
  workdir = str(tmp_path / "run")
  results = clrs_loop.train_and_evaluate(tiny(), workdir)
  run = results["algorithms"]["bellman_ford"]["runs"][0]
  # The command line, on the same directory with more steps, resumes at step
  # 2.
  cmd = [
      sys.executable,
      "-m",
      "experiments.clrs_train",
      f"--workdir={workdir}",
      "--config.algorithms=('bellman_ford',)",
      "--config.protocol.train_lengths=(5,)",
      "--config.protocol.test_lengths=(5,)",
      "--config.train.batch_size=4",
      "--config.train.eval_batch_size=4",
      "--config.train.steps=4",
      "--config.train.eval_every=1",
      "--config.protocol.max_eval_samples=4",
      "--config.model.hidden_dim=16",
      "--config.processor.nb_heads=2",
      "--config.rt.head_dim=4",
      "--config.rt.num_layers=1",
      "--config.rt.node_ffn_dim=4",
      "--config.rt.edge_msg_dim=4",
      "--config.rt.edge_ffn_dim=4",
      "--noconfig.train.progress",
  ]
  # A planned stop (step 3 of 4) ends cleanly, saying where it stopped ...
  proc = subprocess.run(
      cmd + ["--config.train.stop_at_step=3"],
      cwd=REPO,
      capture_output=True,
      text=True,
      timeout=600,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "resumed at step 2" in proc.stdout
  assert "stopped at step 3 (train.stop_at_step)" in proc.stdout
  assert "OOD test" not in proc.stdout
  # ... and the same command without it resumes there and finishes.
  proc = subprocess.run(
      cmd, cwd=REPO, capture_output=True, text=True, timeout=600
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "resumed at step 3" in proc.stdout
  assert "OOD test n=5" in proc.stdout
  with open(os.path.join(workdir, "results.json")) as f:
    resumed = json.load(f)["algorithms"]["bellman_ford"]["runs"][0]
  assert resumed["steps"] == 4
  assert [h["step"] for h in resumed["history"]] == [1, 2, 3, 4]
  assert resumed["history"][:2] == run["history"]


def test_plot_ood_refuses_other_json_in_one_line(tmp_path):
  """A missing file, or a JSON that is not a clrs_train / clrs_evaluate
  results file (a reproduction's, say): a UserError naming it, which the
  main prints as one line with exit status 2 (`cli.run`)."""
  from relational_jax.training import errors  # pylint: disable=g-import-not-at-top
  from relational_jax.training.clrs import evaluation  # pylint: disable=g-import-not-at-top

  with pytest.raises(errors.UserError, match=r"results JSON .*nope.json not"):
    evaluation.read_results(str(tmp_path / "nope.json"))
  other = tmp_path / "reproduction.json"
  other.write_text(json.dumps({"config": {"algorithms": ["bfs"]}}))
  with pytest.raises(errors.UserError, match=r"reproduction.json is not a"):
    evaluation.read_results(str(other))
  ours = {"config": {"processor_type": "rt"}, "algorithms": {}}
  other.write_text(json.dumps(ours))
  assert evaluation.read_results(str(other)) == ours
