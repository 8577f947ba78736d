"""The evaluation curve a reference wrapper writes: `<out_dir>/curve.jsonl`.

Shared by the wrappers in this directory, which run in the authors'
environments (standard library only; each wrapper is run as a script, so
this directory is on its `sys.path`). One JSON object per evaluation point,
each with its "step"; a point is appended when the run is checkpointed, so
on resume the points after the checkpoint's step are dropped.
"""

import json
import os
from typing import Mapping, Optional


def restart(path: str, checkpoint_step: Optional[int]) -> None:
  """Prepares `path` for a run: a fresh run (`checkpoint_step` None) starts
  an empty curve; a resumed one keeps the points up to its checkpoint."""
  if checkpoint_step is None:
    if os.path.exists(path):
      os.remove(path)
    return
  with open(path) as f:
    kept = [
        line
        for line in f
        if line.strip() and json.loads(line)["step"] <= checkpoint_step
    ]
  with open(path, "w") as f:
    f.writelines(kept)


def append(path: str, point: Mapping) -> None:
  """Appends one evaluation point."""
  with open(path, "a") as f:
    f.write(json.dumps(point) + "\n")
