"""Metrics a long run writes as it trains, to watch it: JSON lines and,
when asked, TensorBoard events.

`<dir>/metrics.jsonl` gets one line per training step once its metrics are
fetched (`{"step": s, "kind": "train", "loss": ..., "grad_norm": ...}`) and
one per evaluation (`{"step": s, "kind": "eval", <the history entry>}`).
With `tensorboard`, the same scalars go to event files under
`<dir>/tensorboard` (tags `train/<name>`, `eval/<name>`), written by
tensorboardX, which needs no TensorFlow.

A resumed run continues both from its checkpoint's step: lines (and events)
past it, written after the last checkpoint of an interrupted sitting, are
dropped, so every step appears once. Only process 0 writes.
"""

import json
import math
import numbers
import os
from typing import Any, Dict, List, Mapping

import numpy as np

from relational_jax.parallel import distributed
from relational_jax.training import reporting

FILENAME = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"


def _is_scalar(value: Any) -> bool:
  """A real number: Python's, NumPy's, or a 0-d numeric array (a fetched
  metric); not a bool."""
  if isinstance(value, (bool, np.bool_)):
    return False
  if isinstance(value, np.ndarray):
    return value.ndim == 0 and np.issubdtype(value.dtype, np.number)
  return isinstance(value, numbers.Real)


def _scalars(values: Mapping[str, Any]) -> Dict[str, float]:
  """The real-number fields of `values` (nested results are left out)."""
  return {k: float(v) for k, v in values.items() if _is_scalar(v)}


def _json_number(value: float):
  return value if math.isfinite(value) else str(value)  # JSON has no NaN.


def read(directory: str) -> List[Dict[str, Any]]:
  """The records of `<directory>/metrics.jsonl`, in order. A last line cut
  short (a process killed while writing it; lines reach the disk in
  buffer-sized pieces between checkpoints) is left out; a bad line before
  the last raises ValueError naming it."""
  path = os.path.join(directory, FILENAME)
  with open(path, encoding="utf-8") as f:
    lines = f.read().split("\n")
  records = []
  for i, line in enumerate(lines):
    if not line.strip():
      continue
    try:
      records.append(json.loads(line))
    except json.JSONDecodeError as e:
      if i == len(lines) - 1:  # No newline after it: an unfinished line.
        break
      raise ValueError(f"{path}, line {i + 1}: not a JSON record ({e}).") from e
  return records


class MetricsLog:
  """Appends a run's metrics to `<directory>/metrics.jsonl` (and TensorBoard).

  Args:
    directory: where the files go (a task's work directory).
    step: the step the run starts or resumes from; records past it are
      dropped.
    tensorboard: also write TensorBoard event files.
  """

  def __init__(self, directory: str, step: int, tensorboard: bool = False):
    self._file = self._writer = None
    if not distributed.is_primary():
      return
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, FILENAME)
    if os.path.exists(path):  # Keep what the restored checkpoint covers.
      kept = [r for r in read(directory) if r["step"] <= step]
      reporting.write_text(path, "".join(json.dumps(r) + "\n" for r in kept))
    self._file = open(path, "a", encoding="utf-8")
    if tensorboard:
      try:
        import tensorboardX  # pylint: disable=g-import-not-at-top
      except ImportError as e:
        raise ImportError(
            "train.tensorboard=True needs tensorboardX "
            "(python3 -m pip install tensorboardX)."
        ) from e
      # purge_step: TensorBoard drops the events a resumed run rewrites; the
      # suffix keeps each sitting's file apart (tensorboardX names files by
      # the second, so a quick resume would overwrite the last file).
      self._writer = tensorboardX.SummaryWriter(
          os.path.join(directory, TENSORBOARD_DIR),
          purge_step=step + 1,
          filename_suffix=f".from_step_{step}",
      )

  def _write(self, step: int, kind: str, values: Mapping[str, Any]) -> None:
    if self._file is None:
      return
    scalars = _scalars(values)
    record = {"step": int(step), "kind": kind}
    record.update((k, _json_number(v)) for k, v in scalars.items())
    self._file.write(json.dumps(record) + "\n")
    if self._writer is not None:
      for name, value in scalars.items():
        self._writer.add_scalar(f"{kind}/{name}", value, int(step))

  def train(self, step: int, metrics: Mapping[str, Any]) -> None:
    """One training step's fetched metrics."""
    self._write(step, "train", metrics)

  def evaluation(self, step: int, entry: Mapping[str, Any]) -> None:
    """One evaluation's history entry (its numbers)."""
    self._write(step, "eval", entry)

  def flush(self) -> None:
    if self._file is not None:
      self._file.flush()
    if self._writer is not None:
      self._writer.flush()

  def close(self) -> None:
    if self._file is not None:
      self._file.close()
    if self._writer is not None:
      self._writer.close()
    self._file = self._writer = None
