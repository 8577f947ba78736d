"""Runs a copy of one of scripts/*.sh with a stand-in `python3` first on
PATH that records each call's arguments instead of training."""

import os
import shutil
import stat
import subprocess
from typing import List, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))

# One line per call, its arguments tab-separated.
STAND_IN = """#!/bin/bash
printf '%s\\t' "$@" >> "$CALLS"
echo >> "$CALLS"
"""


def run_script(
    tmp_path, script: str, args: Tuple[str, ...] = (), **env
) -> Tuple[subprocess.CompletedProcess, str, List[List[str]]]:
  """(the finished process, the copy's repository root, each python3
  call's arguments) of `bash <root>/scripts/<script> <args...>` run in
  `tmp_path` with `env` added to this environment (a None value unsets that
  variable)."""
  root = tmp_path / "repo"
  (root / "scripts").mkdir(parents=True)
  shutil.copy(os.path.join(REPO, "scripts", script), root / "scripts")
  bin_dir = tmp_path / "bin"
  bin_dir.mkdir()
  fake = bin_dir / "python3"
  fake.write_text(STAND_IN)
  fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
  calls = tmp_path / "calls.txt"
  full_env = dict(
      os.environ,
      PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
      CALLS=str(calls),
  )
  full_env.update(env)
  full_env = {k: v for k, v in full_env.items() if v is not None}
  proc = subprocess.run(
      ["bash", str(root / "scripts" / script), *args],
      env=full_env,
      capture_output=True,
      text=True,
      timeout=60,
      cwd=tmp_path,
  )
  lines = calls.read_text().splitlines() if calls.exists() else []
  return proc, root, [line.rstrip("\t").split("\t") for line in lines]
