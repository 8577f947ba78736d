"""Work directories saved by earlier versions: what their records meant then.

`upgrade_saved` rewrites a saved config record (`config.json`) into today's
terms before the resume check compares it with the current config, so a run
saved under an older default still resumes.
"""

import copy
import os
from typing import Any, Dict, Mapping

from relational_jax.data import paths as data_paths

# The data directories of earlier versions, beside the repository: the same
# files (pinned by SHA-256, data/paths.py) as the shipped ones.
_OLD_DATA_ROOT = os.path.join("shared", "data")


def _shipped_equivalent(path: str) -> str:
  """The shipped directory an old default data directory held, else `path`."""
  norm = os.path.normpath(path)
  head, sep, tail = norm.rpartition(os.sep + _OLD_DATA_ROOT)
  if not sep or not head:
    return path
  shipped = os.path.join(data_paths.OFFICIAL_DIR, tail.lstrip(os.sep))
  return os.path.normpath(shipped) if os.path.isdir(shipped) else path


def upgrade_saved(saved: Mapping[str, Any]) -> Dict[str, Any]:
  """A copy of a saved config record in today's terms: `data.data_dir` at an
  old default (the `data` directory of the `shared` folder beside the
  repository, or its `cogs` / `clutrr/...` subdirectories) becomes the shipped
  directory holding the same files."""
  out = copy.deepcopy(dict(saved))
  data = out.get("data")
  if isinstance(data, dict) and isinstance(data.get("data_dir"), str):
    data["data_dir"] = _shipped_equivalent(data["data_dir"])
  return out
