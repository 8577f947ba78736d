"""The one training loop of relational_jax: `fit(task, loop, checkpoint_dir)`.

Every task (CLRS, seq2seq, CLUTRR, graph COGS, and a user's own) supplies
only what differs (`Trainee`): its training state, a batch stream whose position
is checkpointed, one training step, and its evaluation. The trainer owns the
rest, identically for all of them:

* resume: the newest 'latest' checkpoint (orbax, `RunCheckpoints`; a
  corrupt one is reported, moved aside and the previous good one used) gives
  the state and the stream position, so a resumed run trains on the batches
  and dropout keys an uninterrupted one would;
* steps to `loop.steps`, or to `loop.stop_at_step` (checkpointed there;
  rerun to resume);
* metrics stay on the device between fetches (one `jax.device_get` every
  `loop.fetch_every` steps and at every evaluation or checkpoint, not a host
  sync per step); a non-finite loss or gradient norm stops the run with
  `NonFiniteLossError` naming the step, before anything of it is saved;
* evaluates every `loop.eval_every` steps and at the last step; the task's
  score (higher is better; None selects the last evaluation) decides the
  'best' checkpoint; a task's optional `evaluate_best` adds the fields that
  only a new best checkpoint (and the last step) needs;
* checkpoints every `loop.checkpoint_every` steps (0: at evaluations), with
  a JSON record: step, stream position, per-step losses, history, best,
  train seconds, the sittings that trained, checkpoint fallbacks;
* a progress bar (tqdm) with the loss and the scores;
* every fetched training metric and every evaluation appended to
  `metrics.jsonl` as the run goes, and to TensorBoard event files with
  `loop.tensorboard` (`metrics_log`), to watch a long run;
* the run record (`RunRecord.to_json`): the same keys for every task.

Files: checkpoints are saved and restored by every process together (orbax
coordinates them); the metrics files and the tasks' own files are written by
process 0 only (`parallel.distributed.is_primary`).
"""

import dataclasses
import math
import numbers
import os
import time
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import tqdm

from relational_jax.layers import shapes
from relational_jax.layers.shapes import check_choice
from relational_jax.parallel import mesh as mesh_lib
from relational_jax.training import checkpoints as ckpt_lib
from relational_jax.training import metrics_log
from relational_jax.training import prng
from relational_jax.training import reporting
from relational_jax.training import errors
from relational_jax.training.errors import NonFiniteLossError
from relational_jax.training.errors import UserError

# Per-step metrics checked for NaN/Inf (when the step function returns them).
FINITE_METRICS = ("loss", "grad_norm")


class BatchStream(Protocol):
  """The training batches, in order; its position is checkpointed."""

  def __next__(self) -> Any:
    """The (device-placed) batch of the next step."""

  def get_state(self) -> Dict:
    """The position, JSON-serialisable."""

  def set_state(self, state: Dict) -> None:
    """Continues from a position `get_state` returned."""


class Trainee(Protocol):
  """What a task supplies to `fit`.

  Attributes:
    stream: the training batches (`BatchStream`).
  """

  stream: BatchStream

  def init_state(self) -> Any:
    """A fresh training state (a pytree of arrays), placed on the mesh."""

  def abstract_state(self) -> Any:
    """ShapeDtypeStructs (with shardings) of the state, for restoring."""

  def train_step(self, state: Any, batch: Any, step: int) -> Tuple[Any, Dict]:
    """(new state, {metric: device scalar}) of one step; `step` is 0-based.
    'loss' is required; every other metric is recorded per evaluation as
    'train_<name>' (its mean since the previous evaluation)."""

  def evaluate(self, state: Any, step: int) -> Tuple[Dict, Optional[float]]:
    """(history entry, selection score) after `step` steps (1-based): the
    entry's fields go into the history; the score (higher is better, None:
    select the last evaluation) decides the best checkpoint."""

  # Optional: `evaluate_best(state, step) -> Dict`, history fields scored
  # only at an evaluation that becomes the best checkpoint and at the last
  # step (an expensive score read at the best checkpoint only, as a test
  # set scored where validation selects); a `None` attribute: none.
  # Optional: `selection: str`, what the score measures when a task's setting
  # chooses it (seq2seq: the selection set); the best is recorded with it,
  # and a run resumed with another chooses its best anew.


