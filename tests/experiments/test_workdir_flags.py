"""Every training / evaluation main under experiments/ takes its work
directory as --workdir; where the earlier name was --checkpoint_path, that
name stays as an absl alias of --workdir."""

import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)

# Module -> whether it keeps --checkpoint_path as an alias.
MAINS = {
    "experiments.clrs_train": True,
    "experiments.clrs_evaluate": True,
    "experiments.seq2seq_train": True,
    "experiments.seq2seq_evaluate": False,
    "experiments.clutrr_train": False,
    "experiments.cogs_graph_train": False,
    "experiments.reproduce": False,
    "experiments.compare": False,
}


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
  alias = re.search(r"^\s*--checkpoint_path: Alias for --workdir\.", out, re.M)
  assert bool(alias) == MAINS[module], out[-3000:]
