"""Orbax checkpoints for exact resume: a pytree state plus a JSON record.

A run directory holds two `orbax.checkpoint.CheckpointManager`s:

  <directory>/latest   the most recent states (keep 2), for resuming;
  <directory>/best     the selected state (keep 1), for evaluation.

Every checkpoint is `ocp.args.Composite(state=StandardSave(state),
meta=JsonSave(meta))`: `state` is any pytree of arrays (params, optimiser
state, step, RNG key), `meta` a JSON-serialisable dict (data-stream
position, history, best score, ...). Restoring goes into an abstract target
(`jax.ShapeDtypeStruct`s with shardings, see `abstract_like`), so arrays come
back with the target's structure, dtypes and shardings.

Safety: a state with a non-finite float leaf is refused (`NonFiniteStateError`)
before anything is written, so a diverged run can never rotate a good
checkpoint out; orbax writes to a temporary directory and renames it on
success, and deletes old steps only after a new one is complete.
"""

import os
from typing import Any, Dict, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

from relational_jax.layers import shapes

WHICH = ("latest", "best")


class NonFiniteStateError(ValueError):
  """Raised instead of saving a state that contains NaN or Inf."""


def abstract_like(tree: Any, sharding: Any = None) -> Any:
  """`jax.ShapeDtypeStruct` for every array leaf of `tree`.

  Args:
    tree: arrays or ShapeDtypeStructs (e.g. from `jax.eval_shape`).
    sharding: a sharding for every leaf (default: the leaf's own sharding,
      if it has one).
  """
  def one(x):
    leaf_sharding = sharding if sharding is not None else getattr(
        x, "sharding", None)
    return jax.ShapeDtypeStruct(np.shape(x), x.dtype, sharding=leaf_sharding)
  return jax.tree_util.tree_map(one, tree)


def is_finite(tree: Any) -> bool:
  """True when every floating-point leaf of `tree` is finite."""
  flags = [jnp.all(jnp.isfinite(x)) for x in jax.tree_util.tree_leaves(tree)
           if jnp.issubdtype(jnp.asarray(x).dtype, jnp.inexact)]
  return bool(jnp.all(jnp.stack(flags))) if flags else True


class RunCheckpoints:
  """Latest and best checkpoint managers of one run directory.

  Args:
    directory: run checkpoint directory (created if missing).
    keep_latest: number of latest checkpoints kept (default 2).
    keep_best: number of best checkpoints kept (default 1).
    check_finite: refuse to save states with NaN/Inf (default True).
  """

  def __init__(self, directory: str, keep_latest: int = 2, keep_best: int = 1,
               check_finite: bool = True):
    for name, keep in (("keep_latest", keep_latest), ("keep_best", keep_best)):
      if keep < 1:
        raise ValueError(f"{name} must be >= 1, got {keep}.")
    self.directory = os.path.abspath(directory)
    self.check_finite = check_finite
    self._managers = {
        which: ocp.CheckpointManager(
            os.path.join(self.directory, which),
            options=ocp.CheckpointManagerOptions(
                max_to_keep=keep, create=True,
                enable_async_checkpointing=False))
        for which, keep in (("latest", keep_latest), ("best", keep_best))}

  def _manager(self, which: str) -> ocp.CheckpointManager:
    shapes.check_choice(which, WHICH, "checkpoint set")
    return self._managers[which]

  def latest_step(self, which: str = "latest") -> Optional[int]:
    """Newest saved step of `which` ('latest' or 'best'), None if empty."""
    return self._manager(which).latest_step()

  def all_steps(self, which: str = "latest"):
    return list(self._manager(which).all_steps())

  def save(self, step: int, state: Any, meta: Dict, *,
           best: bool = False) -> None:
    """Saves `state` and `meta` as step `step` of 'latest' (and of 'best' if
    `best`). Synchronous: the files are complete when this returns. A step
    that is already saved is kept as it is.

    Raises:
      NonFiniteStateError: if `check_finite` and `state` has NaN/Inf; no
        file is written and no old checkpoint is deleted.
    """
    if self.check_finite and not is_finite(state):
      raise NonFiniteStateError(
          f"refusing to checkpoint step {step}: the state contains NaN or "
          f"Inf; the previous checkpoints in {self.directory} are kept.")
    for which in ("latest", "best") if best else ("latest",):
      mgr = self._manager(which)
      if step in mgr.all_steps():
        continue
      mgr.save(step, args=ocp.args.Composite(
          state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)),
               force=True)
      mgr.wait_until_finished()

  def restore(self, abstract_state: Any, which: str = "latest",
              step: Optional[int] = None) -> Optional[Tuple[Any, Dict]]:
    """(state, meta) of `step` (default: the newest) of `which`, restored
    into `abstract_state` (see `abstract_like`); None if there is none."""
    mgr = self._manager(which)
    step = mgr.latest_step() if step is None else step
    if step is None:
      return None
    restored = mgr.restore(step, args=ocp.args.Composite(
        state=ocp.args.StandardRestore(abstract_state),
        meta=ocp.args.JsonRestore()))
    return restored["state"], dict(restored["meta"])

  def close(self) -> None:
    for mgr in self._managers.values():
      mgr.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()
    return False