@dataclasses.dataclass(frozen=True)
class LoopSettings:
  """The trainer's settings.

  steps: training steps of the whole run.
  eval_every: evaluate every this many steps (and at the last step).
  checkpoint_every: save 'latest' every this many steps (0: at evaluations).
  keep_every: besides the newest two, keep every saved 'latest' step that
    is a multiple of this (0: none), to score the run later at those steps;
    a multiple of `eval_every` or of `checkpoint_every` (the saved steps).
  stop_at_step: stop (checkpointed) at this step (0: run to `steps`).
  fetch_every: bring the metrics to the host at least every this many
    steps (for the progress bar and the non-finite check).
  progress: show a progress bar.
  description: the progress bar's label.
  tensorboard: also write the metrics as TensorBoard events (`metrics_log`).
  """

  steps: int
  eval_every: int
  checkpoint_every: int = 0
  keep_every: int = 0
  stop_at_step: int = 0
  fetch_every: int = 25
  progress: bool = True
  description: str = ""
  tensorboard: bool = False

  def __post_init__(self):
    shapes.check_bool_fields(self)
    for name, least in (
        ("steps", 1),
        ("eval_every", 1),
        ("fetch_every", 1),
        ("checkpoint_every", 0),
        ("keep_every", 0),
        ("stop_at_step", 0),
    ):
      value = getattr(self, name)
      if (
          not isinstance(value, numbers.Integral)
          or isinstance(value, bool)
          or value < least
      ):
        raise ValueError(f"{name} must be an int >= {least}, got {value!r}.")
    if self.stop_at_step > self.steps:
      raise ValueError(
          f"stop_at_step={self.stop_at_step} is past steps={self.steps}: the "
          "run would never stop there (0 runs to steps)."
      )
    problem = keep_every_problem(
        self.keep_every, self.eval_every, self.checkpoint_every
    )
    if problem:
      raise ValueError(problem)


def keep_every_problem(
    keep_every: int, eval_every: int, checkpoint_every: int
) -> str:
  """Why `keep_every` keeps no step `fit` saves ('' if it does): a saved
  step is an evaluation (`eval_every`) or a multiple of `checkpoint_every`,
  so a kept one must be a multiple of either."""
  if not keep_every or keep_every % eval_every == 0:
    return ""
  if checkpoint_every and keep_every % checkpoint_every == 0:
    return ""
  return (
      f"keep_every={keep_every} is a multiple of neither eval_every="
      f"{eval_every} nor checkpoint_every={checkpoint_every}: the steps it "
      "keeps would never be saved."
  )


@dataclasses.dataclass
class RunRecord:
  """What `fit` hands back: the run record and the final state.

  step: steps trained; complete: step == loop.steps (False after a planned
  stop). losses: per-step training losses. history: one entry per
  evaluation ({'step', 'loss' (mean since the previous evaluation),
  'train_<metric>', task fields}). best: {'step', 'score', 'entry', 'selection'
  (the task's, '' without one)} of the best evaluation (None before the
  first). train_seconds: training wall
  time, summed over resumptions. sittings: one entry per `fit` call that
  trained, in order: {'started' (UTC, ISO 8601), 'from_step', 'to_step',
  'code' (the git commit that ran it, `reporting.code_version`), 'host'
  (backend, devices, usable CPUs, XLA_FLAGS, package versions:
  `reporting.host`; absent in sittings saved before it),
  'seconds' (wall, evaluations included), 'cpu_seconds' (this process's
  CPU time: all its threads, so up to the core count x the wall time while it
  has the cores; far less while paused or sharing them), 'steps_per_s'
  ((to_step - from_step) / seconds; None for a sitting of no time)}; a
  checkpoint saved before the field existed contributes only the sittings
  after it.
  checkpoint_fallbacks: checkpoints that
  could not be restored and were moved aside. num_params: parameter count
  (of state['params'] when the state has them).
  """

  step: int
  complete: bool
  state: Any
  losses: List[float]
  history: List[Dict]
  best: Optional[Dict]
  train_seconds: float
  sittings: List[Dict]
  checkpoint_fallbacks: List[Dict]
  num_params: int

  def to_json(self) -> Dict:
    """The run record (every field but the state)."""
    return {
        "steps": self.step,
        "complete": self.complete,
        "num_params": self.num_params,
        "train_seconds": self.train_seconds,
        "sittings": self.sittings,
        "losses": self.losses,
        "history": self.history,
        "best": self.best,
        "checkpoint_fallbacks": self.checkpoint_fallbacks,
    }


