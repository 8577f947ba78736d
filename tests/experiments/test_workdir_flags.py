"""Every training / evaluation main under experiments/ takes its work
directory as --workdir, and no other name for it."""

import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)

MAINS = (
    "experiments.clrs_train",
    "experiments.clrs_evaluate",
    "experiments.seq2seq_train",
    "experiments.seq2seq_evaluate",
    "experiments.clutrr_train",
    "experiments.cogs_graph_train",
    "experiments.reproduce",
    "experiments.compare",
)


@pytest.mark.parametrize(
    "module",
    [
        m
        if m == "experiments.clrs_train"
        else pytest.param(m, marks=pytest.mark.slow)
        for m in sorted(MAINS)
    ],
)  # A subprocess each: one stays in the fast tier.
def test_main_takes_workdir(module):
  proc = subprocess.run(
      [sys.executable, "-m", module, "--helpfull"],
      cwd=REPO,
      capture_output=True,
      text=True,
      timeout=300,
      env=dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3"),
  )
  out = proc.stdout + proc.stderr
  assert re.search(r"^\s*--workdir:", out, re.M), out[-3000:]
  assert not re.search(r"Alias for --workdir", out), out[-3000:]
