"""The mains' console: a bad command-line value or an
unreadable work-directory JSON ends in one line on stderr naming it (and the
valid choices), exit status 2, no traceback, before any training; the main
job prints no TensorFlow/CUDA start-up line and no repeated sampler warning.

Each case starts a main in a subprocess (without TensorFlow but for the main
job's console, which is a user's: TensorFlow imported where installed), so the
module is in the slow tier; the pieces these
rely on are tested in-process in tests/training/test_cli.py.
"""

import hashlib
import json
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
NATIVE_NOISE = re.compile(
    r"absl::InitializeLog|^[IWEF]0000 |cuda|cuInit|oneDNN|cpu_feature_guard"
    r"|TensorFlow binary",
    re.I | re.M,
)

pytestmark = pytest.mark.slow


def run_main(module, *args, cwd=REPO, timeout=300, tensorflow=False):
  """`python -m module *args`; with `tensorflow`, as a user's console:
  TensorFlow imported (where installed) and its log level unset."""
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  if tensorflow:
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    env.pop("RELATIONAL_JAX_SKIP_TENSORFLOW", None)
  env.pop("RELATIONAL_JAX_VERBOSE", None)
  return subprocess.run(
      [sys.executable, "-m", module, *args],
      cwd=cwd,
      env=env,
      capture_output=True,
      text=True,
      timeout=timeout,
  )


def assert_one_line_error(proc, *names):
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-3000:]
  lines = proc.stderr.splitlines()
  assert len(lines) == 1, proc.stderr[-3000:]
  assert ": error: " in lines[0], lines[0]
  for name in names:
    assert name in lines[0], (name, lines[0])
  return lines[0]


BAD_VALUES = [
    # (module, args, words the line names: the bad value, a valid choice)
    # dm-clrs's clrs_text flags, read by nothing here: unknown, not ignored.
    ("experiments.clrs_train", ["--use_hints=false"], ["use_hints"]),
    (
        "experiments.clrs_evaluate",
        ["--number_of_samples=9"],
        ["number_of_samples"],
    ),
    (
        "experiments.clrs_train",
        ["--config.rt.no_such=3"],
        ["config.rt.no_such", "head_dim", "num_layers"],
    ),
    (
        "experiments.clrs_train",
        ["--config.algorithms=('no_such_algorithm',)"],
        ["no_such_algorithm", "bellman_ford"],
    ),
    (
        "experiments.clrs_train",
        ["--config.processor_type=no_such_kind"],
        ["no_such_kind", "rt_triangular"],
    ),
    (
        "experiments.clrs_train",
        ["--config.hint_mode=no_such_mode"],
        ["no_such_mode", "encoded_decoded"],
    ),
    ("experiments.clrs_train", ["--no_such_flag=1"], ["no_such_flag"]),
    (
        "experiments.reproduce",
        ["no_such_reproduction"],
        ["no_such_reproduction", "readme_main_job"],
    ),
    (
        "experiments.reproduce",
        ["readme_main_job", "--budget=no_such_budget"],
        ["no_such_budget", "paper", "smoke"],
    ),
    (
        "experiments.reproduce",
        ["readme_main_job", "--budget=smoke", "--set=processor_type=nope"],
        ["'nope'", "rt_triangular"],
    ),
    (
        "experiments.seq2seq_train",
        ["--config.model=no_such_model"],
        ["no_such_model", "edge_transformer"],
    ),
    (
        "experiments.seq2seq_train",
        ["--config.transformer.no_such=1"],
        ["config.transformer.no_such", "d_model"],
    ),
    (
        "experiments.clutrr_train",
        ["--config.model=no_such_model"],
        ["no_such_model", "edge_transformer", "rat", "floyd"],
    ),
    (
        "experiments.cogs_graph_train",
        ["--config.train.no_such=1"],
        ["config.train.no_such", "learning_rate"],
    ),
    (
        "experiments.clrs_evaluate",
        ["--workdir=/tmp", "--checkpoint=no_such"],
        ["no_such", "best", "latest"],
    ),
    (
        "experiments.clrs_evaluate",
        ["--workdir=/tmp", "--test_lengths=2,64"],
        ["--test_lengths", ">= 4", "2"],
    ),
    (
        "experiments.clrs_evaluate",
        ["--workdir=/tmp", "--test_lengths="],
        ["--test_lengths", "at least one"],
    ),
]


