"""A benchmark worker process driven over its stdin and stdout.

The side-by-side benchmarks (`pivotal`, `scan_step`) run each side in a
process of its own, pinned to the same CPUs (`sched_setaffinity`, which also
sizes XLA:CPU's and torch's thread pools), and alternate them round by round.
A worker announces itself with one `READY <json>` line, then answers each
command line with one tagged line `<TAG> <payload>`; `quit` ends it. Its
stderr goes to a log file, whose tail is raised if it dies.
"""

import json
import os
import subprocess
from typing import Any, Dict, Sequence

_REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)


class Worker:
  """One worker process; `info` is its READY payload."""

  def __init__(
      self,
      name: str,
      cmd: Sequence[str],
      cpus: Sequence[int],
      env: Dict[str, str],
      log_path: str,
  ):
    self.name = name
    self._log = open(log_path, "w")
    self.proc = subprocess.Popen(
        list(cmd),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=self._log,
        text=True,
        env=env,
        cwd=_REPO,
        preexec_fn=lambda: os.sched_setaffinity(0, cpus),
    )
    self.info = self._expect("READY")

  def _expect(self, tag: str, raw: bool = False) -> Any:
    for line in self.proc.stdout:
      if line.startswith(tag + " "):
        text = line[len(tag) + 1 :]
        return text.strip() if raw else json.loads(text)
    self.proc.wait()
    self._log.flush()
    with open(self._log.name) as f:
      tail = f.read()[-3000:]
    raise RuntimeError(
        f"{self.name} worker exited ({self.proc.returncode}) before"
        f" {tag}:\n{tail}"
    )

  def ask(self, command: str, tag: str, raw: bool = False) -> Any:
    """Sends `command`; returns the payload of the worker's `tag` line (JSON
    decoded, or the stripped text with `raw`)."""
    self.proc.stdin.write(command + "\n")
    self.proc.stdin.flush()
    return self._expect(tag, raw)

  def close(self) -> None:
    if self.proc.poll() is None:
      self.proc.stdin.write("quit\n")
      self.proc.stdin.flush()
      self.proc.wait(timeout=60)
    self._log.close()
