"""One writer per work directory: a lock held for the whole run.

Every task's `train_and_evaluate` holds `<workdir>/.lock` (an exclusive,
non-blocking `flock`) from after its config is validated until it returns,
on process 0 of a multi-process run (one lock per run for all its
processes). A second run started on the same directory, by a second
terminal or a scheduler retrying a job that still runs, ends at once with
`WorkdirInUseError` (one line naming the holder: host, pid, since when;
exit status 2 from the mains) before it touches anything. The operating
system releases the lock when its holder dies, so a killed run restarts at
once (its `.lock` file stays; the next run takes it over). A run that ends
removes the file. Within one process the lock is re-entrant (a run resumed in the same
process, or a task calling another on its directory).
"""

import contextlib
import datetime
import fcntl
import json
import os
import socket
from typing import Dict

from relational_jax.parallel import distributed
from relational_jax.training import errors

FILENAME = ".lock"
_held: Dict[str, int] = {}  # realpath -> the lock file's descriptor


class WorkdirInUseError(errors.UserError):
  """Another run holds the work directory."""


def _holder(fd: int) -> str:
  os.lseek(fd, 0, os.SEEK_SET)
  try:
    info = json.loads(os.read(fd, 4096).decode() or "{}")
  except ValueError:
    info = {}
  if not info:
    return "a run that has not yet written who it is"
  return f"host {info['host']}, pid {info['pid']}, since {info['since']}"


@contextlib.contextmanager
def hold(workdir: str):
  """Holds `workdir`'s lock while the block runs (module docstring).

  Raises:
    WorkdirInUseError: another process holds it; nothing was changed.
  """
  if not distributed.is_primary():
    yield
    return
  key = os.path.realpath(workdir)
  if key in _held:  # This process holds it already.
    yield
    return
  created = not os.path.exists(workdir)
  os.makedirs(workdir, exist_ok=True)
  path = os.path.join(workdir, FILENAME)
  while True:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = _holder(fd)
      os.close(fd)
      raise WorkdirInUseError(
          f"work directory {workdir} is in use by another run ({holder}); "
          "wait for it to end or stop it, or use another --workdir."
      ) from None
    try:  # Still the file at `path` (a holder unlinks it as it ends)?
      if os.stat(path).st_ino == os.fstat(fd).st_ino:
        break
    except FileNotFoundError:
      pass
    os.close(fd)
  since = datetime.datetime.now(datetime.timezone.utc).strftime(
      "%Y-%m-%dT%H:%M:%SZ"
  )
  os.ftruncate(fd, 0)
  os.pwrite(
      fd,
      json.dumps(
          {"host": socket.gethostname(), "pid": os.getpid(), "since": since}
      ).encode(),
      0,
  )
  _held[key] = fd
  try:
    yield
  finally:
    del _held[key]
    # The file goes with the run, so a run leaves the directory as it found
    # it but for what it wrote (and a directory it made and left empty).
    os.unlink(path)
    if created and not os.listdir(workdir):
      os.rmdir(workdir)
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
