"""Results on disk: JSON written atomically, and the one plotting helper."""

import functools
import json
import os
import platform
import re
import subprocess
import tempfile
from typing import Any, Mapping, Optional, Sequence, Tuple

from relational_jax.training import errors

# (label, xs, ys) of one line.
Series = Tuple[str, Sequence[float], Sequence[float]]


@functools.lru_cache(maxsize=None)
def code_version() -> Optional[str]:
  """The git commit of the code running (12 hex digits, '+dirty' with
  uncommitted changes to tracked files), or None outside a git checkout:
  what a run record names for each part of a resumed run."""
  here = os.path.dirname(os.path.abspath(__file__))

  def git(*args):
    return subprocess.run(
        ["git", "-C", here, *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.strip()

  try:
    commit = git("rev-parse", "--short=12", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no")
  except (OSError, subprocess.SubprocessError):
    return None
  return commit + ("+dirty" if dirty else "")


def host() -> dict:
  """Where a sitting ran, as far as it changes the numbers or the speed:
  JAX's backend and device count, the CPUs this process may use,
  `XLA_FLAGS` (XLA:CPU's float path depends on its thread count, so the
  same code on 1 or 2 cores can differ in the last bits), the CPU (its
  model name and the vector extensions XLA:CPU compiles for, which change
  the rounding too) and the versions of jax, jaxlib, flax and optax (a
  sitting resumed on a machine installed afresh may run others)."""
  from importlib import metadata  # pylint: disable=g-import-not-at-top

  import jax  # pylint: disable=g-import-not-at-top

  try:
    cpus = len(os.sched_getaffinity(0))
  except AttributeError:  # not on Linux
    cpus = os.cpu_count()
  return {
      "backend": jax.default_backend(),
      "devices": jax.device_count(),
      "cpus": cpus,
      "xla_flags": os.environ.get("XLA_FLAGS", ""),
      **_cpu(),
      "versions": {
          name: metadata.version(name)
          for name in ("jax", "jaxlib", "flax", "optax")
      },
  }


# The vector extensions that change XLA:CPU's kernels.
_ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_tile")


def _cpu() -> dict:
  """{'cpu': model name, 'isa': the `_ISA_FLAGS` it has}, from
  /proc/cpuinfo (Linux); {'cpu': platform.processor()} elsewhere."""
  try:
    with open("/proc/cpuinfo") as f:
      info = f.read()
  except OSError:
    return {"cpu": platform.processor()}
  model = re.search(r"^model name\s*:\s*(.*)$", info, re.M)
  flags = re.search(r"^flags\s*:\s*(.*)$", info, re.M)
  have = set(flags.group(1).split()) if flags else set()
  return {
      "cpu": model.group(1).strip() if model else platform.processor(),
      "isa": [f for f in _ISA_FLAGS if f in have],
  }


def write_text(path: str, text: str) -> None:
  """Writes `text` to `path` atomically (a temporary file in the same
  directory, then `os.replace`): a reader never sees half a file."""
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  fd, tmp = tempfile.mkstemp(
      dir=directory, prefix=".tmp_", suffix=os.path.basename(path)
  )
  try:
    with os.fdopen(fd, "w", encoding="utf-8") as f:
      f.write(text)
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise


def write_json(path: str, value: Any) -> None:
  """Writes `value` as JSON to `path` atomically (`write_text`)."""
  write_text(path, json.dumps(value, indent=1))


def read_json(path: str) -> Any:
  """The JSON value in `path`.

  Raises:
    FileNotFoundError: `path` does not exist.
    UnreadableFileError: `path` exists but cannot be read or is not JSON
      (a `ValueError`; the message names the file).
  """
  try:
    with open(path) as f:
      return json.load(f)
  except FileNotFoundError:
    raise
  except (OSError, ValueError) as e:  # JSONDecodeError, UnicodeDecodeError
    raise errors.UnreadableFileError(path, e) from e


def plot_curves(
    series: Sequence[Series],
    path: str,
    *,
    xlabel: str,
    ylabel: str,
    title: str = "",
    log2_x: bool = False,
    ylim: Optional[Tuple[float, float]] = (-0.02, 1.02),
    error_bars: Optional[Mapping[str, Sequence[float]]] = None,
) -> None:
  """A PNG with one marked line per series (matplotlib, Agg backend);
  `error_bars` gives some series (by label) symmetric bars, one per point."""
  error_bars = dict(error_bars or {})
  unknown = set(error_bars) - {label for label, _, _ in series}
  if unknown:
    raise ValueError(
        f"error_bars for {sorted(unknown)}: no series has that label; "
        f"labels are {[label for label, _, _ in series]}"
    )
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  fig, ax = plt.subplots(figsize=(6, 4))
  for label, xs, ys in series:
    marker = "o" if log2_x else "."
    if label in error_bars:
      ax.errorbar(
          list(xs),
          list(ys),
          yerr=list(error_bars[label]),
          marker=marker,
          capsize=3,
          label=label,
      )
    else:
      ax.plot(list(xs), list(ys), marker=marker, label=label)
  if log2_x:
    ax.set_xscale("log", base=2)
  ax.set_xlabel(xlabel)
  ax.set_ylabel(ylabel)
  if ylim is not None:
    ax.set_ylim(*ylim)
  if title:
    ax.set_title(title)
  ax.grid(alpha=0.3)
  if series:
    ax.legend(fontsize=7)
  fig.tight_layout()
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  fig.savefig(path, dpi=100)
  plt.close(fig)