def count_params(state: Any) -> int:
  params = state.get("params", state) if isinstance(state, dict) else state
  return int(
      sum(np.prod(np.shape(x)) for x in jax.tree_util.tree_leaves(params))
  )


@dataclasses.dataclass
class RunState:
  """The run's record, checkpointed with the training state (the JSON
  record of `checkpoints.RunCheckpoints`): step; stream (the batch stream's
  position, `BatchStream.get_state`); losses, history, best, train_seconds
  and sittings (as in `RunRecord`); keep_every (the `LoopSettings` value it
  was saved under, what a resume must keep); since_eval (per-step metrics
  since the last evaluation); restore_fallbacks (checkpoints moved aside by
  restores, `checkpoints.FALLBACKS_KEY`)."""

  step: int
  stream: Any
  losses: List[float]
  history: List[Dict]
  best: Optional[Dict]
  train_seconds: float
  sittings: List[Dict]
  keep_every: int = 0
  since_eval: Dict[str, List[float]] = dataclasses.field(default_factory=dict)
  restore_fallbacks: List[Dict] = dataclasses.field(default_factory=list)

  @classmethod
  def fresh(cls, stream: BatchStream) -> "RunState":
    return cls(
        step=0,
        stream=stream.get_state(),
        losses=[],
        history=[],
        best=None,
        train_seconds=0.0,
        sittings=[],
    )

  @classmethod
  def from_json(
      cls, record: Dict, stream: BatchStream, checkpoint_dir: str
  ) -> "RunState":
    """The state of a restored `record`; `errors.OtherFormatError` where it
    is not in today's layout (its fields, a best with its selection, the
    stream position's fields)."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    required = [
        n
        for n, f in fields.items()
        if f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    problems = sorted(set(required) - set(record))
    problems += sorted(f"unknown {k}" for k in set(record) - set(fields))
    best = record.get("best")
    if isinstance(best, dict) and "selection" not in best:
      problems.append("best.selection")
    position, fresh = record.get("stream"), stream.get_state()
    if isinstance(position, dict) and set(position) != set(fresh):
      problems.append(f"stream {sorted(position)}")
    if problems:
      raise errors.OtherFormatError(
          f"the checkpoint record in {checkpoint_dir} is not in this "
          f"version's layout ({', '.join(problems)}); convert its work "
          f"directory once with `python3 {errors.MIGRATE} <workdir>`."
      )
    return cls(**record)

  def to_json(self) -> Dict:
    return dataclasses.asdict(self)


def _with_rate(sitting: Dict) -> Dict:
  """A sitting with its steps per second of wall time (evaluations
  included), derived on output, so a sitting saved without it gets it too."""
  seconds, steps = sitting["seconds"], sitting["to_step"] - sitting["from_step"]
  return {**sitting, "steps_per_s": steps / seconds if seconds > 0 else None}


def _mean(values: List[float]) -> float:
  return float(np.mean(values)) if values else float("nan")


def fit(
    task: Trainee,
    loop: LoopSettings,
    checkpoint_dir: str,
    log: Callable[[str], None] = print,
    metrics_dir: Optional[str] = None,
) -> RunRecord:
  """Trains (or resumes) `task` in `checkpoint_dir`; see the module docstring.

  The metrics files go to `metrics_dir` (default: `checkpoint_dir`).

  Raises:
    NonFiniteLossError: a loss or gradient norm was NaN/Inf (the message
      names the step and the last good checkpoint, which is kept).
    CorruptCheckpointError: checkpoints exist and none can be restored.
  """
  stop = min(loop.steps, loop.stop_at_step or loop.steps)
  selection = getattr(task, "selection", "")
  save_every = loop.checkpoint_every or loop.eval_every
  with ckpt_lib.RunCheckpoints(
      checkpoint_dir, keep_every=loop.keep_every
  ) as ckpts:
    restored = ckpts.restore(task.abstract_state())
    if restored is None:
      state, run = task.init_state(), RunState.fresh(task.stream)
    else:
      state, saved = restored
      run = RunState.from_json(saved, task.stream, checkpoint_dir)
      if run.step > loop.steps:  # Its record would mix two configs.
        raise UserError(
            f"the checkpoint in {checkpoint_dir} is at step {run.step}, "
            f"past train.steps={loop.steps}: rerun with train.steps >= "
            f"{run.step}, or use another work directory."
        )
      _check_kept(ckpts, checkpoint_dir, run.keep_every, loop)
      task.stream.set_state(run.stream)
      for skipped in ckpts.skipped:
        log(
            f"checkpoint {skipped['path']} could not be restored "
            f"({skipped['error']}); moved to {skipped['moved_to']}"
        )
      log(f"resumed at step {run.step} from {checkpoint_dir}")
      best = run.best
      if best is not None and best["selection"] != selection:
        log(
            f"the best checkpoint (step {best['step']}) was selected on "
            f"{best['selection']!r}, this sitting selects on {selection!r}: "
            "the best is chosen anew from the next evaluation on"
        )
        run.best = None
    run.keep_every = loop.keep_every  # What the next resume protects.
    step = int(run.step)
    last_saved = ckpts.latest_step()
    metrics = metrics_log.MetricsLog(
        metrics_dir or checkpoint_dir, step, loop.tensorboard
    )
    # Per-step metrics not yet fetched, and fetched since the last evaluation.
    pending: List[Dict] = []
    since_eval = run.since_eval
    bar = tqdm.tqdm(
        total=loop.steps,
        initial=step,
        desc=loop.description,
        disable=not loop.progress,
        dynamic_ncols=True,
    )
    started = time.time()
    sittings = run.sittings
    sitting = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "from_step": step,
        "code": reporting.code_version(),
        "host": reporting.host(),
    }
    sitting_started, sitting_cpu = started, time.process_time()

    def fetch():
      first = step - len(pending) + 1
      for i, fetched in enumerate(jax.device_get(pending)):
        for name in FINITE_METRICS:
          if name in fetched and not math.isfinite(float(fetched[name])):
            kept = (
                f"the last good checkpoint (step {last_saved}) in "
                f"{checkpoint_dir} is kept"
                if last_saved is not None
                else "no checkpoint had been saved yet"
            )
            raise NonFiniteLossError(
                f"non-finite {name} {float(fetched[name])} at step "
                f"{first + i}; training stopped and nothing of it was "
                f"saved: {kept}."
            )
        run.losses.append(float(fetched["loss"]))
        for name, value in fetched.items():
          since_eval.setdefault(name, []).append(float(value))
        metrics.train(first + i, fetched)
      bar.update(len(pending))
      pending.clear()

    try:
      while step < stop:
        state, step_metrics = task.train_step(state, next(task.stream), step)
        pending.append(step_metrics)
        step += 1
        evaluate_now = step % loop.eval_every == 0 or step == loop.steps
        save_now = evaluate_now or step % save_every == 0 or step == stop
        if save_now or len(pending) >= loop.fetch_every:
          fetch()
        if not save_now:
          continue
        is_best = False
        if evaluate_now:
          entry, score = task.evaluate(state, step)
          best = run.best
          is_best = (
              score is None
              or best is None
              or best["score"] is None  # Nothing scored it: no selection.
              or score > best["score"]
          )
          evaluate_best = getattr(task, "evaluate_best", None)
          if evaluate_best is not None and (is_best or step == loop.steps):
            entry = {**entry, **evaluate_best(state, step)}
          record = {"step": step, "loss": _mean(since_eval.pop("loss", []))}
          record.update(
              (f"train_{k}", _mean(v)) for k, v in sorted(since_eval.items())
          )
          since_eval.clear()
          record.update(entry)
          run.history.append(record)
          metrics.evaluation(step, record)
          if is_best:
            run.best = {
                "step": step,
                "score": score,
                "entry": entry,
                "selection": selection,
            }
          scores = ", ".join(
              f"{k} {v:.4f}"
              for k, v in record.items()
              if k != "step" and isinstance(v, float)
          )
          bar.set_postfix_str(scores)
          if not loop.progress:
            log(f"step {step}: {scores}")
        now = time.time()
        run.train_seconds += now - started
        sitting.update(
            to_step=step,
            seconds=now - sitting_started,
            cpu_seconds=time.process_time() - sitting_cpu,
        )
        if not sittings or sittings[-1] is not sitting:
          sittings.append(sitting)
        started = now
        run.step, run.stream = step, task.stream.get_state()
        ckpts.save(step, state, run.to_json(), best=is_best)
        last_saved = step
        metrics.flush()
    finally:
      bar.close()
      metrics.close()
    if step < loop.steps:
      log(
          f"stopped at step {step} of {loop.steps} (stop_at_step); rerun on "
          "the same work directory to resume"
      )
  return RunRecord(
      step=step,
      complete=step >= loop.steps,
      state=state,
      losses=run.losses,
      history=run.history,
      best=run.best,
      train_seconds=run.train_seconds,
      sittings=[_with_rate(s) for s in run.sittings],
      checkpoint_fallbacks=run.restore_fallbacks,
      num_params=count_params(state),
  )


def _check_kept(
    ckpts, checkpoint_dir: str, kept_every: int, loop: LoopSettings
):
  """Refuses a resume whose `loop.keep_every` would let the next save delete
  'latest' steps that the saved run's `kept_every` kept (the next save keeps
  only the newest step besides itself, and the multiples of keep_every).

  Raises:
    UserError: naming those steps and the keep_every that keeps them.
  """
  kept = [
      s for s in ckpts.all_steps()[:-1] if kept_every and s % kept_every == 0
  ]
  lost = [s for s in kept if not loop.keep_every or s % loop.keep_every]
  if lost:
    raise UserError(
        f"train.keep_every={loop.keep_every} would delete the checkpoints at "
        f"steps {lost} that train.keep_every={kept_every} kept in "
        f"{checkpoint_dir}/latest, at the next save: resume with "
        f"train.keep_every={kept_every}, or move those steps away first."
    )


def has_checkpoint(checkpoint_dir: str) -> bool:
  """Whether `checkpoint_dir` holds a 'latest' checkpoint (a file-system
  read: no barrier, so processes may ask while process 0 writes the work
  directory; see `checkpoints.saved_steps`)."""
  return bool(ckpt_lib.saved_steps(checkpoint_dir))


def restore(
    abstract_state: Any,
    checkpoint_dir: str,
    which: str = "latest",
    skipped: Optional[List[Dict]] = None,
    step: Optional[int] = None,
) -> Optional[Tuple[Any, Dict]]:
  """(state, record) of the newest `which` ('latest' | 'best') checkpoint in
  `checkpoint_dir`, or of its step `step`; None
  if there is none. Checkpoints that could not be restored are moved aside
  (`checkpoints.RunCheckpoints`); `skipped`, if given, is extended with
  their records (each with `restored_instead`).

  Raises:
    ValueError: `which` is not a checkpoint set; `UserError` (a ValueError):
      `step` is not saved in it (naming the saved steps).
  """
  if which not in ("latest", "best"):
    raise ValueError(
        f"checkpoint {which!r} is not one of the valid choices "
        "['latest', 'best']."
    )
  if step is not None:
    saved = ckpt_lib.saved_steps(checkpoint_dir, which)
    if step not in saved:
      raise UserError(
          f"no {which} checkpoint at step {step} in {checkpoint_dir}; the "
          f"saved steps are {saved} (train.keep_every keeps more)."
      )
  with ckpt_lib.RunCheckpoints(checkpoint_dir) as ckpts:
    restored = ckpts.restore(abstract_state, which, step)
    if skipped is not None:
      skipped.extend(ckpts.skipped)
    return restored


# ---------------------------------------------------------------------------
# A stream for tasks whose data fits in host memory: seeded epochs.


def epoch_indices(
    step: int, num_train: int, batch_size: int, seed: int
) -> np.ndarray:
  """Indices of the training examples of `step` (0-based): batch i of epoch
  e is slice i of the permutation drawn by default_rng([seed, e]); the last
  batch of an epoch may be short (callers pad it with zero weights)."""
  if num_train < 1 or batch_size < 1:
    raise ValueError(
        "num_train and batch_size must be positive, got "
        f"{num_train} and {batch_size}."
    )
  steps_per_epoch = math.ceil(num_train / batch_size)
  epoch, i = divmod(step, steps_per_epoch)
  perm = np.random.default_rng([seed, epoch]).permutation(num_train)
  return perm[i * batch_size : (i + 1) * batch_size]


def pad_indices(
    indices: Sequence[int], size: int
) -> Tuple[np.ndarray, np.ndarray]:
  """(padded, weights): `indices` (1 to `size` of them) followed by copies
  of the first up to `size`, and per-row weights (1 on the given rows, 0 on
  the copies). One way to fill an epoch's short last batch or the last
  evaluation batch: the shapes stay those of every other batch, so nothing
  recompiles, and the copies weigh nothing."""
  indices = np.asarray(indices)
  if not 0 < len(indices) <= size:
    raise ValueError(
        f"a batch holds 1 to {size} rows, got {len(indices)} indices."
    )
  padded = np.concatenate(
      [indices, np.repeat(indices[:1], size - len(indices))]
  )
  weights = (np.arange(size) < len(indices)).astype(np.float32)
  return padded, weights


def map_rows(
    fn: Callable[[np.ndarray], np.ndarray],
    num_rows: int,
    batch_size: int,
    order: Optional[Sequence[int]] = None,
) -> np.ndarray:
  """Per-row outputs (first axis `num_rows`) of `fn(padded_indices)` -> host
  array of `batch_size` rows, called on rows 0..num_rows-1 in batches of
  `batch_size` (`pad_indices`; the copies' outputs are dropped). `order`
  (a permutation) sets which rows share a batch, e.g. rows sorted by length
  to limit padding; the output is in row order either way."""
  order = np.arange(num_rows) if order is None else np.asarray(order)
  if len(order) != num_rows:
    raise ValueError(f"order has {len(order)} rows, expected {num_rows}.")
  out = None
  for start in range(0, num_rows, batch_size):
    idx = order[start : start + batch_size]
    values = np.asarray(fn(pad_indices(idx, batch_size)[0]))[: len(idx)]
    if out is None:
      out = np.zeros((num_rows,) + values.shape[1:], values.dtype)
    out[idx] = values
  if out is None:
    raise ValueError("map_rows: no rows (num_rows=0).")
  return out


class EpochStream:
  """`BatchStream` of `batch_at(epoch_indices(step, ...))`: its position is
  the step alone, so resuming is exact.

  Args:
    num_train, batch_size, seed: as `epoch_indices`.
    batch_at: indices -> the batch placed on the mesh.
  """

  def __init__(
      self,
      num_train: int,
      batch_size: int,
      seed: int,
      batch_at: Callable[[np.ndarray], Any],
  ):
    self.num_train, self.batch_size, self.seed = num_train, batch_size, seed
    self.batch_at = batch_at
    self.step = 0

  def __next__(self):
    idx = epoch_indices(self.step, self.num_train, self.batch_size, self.seed)
    self.step += 1
    return self.batch_at(idx)

  def get_state(self) -> Dict:
    return {"step": self.step}

  def set_state(self, state: Dict) -> None:
    self.step = int(state["step"])


def checkpoint_dir(workdir: str) -> str:
  return os.path.join(workdir, "checkpoints")


# ---------------------------------------------------------------------------
# A functional task's state and step: {params, opt_state, step, rng}.


def train_state(params, tx: optax.GradientTransformation, rng) -> Dict:
  """The training state: parameters, optimiser state, step 0, the run's key."""
  return {
      "params": params,
      "opt_state": tx.init(params),
      "step": jnp.zeros((), jnp.int32),
      "rng": rng,
  }


def make_train_step(
    loss_fn: Callable,
    tx: optax.GradientTransformation,
    mesh,
    *,
    metric: str = "accuracy",
    dropout_prng: str = "threefry",
):
  """step(state, batch, step) -> (state, {loss, <metric>, grad_norm}) of
  `loss_fn(params, batch, dropout_rng) -> (loss, a training metric)`, the
  metric recorded as `metric` (seq2seq: 'token_accuracy'): jitted over the
  mesh (state replicated, batch sharded on its leading axis), the input
  state donated. Dropout key = fold_in(state['rng'], state['step']) (the
  state's key unchanged), drawn with `dropout_prng`'s generator
  (`prng.dropout_key`: 'threefry', or the cheaper 'counter_hash').

  Raises:
    ValueError: for an unknown `dropout_prng` (names the choices), or a
      `metric` named 'loss' or 'grad_norm' (it would overwrite that one).
  """
  check_choice(dropout_prng, prng.DROPOUT_PRNGS, "dropout_prng")
  if metric in ("loss", "grad_norm"):
    raise ValueError(
        f"metric={metric!r} would overwrite the step's own {metric!r}; name "
        "the training metric otherwise (e.g. 'accuracy')."
    )
  rep, bsh = mesh_lib.replicated(mesh), mesh_lib.batch_sharded(mesh)

  def step(state, batch):
    rng = jax.random.fold_in(state["rng"], state["step"])
    rng = prng.dropout_key(rng, dropout_prng)
    (loss, value), grads = jax.value_and_grad(
        lambda p: loss_fn(p, batch, rng), has_aux=True
    )(state["params"])
    updates, opt_state = tx.update(grads, state["opt_state"], state["params"])
    new_state = {
        "params": optax.apply_updates(state["params"], updates),
        "opt_state": opt_state,
        "step": state["step"] + 1,
        "rng": state["rng"],
    }
    metrics = {
        "loss": loss,
        metric: value,
        "grad_norm": optax.tree.norm(grads),
    }
    return new_state, metrics

  jitted = jax.jit(
      step, in_shardings=(rep, bsh), out_shardings=(rep, rep), donate_argnums=0
  )
  return lambda state, batch, step: jitted(state, batch)


SELECT_ON = ("last", "val")
# The `train` section of every task, with the same names: what the loop
# (`loop_of`) and the optimiser (`optim.make_optimizer`) read. A task may
# add its own fields (seq2seq's dropout_prng, CLUTRR's eval_tests); each
# run's seed is `train.seed` (CLRS: the top-level `seeds`, one model per
# seed).
TRAIN_FIELDS = (
    "steps",
    "batch_size",
    "eval_batch_size",
    "eval_every",
    "checkpoint_every",
    "keep_every",
    "stop_at_step",
    "learning_rate",
    "schedule",
    "warmup_steps",
    "warmup",
    "clip",
    "optimizer",
    "weight_decay",
    "select_on",
    "devices",
    "progress",
    "tensorboard",
)
# The `train` section's fields (and the results path) that a resumed run may
# change: how long it trains (under a schedule that does not decay over the
# steps: `optim.check_resumed_steps`, which the engine runs; never below the
# checkpoint's step: `fit`), when and how it evaluates, checkpoints, shows
# progress and stops, the devices, where it writes. Each task adds its own.
RESUMABLE_TRAIN_CHANGES = (
    "train.steps",
    "train.eval_batch_size",
    "train.eval_every",
    "train.checkpoint_every",
    "train.keep_every",
    "train.select_on",
    "train.devices",
    "train.progress",
    "train.tensorboard",
    "train.stop_at_step",
    "results_path",
)


def validate_train_section(t, select_on: Sequence[str] = SELECT_ON) -> None:
  """Raises ValueError naming a bad field of a task's `train` section
  (steps, batch_size, eval_every, warmup_steps, eval_batch_size,
  checkpoint_every, keep_every, devices, stop_at_step, learning_rate;
  select_on, one of the task's `select_on` choices)."""
  check_choice(t.select_on, select_on, "train.select_on")
  for name in ("steps", "batch_size", "eval_every"):
    if t[name] < 1:
      raise ValueError(f"train.{name} must be >= 1, got {t[name]}.")
  for name in (
      "warmup_steps",
      "eval_batch_size",
      "checkpoint_every",
      "devices",
      "stop_at_step",
  ):
    if t[name] < 0:
      raise ValueError(f"train.{name} must be >= 0, got {t[name]}.")
  keep_every = t.keep_every
  if keep_every < 0:
    raise ValueError(f"train.keep_every must be >= 0, got {keep_every}.")
  problem = keep_every_problem(keep_every, t.eval_every, t.checkpoint_every)
  if problem:
    raise ValueError("train." + problem)
  if not t.learning_rate > 0:
    raise ValueError(
        f"train.learning_rate must be positive, got {t.learning_rate}."
    )


def loop_of(t, description: str = "") -> LoopSettings:
  """The `LoopSettings` of a `train` config section (steps, eval_every,
  checkpoint_every, keep_every, stop_at_step, progress, tensorboard)."""
  return LoopSettings(
      steps=int(t.steps),
      eval_every=int(t.eval_every),
      checkpoint_every=int(t.checkpoint_every),
      keep_every=int(t.keep_every),
      stop_at_step=int(t.stop_at_step),
      progress=bool(t.progress),
      description=description,
      tensorboard=bool(t.tensorboard),
  )


def abstract_of(init: Callable, mesh) -> Any:
  """The abstract (replicated) state of `init: key -> state`."""
  return ckpt_lib.abstract_like(
      jax.eval_shape(init, jax.random.PRNGKey(0)), mesh_lib.replicated(mesh)
  )


class FunctionalTrainee:
  """A `Trainee` made of functions, with the state of `train_state`.

  Args:
    init: key -> the training state (`train_state`), traced for the
      checkpoint's abstract structure and jitted for a fresh run.
    train_step: `make_train_step`'s step.
    stream: the training batches.
    evaluate: params -> history fields; `score_key` among them is the
      selection score (higher is better). An empty dict scores nothing.
    mesh: the device mesh (the state is replicated over it).
    seed: the initialisation key's seed.
    score_key: the selection score's field; None: the task has none (the
      run keeps its last state).

  Raises (from `evaluate`):
    ValueError: `evaluate` returned fields without `score_key` (selection
      would silently fall back to the last state).
  """

  def __init__(
      self,
      *,
      init: Callable,
      train_step: Callable,
      stream: BatchStream,
      evaluate: Callable[[Any], Dict],
      mesh,
      seed: int,
      score_key: Optional[str] = "val_accuracy",
  ):
    self._init, self._evaluate = init, evaluate
    self.train_step, self.stream = train_step, stream
    self.mesh, self.seed, self.score_key = mesh, seed, score_key

  def init_state(self):
    return jax.jit(self._init, out_shardings=mesh_lib.replicated(self.mesh))(
        jax.random.PRNGKey(self.seed)
    )

  def abstract_state(self):
    return abstract_of(self._init, self.mesh)

  def evaluate(self, state, step):
    del step
    entry = self._evaluate(state["params"])
    if self.score_key is None or not entry:
      return entry, None
    if self.score_key not in entry:
      raise ValueError(
          f"evaluate returned {sorted(entry)}, without the selection score "
          f"score_key={self.score_key!r}: return it, or pass the key it has "
          "as FunctionalTrainee(score_key=...) (None: no selection score)."
      )
    return entry, entry[self.score_key]


def selected_state(
    record: RunRecord,
    abstract_state: Any,
    checkpoint_dir: str,
    select_on: str,
) -> Tuple[Any, str]:
  """(state, description) that `select_on` picks: 'last' the final state;
  'val' (or 'best') the best evaluation's checkpoint, if one was scored."""
  best = record.best
  if select_on == "last" or not best or best.get("score") is None:
    return record.state, "last"
  state, _ = restore(abstract_state, checkpoint_dir, "best")
  return state, f"val (step {best['step']})"
