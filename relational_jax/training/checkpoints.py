"""Orbax checkpoints for exact resume: a pytree state plus a JSON record.

A run directory holds two `orbax.checkpoint.CheckpointManager`s:

  <directory>/latest   the most recent states (keep 2, and every
                       `keep_every`-th step if asked), for resuming;
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

Integrity: every saved record carries, under `INTEGRITY_KEY`, a checksum of
each state leaf's bits (computed on device, so any sharding works) and a
SHA-256 of the record itself; `restore` recomputes both, so a truncated,
garbled or bit-flipped file is caught even where orbax/TensorStore would read
it without complaint. Restoring the newest checkpoint falls back, step by
step, to older ones ('latest' newest first, then 'best'): every checkpoint
that cannot be restored is reported by path (absl warning, `skipped`, and
the returned record's `FALLBACKS_KEY` list) and moved aside to
`<directory>/corrupt/` so the run re-saves that step. If checkpoints exist
but none restores, `CorruptCheckpointError` names them all: a run never
starts again from scratch on its own.

Several processes (`parallel.distributed`): every process creates the
`RunCheckpoints`, saves and restores together, as orbax's multi-process
managers require (orbax writes each array's data once, the shared metadata
from process 0, and synchronises the processes). The integrity record
travels inside the JSON record, which orbax writes from process 0; every
process reads and checks it, and the processes check that they all
restored the same checkpoint. A checkpoint that fails is moved aside by
process 0 alone, then all processes pass a barrier and reload their
managers. Creating a `RunCheckpoints` is itself a synchronisation point
(orbax's barriers), so whether a process creates one must never depend on
files another process may be writing at that moment; `saved_steps` reads the
directory without any synchronisation for such questions.
"""

import hashlib
import json
import os
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from absl import logging

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from jax.experimental import multihost_utils

from relational_jax.layers import shapes
from relational_jax.parallel import distributed
from relational_jax.training.errors import MIGRATE
from relational_jax.training.errors import OtherFormatError

WHICH = ("latest", "best")


def saved_steps(directory: str, which: str = "latest") -> List[int]:
  """The finalised steps in `<directory>/<which>`, read from the file system
  alone (no orbax manager, no barrier): any process may ask at any time."""
  shapes.check_choice(which, WHICH, "checkpoint set")
  path = os.path.join(directory, which)
  if not os.path.isdir(path):
    return []
  return sorted(ocp.utils.checkpoint_steps(path))


# Reserved keys of the JSON record: the integrity record (added on save,
# removed on restore) and the list of checkpoints a restore had to skip.
INTEGRITY_KEY = "_integrity"
FALLBACKS_KEY = "restore_fallbacks"


class NonFiniteStateError(ValueError):
  """Raised instead of saving a state that contains NaN or Inf."""


class CorruptCheckpointError(RuntimeError):
  """Checkpoints exist but none of those tried could be restored; the
  message names each one's path and error. Nothing is moved or deleted."""


def abstract_like(tree: Any, sharding: Any = None) -> Any:
  """`jax.ShapeDtypeStruct` for every array leaf of `tree`.

  Args:
    tree: arrays or ShapeDtypeStructs (e.g. from `jax.eval_shape`).
    sharding: a sharding for every leaf (default: the leaf's own sharding,
      if it has one).
  """

  def one(x):
    leaf_sharding = (
        sharding if sharding is not None else getattr(x, "sharding", None)
    )
    return jax.ShapeDtypeStruct(np.shape(x), x.dtype, sharding=leaf_sharding)

  return jax.tree_util.tree_map(one, tree)


@jax.jit
def _all_finite(leaves: List[Any]) -> jax.Array:
  return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


def is_finite(tree: Any) -> bool:
  """True when every floating-point leaf of `tree` is finite (one jitted
  computation, whatever the number of leaves)."""
  leaves = [
      x
      for x in jax.tree_util.tree_leaves(tree)
      if jnp.issubdtype(jnp.asarray(x).dtype, jnp.inexact)
  ]
  return bool(_all_finite(leaves)) if leaves else True


