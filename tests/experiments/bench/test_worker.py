"""bench.worker: the READY / command / tagged-line protocol, and a worker
that dies before answering."""

import sys

import pytest

from experiments.bench import worker

_ECHO = """
import json, sys
print("READY " + json.dumps({"pid": 1}), flush=True)
for line in sys.stdin:
  verb, *rest = line.split()
  if verb == "quit":
    break
  if verb == "die":
    print("dying on purpose", file=sys.stderr, flush=True)
    sys.exit(3)
  if verb == "save":
    print("SAVED " + rest[0], flush=True)
  else:
    print("noise", flush=True)
    print("TIMES " + json.dumps([float(r) for r in rest]), flush=True)
"""


def _start(tmp_path):
  return worker.Worker(
      "echo",
      [sys.executable, "-c", _ECHO],
      cpus=[0],
      env={},
      log_path=str(tmp_path / "echo.log"),
  )


def test_a_worker_answers_each_command_with_its_tagged_line(tmp_path):
  w = _start(tmp_path)
  try:
    assert w.info == {"pid": 1}
    assert w.ask("run 1.5 2", "TIMES") == [1.5, 2.0]
    assert w.ask("save /tmp/x y.npz", "SAVED", raw=True) == "/tmp/x"
  finally:
    w.close()
  assert w.proc.returncode == 0


def test_a_dead_worker_raises_with_its_log(tmp_path):
  w = _start(tmp_path)
  with pytest.raises(
      RuntimeError, match=r"(?s)echo worker exited \(3\) .*on purpose"
  ):
    w.ask("die", "TIMES")
  w.close()