@pytest.mark.parametrize(
    "module,args,names",
    BAD_VALUES,
    ids=[f"{m.split('.')[1]}:{a[-1]}" for m, a, _ in BAD_VALUES],
)
def test_bad_value_is_one_line_and_exit_2(tmp_path, module, args, names):
  workdir = str(tmp_path / "run")
  extra = (
      [] if module == "experiments.clrs_evaluate" else ["--workdir", workdir]
  )
  proc = run_main(module, *args, *extra)
  assert_one_line_error(proc, *names)
  assert not os.path.exists(workdir)  # Nothing started.


def _digests(directory):
  out = {}
  for root, _, files in os.walk(directory):
    for name in files:
      path = os.path.join(root, name)
      with open(path, "rb") as f:
        out[path] = hashlib.sha256(f.read()).hexdigest()
  return out


def _workdir_with_checkpoint(tmp_path):
  workdir = tmp_path / "run"
  ckpt = workdir / "bellman_ford_seed42" / "checkpoints" / "best" / "1"
  ckpt.mkdir(parents=True)
  (ckpt / "state").write_bytes(b"not really a checkpoint")
  return workdir


@pytest.mark.parametrize("module", ["clrs_train", "clrs_evaluate"])
def test_unreadable_config_json_is_one_line(tmp_path, module):
  workdir = _workdir_with_checkpoint(tmp_path)
  (workdir / "config.json").write_text('{"protocol": {"train_st')
  before = _digests(workdir)
  proc = run_main(f"experiments.{module}", f"--workdir={workdir}")
  assert_one_line_error(proc, str(workdir / "config.json"))
  assert _digests(workdir) == before


def test_unreadable_run_record_is_one_line(tmp_path):
  from relational_jax.training import config as config_lib  # pylint: disable=g-import-not-at-top
  from relational_jax.training.clrs import config as clrs_config  # pylint: disable=g-import-not-at-top

  workdir = _workdir_with_checkpoint(tmp_path)
  with open(workdir / "config.json", "w") as f:  # The run's own config.
    json.dump(config_lib.to_dict(clrs_config.default_config()), f)
  record = workdir / "bellman_ford_seed42" / "result.json"
  record.write_bytes(b"\x00\xff garbage")
  before = _digests(workdir / "bellman_ford_seed42")
  proc = run_main("experiments.clrs_train", f"--workdir={workdir}")
  assert_one_line_error(proc, str(record))
  assert _digests(workdir / "bellman_ford_seed42") == before


def test_main_job_console_is_clean(tmp_path):
  """The README's main job at the smallest budget: the progress bar and the
  scores, no TensorFlow/CUDA line, no sampler warning (held back: shown by
  --verbosity=1)."""
  proc = run_main(
      "experiments.clrs_train",
      f"--workdir={tmp_path / 'run'}",
      "--config.protocol.train_lengths=(4,)",
      "--config.protocol.test_lengths=(4,)",
      "--config.train.steps=1",
      "--config.train.eval_every=1",
      "--config.train.batch_size=2",
      "--config.train.eval_batch_size=4",
      "--config.protocol.max_eval_samples=4",
      "--config.model.hidden_dim=8",
      "--config.rt.num_layers=1",
      "--config.processor.nb_heads=2",
      "--config.rt.head_dim=4",
      "--config.rt.node_ffn_dim=4",
      "--config.rt.edge_msg_dim=4",
      "--config.rt.edge_ffn_dim=4",
      timeout=600,
      tensorflow=True,
  )
  out = proc.stdout + proc.stderr
  assert proc.returncode == 0, out[-3000:]
  assert "bellman_ford (rt): best val" in proc.stdout
  assert not NATIVE_NOISE.search(out), out[-3000:]
  assert "samplers.py" not in out and "Ignoring kwargs" not in out, out
  # Besides the progress bar (carriage-return updates), only the scores.
  lines = [l for l in re.split(r"[\r\n]", out) if l.strip()]
  others = [l for l in lines if not l.startswith("bellman_ford/rt/seed42:")]
  assert len(others) == 2, others  # The test score and the summary.