def _leaf_checksum(x) -> int:
  """A uint32 hash of the bits of array `x` and their positions, on the
  host (NumPy: no program to compile per state structure; the
  persistent-cache write of that program's executable crashed XLA 0.10.2's
  serialiser in the test suite)."""
  if jnp.issubdtype(getattr(x, "dtype", np.float32), jax.dtypes.prng_key):
    x = jax.random.key_data(x)
  a = np.asarray(jax.device_get(x)).reshape(-1)
  if a.dtype == np.bool_:
    a = a.astype(np.uint8)
  size = a.dtype.itemsize
  if size >= 4:  # size // 4 words an element for 8-byte types
    words = np.ascontiguousarray(a).view(np.uint32)
  else:
    words = (
        np.ascontiguousarray(a)
        .view({1: np.uint8, 2: np.uint16}[size])
        .astype(np.uint32)
    )
  iota = np.arange(words.size, dtype=np.uint32)
  with np.errstate(over="ignore"):  # uint32 arithmetic wraps, as intended
    h = words ^ (iota * np.uint32(0x9E3779B9))
    h = (h ^ (h >> np.uint32(16))) * np.uint32(0x85EBCA6B)  # murmur3
    h = (h ^ (h >> np.uint32(13))) * np.uint32(0xC2B2AE35)  # finaliser
    h = h ^ (h >> np.uint32(16))
    return int(np.sum(h, dtype=np.uint32))  # wraps: exact in any order


def state_checksums(tree: Any) -> Dict[str, List]:
  """{leaf path: [dtype, uint32 checksum of its bits]} of a pytree."""
  return {
      jax.tree_util.keystr(p): [str(jnp.asarray(x).dtype), _leaf_checksum(x)]
      for p, x in jax.tree_util.tree_flatten_with_path(tree)[0]
  }


def _record_hash(meta: Dict) -> str:
  """SHA-256 of `meta` as it reads back from JSON (keys sorted)."""
  canonical = json.loads(json.dumps(meta))
  return hashlib.sha256(
      json.dumps(canonical, sort_keys=True).encode()
  ).hexdigest()


def _verify(state: Any, meta: Dict, integrity: Dict) -> None:
  """Raises ValueError naming what does not match the integrity record."""
  if integrity.get("meta") != _record_hash(meta):
    raise ValueError("the JSON record does not match its saved checksum")
  saved, now = integrity.get("state", {}), state_checksums(state)
  bad = [
      path
      for path, (dtype, checksum) in now.items()
      if path in saved
      and saved[path][0] == dtype
      and saved[path][1] != checksum
  ]
  missing = sorted(set(saved) - set(now))
  if bad or missing:
    raise ValueError(
        "array data does not match the saved checksums: "
        + ", ".join((bad + [f"{m} (missing)" for m in missing])[:8])
    )


def _short(error: BaseException) -> str:
  first = (str(error).strip().splitlines() or [""])[0]
  return f"{type(error).__name__}: {first[:300]}"


