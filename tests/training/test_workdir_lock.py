"""One writer per work directory (`workdir_lock`): a second run on a work
directory in use is refused before it touches anything, for every task; a
killed holder's lock is free at once."""

import os
import signal
import subprocess
import sys

import pytest

from relational_jax.training import registry
from relational_jax.training import workdir_lock

REPO = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
HOLD = (
    "import sys, time\n"
    "from relational_jax.training import workdir_lock\n"
    "with workdir_lock.hold(sys.argv[1]):\n"
    "  print('held', flush=True)\n"
    "  time.sleep(600)\n"
)


@pytest.fixture
def holder(tmp_path):
  """A process holding `tmp_path / 'run'`, as a run in progress does."""
  workdir = tmp_path / "run"
  proc = subprocess.Popen(
      [sys.executable, "-c", HOLD, str(workdir)],
      stdout=subprocess.PIPE,
      text=True,
      cwd=REPO,
  )
  assert proc.stdout.readline().strip() == "held"
  yield workdir, proc
  proc.kill()
  proc.wait()


@pytest.mark.parametrize("name", sorted(registry.TASKS))
def test_a_second_run_is_refused_naming_the_holder(name, holder):
  workdir, proc = holder
  task = registry.get(name)
  with pytest.raises(
      workdir_lock.WorkdirInUseError,
      match=rf"in use by another run \(host .*, pid {proc.pid}, since 20",
  ):
    task.train_and_evaluate(task.default_config(), str(workdir))
  assert os.listdir(workdir) == [workdir_lock.FILENAME]  # Nothing touched.


def test_a_killed_run_frees_its_work_directory_at_once(holder):
  workdir, proc = holder
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  with workdir_lock.hold(str(workdir)):
    with workdir_lock.hold(str(workdir)):  # Re-entrant in one process.
      pass
  with workdir_lock.hold(str(workdir)):  # Released on leaving.
    pass


def test_the_main_exits_2_with_one_line(holder):
  workdir, proc = holder
  out = subprocess.run(
      [sys.executable, "-m", "experiments.clrs_train", f"--workdir={workdir}"],
      capture_output=True,
      text=True,
      cwd=REPO,
      timeout=300,
  )
  assert out.returncode == 2
  lines = out.stderr.strip().splitlines()
  assert len(lines) == 1 and f"pid {proc.pid}" in lines[0], out.stderr
