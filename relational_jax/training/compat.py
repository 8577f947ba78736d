"""Work directories saved by earlier versions: what their records meant then.

`upgrade_saved` rewrites a saved config record (`config.json`) into today's
terms before the resume check compares it with the current config, so a run
saved under an older default still resumes; `upgrade_record` does the same
for a checkpoint's JSON record (the trainer's, `trainer.fit`) as it is
restored.

Records of earlier layouts:

* the graph tasks' own loop (CLUTRR, graph COGS, before the one trainer):
  no step, stream position or losses; the stream position was the step;
* seq2seq's own batch stream (before seq2seq trained on `trainer.EpochStream`
  and `trainer.make_train_step`): the position {seed, epoch, index,
  num_examples, batch_size} of a stream that visited each epoch's
  permutation `default_rng([seed, epoch])` in full batches, dropping the
  short last one. It becomes today's position, the saved step: the resumed
  run continues from the saved state (parameters, optimiser state, step,
  key) with the batch order of the new stream at that step (`EpochStream`:
  epochs of ceil(N / batch) batches, the short last one padded with
  zero-weight rows), which within the first epoch is the old order and
  later is not; its dropout keys follow the new convention
  (fold_in(key, step) of the saved key). So such a run resumes with its
  checkpoints, but not bit for bit as the old code would have continued.
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


# The position of seq2seq's former batch stream (its keys, exactly).
_OLD_SEQ2SEQ_STREAM = frozenset(
    ("seed", "epoch", "index", "num_examples", "batch_size")
)


def upgrade_record(meta: Dict, state: Any) -> Dict:
  """A checkpoint's JSON record (`meta`, restored with the training `state`)
  in today's layout: a record of the graph tasks' former loop gains the
  step, stream position, losses and best (from the state's step and the
  history's best validation accuracy); seq2seq's former stream position
  becomes the saved step (the module docstring says what that changes).
  Today's records are returned unchanged."""
  if "stream" not in meta:
    step = int(state["step"])
    scored = [h for h in meta["history"] if "val_accuracy" in h]
    top = max(scored, key=lambda h: h["val_accuracy"], default=None)
    return {
        **meta,
        "step": step,
        "stream": {"step": step},
        "losses": [],
        "best": top and {"step": top["step"], "score": top["val_accuracy"]},
    }
  stream = meta["stream"]
  if isinstance(stream, dict) and set(stream) == _OLD_SEQ2SEQ_STREAM:
    return {**meta, "stream": {"step": int(meta["step"])}}
  return meta