class RunCheckpoints:
  """Latest and best checkpoint managers of one run directory.

  Args:
    directory: run checkpoint directory (created if missing).
    keep_latest: number of latest checkpoints kept (default 2).
    keep_best: number of best checkpoints kept (default 1).
    keep_every: also keep every latest step that is a multiple of this
      (0: none; orbax's keep_period).
    check_finite: refuse to save states with NaN/Inf (default True).

  After `restore`, `skipped` lists the checkpoints it could not restore
  (dicts: which, step, path, error, moved_to).
  """

  def __init__(
      self,
      directory: str,
      keep_latest: int = 2,
      keep_best: int = 1,
      check_finite: bool = True,
      keep_every: int = 0,
  ):
    for name, keep in (("keep_latest", keep_latest), ("keep_best", keep_best)):
      if keep < 1:
        raise ValueError(f"{name} must be >= 1, got {keep}.")
    if keep_every < 0:
      raise ValueError(f"keep_every must be >= 0, got {keep_every}.")
    self.directory = os.path.abspath(directory)
    self.check_finite = check_finite
    self.skipped: List[Dict] = []
    self._managers = {
        which: ocp.CheckpointManager(
            os.path.join(self.directory, which),
            options=ocp.CheckpointManagerOptions(
                max_to_keep=keep,
                keep_period=period or None,
                create=True,
                enable_async_checkpointing=False,
            ),
        )
        for which, keep, period in (
            ("latest", keep_latest, keep_every),
            ("best", keep_best, 0),
        )
    }

  def _manager(self, which: str) -> ocp.CheckpointManager:
    shapes.check_choice(which, WHICH, "checkpoint set")
    return self._managers[which]

  def latest_step(self, which: str = "latest") -> Optional[int]:
    """Newest saved step of `which` ('latest' or 'best'), None if empty."""
    return self._manager(which).latest_step()

  def all_steps(self, which: str = "latest"):
    return list(self._manager(which).all_steps())

  def save(
      self, step: int, state: Any, meta: Dict, *, best: bool = False
  ) -> None:
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
          f"Inf; the previous checkpoints in {self.directory} are kept."
      )
    for which in ("latest", "best") if best else ("latest",):
      self.save_to(which, step, state, meta)

  def save_to(self, which: str, step: int, state: Any, meta: Dict) -> None:
    """Saves `state` and `meta` (with their integrity record) as step `step`
    of checkpoint set `which` alone, unless it is saved already."""
    mgr = self._manager(which)
    if step in mgr.all_steps():
      return
    record = {k: v for k, v in meta.items() if k != INTEGRITY_KEY}
    record[INTEGRITY_KEY] = {
        "state": state_checksums(state),
        "meta": _record_hash(record),
    }
    mgr.save(
        step,
        args=ocp.args.Composite(
            state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(record)
        ),
        force=True,
    )
    mgr.wait_until_finished()

  def step_path(self, which: str, step: int) -> str:
    return os.path.join(self.directory, which, str(step))

  def _restore_one(
      self, abstract_state: Any, which: str, step: int
  ) -> Tuple[Any, Dict]:
    """Restores and verifies one checkpoint; raises on any problem
    (`OtherFormatError`: a record without `INTEGRITY_KEY`)."""
    restored = self._restore_files(abstract_state, which, step)
    state, meta = restored["state"], restored["meta"]
    if not isinstance(meta, dict):
      raise ValueError(f"the JSON record is {type(meta).__name__}, not a dict")
    meta = dict(meta)
    if INTEGRITY_KEY not in meta:
      raise OtherFormatError(
          f"checkpoint {self.step_path(which, step)} has no integrity record: "
          "it was written by another version of the library; convert its "
          f"work directory once with `python3 {MIGRATE} <workdir>`."
      )
    _verify(state, meta, meta.pop(INTEGRITY_KEY))
    return state, meta

  def _restore_files(self, abstract_state: Any, which: str, step: int):
    return self._manager(which).restore(
        step,
        args=ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract_state),
            meta=ocp.args.JsonRestore(),
        ),
    )

  def _move_aside(self, which: str, step: int) -> Optional[str]:
    """Moves a bad checkpoint to `<directory>/corrupt/` (kept for
    inspection) so that the step is saved afresh; returns where to (None on
    processes other than 0, which leave the files to process 0). The
    managers must be reloaded afterwards (`restore` does, on every process,
    after a barrier)."""
    source = self.step_path(which, step)
    if jax.process_index() != 0 or not os.path.isdir(source):
      return None
    target = os.path.join(
        self.directory,
        "corrupt",
        f"{which}_{step}_{time.strftime('%Y%m%d-%H%M%S')}_{os.getpid()}",
    )
    os.makedirs(os.path.dirname(target), exist_ok=True)
    os.replace(source, target)
    return target

  def restore(
      self,
      abstract_state: Any,
      which: str = "latest",
      step: Optional[int] = None,
  ) -> Optional[Tuple[Any, Dict]]:
    """(state, meta) of `step` (default: the newest) of `which`, restored
    into `abstract_state` (see `abstract_like`) and checked against the
    checksums saved with it; None if there is no checkpoint.

    Without `step`, a checkpoint that cannot be restored (missing or
    truncated file, garbage, checksum mismatch) is reported and skipped:
    the steps of `which` are tried newest first, then (for 'latest') those
    of 'best'. The skipped ones are logged (absl warning), moved to
    `<directory>/corrupt/` once a good one is restored, listed in
    `self.skipped` and appended to the returned record's
    `FALLBACKS_KEY` ("restore_fallbacks") list, which a run carries on.

    Raises:
      CorruptCheckpointError: a given `step` cannot be restored, or
        checkpoints exist and none of them can (nothing is moved: the run
        must not start from scratch unnoticed).
      OtherFormatError: a checkpoint of another version (nothing is moved).
    """
    self.skipped = []
    if step is not None:
      candidates = [(which, step)]
    else:
      candidates = [
          (which, s) for s in sorted(self.all_steps(which), reverse=True)
      ]
      if which == "latest":
        candidates += [
            ("best", s) for s in sorted(self.all_steps("best"), reverse=True)
        ]
    if not candidates:
      return None
    failures = []
    for source, s in candidates:
      try:
        state, meta = self._restore_one(abstract_state, source, s)
      except OtherFormatError:
        raise
      except Exception as e:  # pylint: disable=broad-except
        failures.append({
            "which": source,
            "step": s,
            "path": self.step_path(source, s),
            "error": _short(e),
        })
        logging.warning(
            "checkpoint %s cannot be restored (%s)%s",
            self.step_path(source, s),
            _short(e),
            "" if step is not None else "; trying an older one",
        )
        if step is not None:
          break
        continue
      self._check_agreement(source, s)
      if failures:
        for failure in failures:
          failure["moved_to"] = self._move_aside(
              failure["which"], failure["step"]
          )
          failure["restored_instead"] = {"which": source, "step": s}
          logging.warning(
              "skipped unrestorable checkpoint %s (%s), moved to %s; "
              "restored %s step %d (%s) instead.",
              failure["path"],
              failure["error"],
              failure["moved_to"],
              source,
              s,
              self.step_path(source, s),
          )
        # Every process must see the moved steps before it saves again.
        distributed.barrier("relational_jax.checkpoints.move_aside")
        for moved in {f["which"] for f in failures}:
          self._manager(moved).reload()
        meta[FALLBACKS_KEY] = list(meta.get(FALLBACKS_KEY, [])) + failures
      self.skipped = failures
      return state, meta
    self.skipped = failures
    self._check_agreement(None, None)
    raise CorruptCheckpointError(
        f"{len(failures)} checkpoint(s) in {self.directory} exist but none "
        "could be restored: "
        + "; ".join(f"{f['path']}: {f['error']}" for f in failures)
        + ". Refusing to start from scratch: move them away (or use a new "
        "directory) to train afresh."
    )

  def _check_agreement(self, which: Optional[str], step: Optional[int]) -> None:
    """With several processes: raises CorruptCheckpointError unless every
    process restored the same checkpoint (`which`, `step`; None: none), so
    that a checkpoint read differently by different processes stops the run
    instead of leaving the processes out of step."""
    if jax.process_count() == 1:
      return
    mine = np.array(
        [
            -1 if which is None else WHICH.index(which),
            -1 if step is None else step,
        ],
        np.int64,
    )
    every = np.asarray(multihost_utils.process_allgather(mine))
    if not np.all(every == every[0]):
      restored = ", ".join(
          f"process {i}: " + ("none" if w < 0 else f"{WHICH[w]} step {t}")
          for i, (w, t) in enumerate(every.tolist())
      )
      raise CorruptCheckpointError(
          f"the processes restored different checkpoints of {self.directory}"
          f" ({restored}); check the files every process reads."
      )

  def close(self) -> None:
    for mgr in self._managers.values():
      mgr.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()
    return False
