"""A clean console: start-up noise of TensorFlow and dm-clrs held back.

dm-clrs imports TensorFlow, whose C++ start-up lines (oneDNN, cudart_stub,
cpu_feature_guard, "All log messages before absl::InitializeLog() ...", and
the cuInit error of the GPU probe that TensorFlow registers with
`absl.app.call_after_init`) are written to file descriptor 2 by absl's C++
logging before any log level applies: TF_CPP_MIN_LOG_LEVEL no longer hides
them (TensorFlow 2.21). `NativeCapture` holds fd 2 in a temporary file
while such code runs (`processors.tf_free` wraps the TensorFlow import with
it, `relational_jax.training.cli.run` wraps absl's init callbacks); what it
held is

  * shown by the mains when run with --verbosity=1 (or higher), once the
    flags are parsed (`replay_captured`);
  * shown at once if the wrapped code raises (the error keeps its context);
  * not captured at all, shown live, when the environment has
    RELATIONAL_JAX_VERBOSE=1 (library use, or a crash inside the import).

dm-clrs's samplers log warnings at every sampler built ("Ignoring kwargs
{'length_needle'} ...", "Sampling dataset on-the-fly, unlimited samples."),
six per CLRS run of the README's main job: `install_log_filters` moves them
to absl's DEBUG level, shown with --verbosity=1 (or RELATIONAL_JAX_VERBOSE=1).
"""

import logging
import os
import sys
import tempfile
from typing import List, Tuple

from absl import logging as absl_logging

VERBOSE_ENV = "RELATIONAL_JAX_VERBOSE"
# Files whose absl warnings are start-up chatter (moved to DEBUG).
DEMOTED_SOURCES = (os.path.join("clrs", "_src", "samplers.py"),)

_CAPTURED: List[Tuple[str, str]] = []  # (what, text) held back so far


def verbose_env() -> bool:
  """Whether RELATIONAL_JAX_VERBOSE asks for everything, live."""
  value = os.environ.get(VERBOSE_ENV, "").strip().lower()
  return value not in ("", "0", "false", "no")


class NativeCapture:
  """Holds what is written to file descriptor 2 (C++ logs included) while
  open; a context manager, or `start()` / `stop(failed)`."""

  def __init__(self, what: str):
    self.what = what
    self._saved_fd = None
    self._file = None

  def start(self) -> "NativeCapture":
    if verbose_env() or self._saved_fd is not None:
      return self
    try:
      sys.stderr.flush()
      saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # No usable fd 2.
      return self
    self._file = tempfile.TemporaryFile()
    os.dup2(self._file.fileno(), 2)
    self._saved_fd = saved
    return self

  def stop(self, failed: bool = False) -> str:
    """Restores fd 2; returns what was held (shown now if `failed`, else
    kept for `replay_captured`)."""
    if self._saved_fd is None:
      return ""
    try:
      sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
      pass
    os.dup2(self._saved_fd, 2)
    os.close(self._saved_fd)
    self._saved_fd = None
    self._file.seek(0)
    text = self._file.read().decode("utf-8", "replace")
    self._file.close()
    if text:
      if failed:
        _write_stderr(text)
      else:
        _CAPTURED.append((self.what, text))
    return text

  def __enter__(self) -> "NativeCapture":
    return self.start()

  def __exit__(self, exc_type, exc, tb) -> None:
    self.stop(failed=exc_type is not None)


def _write_stderr(text: str) -> None:
  try:
    sys.stderr.write(text)
    sys.stderr.flush()
  except (OSError, ValueError, AttributeError):
    pass


def captured() -> List[Tuple[str, str]]:
  """(what, text) of the output held back so far (not yet replayed)."""
  return list(_CAPTURED)


def replay_captured() -> None:
  """Writes the held-back output to stderr (once) and forgets it."""
  while _CAPTURED:
    what, text = _CAPTURED.pop(0)
    _write_stderr(f"[relational_jax.console: held back while {what}]\n{text}")


class _DemoteToDebug(logging.Filter):
  """Records from `DEMOTED_SOURCES` become DEBUG records, kept only where
  DEBUG is enabled (absl --verbosity >= 1) or RELATIONAL_JAX_VERBOSE is
  set."""

  def filter(self, record: logging.LogRecord) -> bool:
    if record.levelno <= logging.DEBUG or not record.pathname.endswith(
        DEMOTED_SOURCES
    ):
      return True
    record.levelno, record.levelname = logging.DEBUG, "DEBUG"
    return verbose_env() or absl_logging.get_verbosity() >= absl_logging.DEBUG


_FILTER = _DemoteToDebug()


def install_log_filters() -> None:
  """Moves dm-clrs's sampler warnings to DEBUG (idempotent)."""
  logger = absl_logging.get_absl_logger()
  if _FILTER not in logger.filters:
    logger.addFilter(_FILTER)
