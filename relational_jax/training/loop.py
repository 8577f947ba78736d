"""The checkpointed training loop shared by the graph tasks (CLUTRR, graph COGS).

A task supplies its model's loss, its batches and its evaluation; this
module owns what is the same for all of them:

* `train_state` / `make_train_step`: the state {params, opt_state, step, rng}
  and one jitted, donated optimiser step over the device mesh (data-parallel:
  state replicated, batch sharded); the dropout key of step t is
  fold_in(rng, t), so a resumed run draws the keys an uninterrupted one would;
* `epoch_indices`: the training examples of a step, a seeded permutation per
  epoch (a function of (seed, step) alone, hence exactly resumable);
* `run`: resume from the newest checkpoint, train to `train.steps` (or stop,
  checkpointed, at `train.stop_at_step`), evaluate every `train.eval_every`
  steps into the history, keep the best-validation checkpoint, refuse a
  non-finite loss without touching the last good checkpoint, and hand back
  the parameters `train.select_on` selects ('last' or 'val').

The train config (`ConfigDict`) fields read: steps, eval_every,
checkpoint_every (0: eval_every), stop_at_step (0: none), seed, select_on.
"""

import dataclasses
import math
import os
import time
from typing import Callable, Dict, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax

from relational_jax.layers.shapes import check_choice
from relational_jax.training import checkpoints as ckpt_lib
from relational_jax.parallel import mesh as mesh_lib
from relational_jax.training.errors import NonFiniteLossError

# loss_fn(params, batch, dropout_rng) -> (scalar loss, scalar accuracy).
LossFn = Callable
SELECT_ON = ("last", "val")


def validate_train_config(t) -> None:
  """Raises ValueError naming a bad field of a `train` section: the loop's
  fields (module docstring) and batch_size, eval_batch_size, devices,
  warmup_steps, learning_rate."""
  check_choice(t.select_on, SELECT_ON, "train.select_on")
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
  if not t.learning_rate > 0:
    raise ValueError(
        f"train.learning_rate must be positive, got {t.learning_rate}."
    )


def train_state(params, tx: optax.GradientTransformation, rng) -> Dict:
  """The training state: parameters, optimiser state, step 0, the run's key."""
  return {
      "params": params,
      "opt_state": tx.init(params),
      "step": jnp.zeros((), jnp.int32),
      "rng": rng,
  }


def make_train_step(loss_fn: LossFn, tx: optax.GradientTransformation, mesh):
  """step(state, batch) -> (state, {loss, accuracy, grad_norm}); jitted over
  the mesh (state replicated, batch sharded on its leading axis), the input
  state donated. Dropout key = fold_in(state['rng'], state['step'])."""
  rep, bsh = mesh_lib.replicated(mesh), mesh_lib.batch_sharded(mesh)

  def step(state, batch):
    rng = jax.random.fold_in(state["rng"], state["step"])
    (loss, acc), grads = jax.value_and_grad(
        lambda p: loss_fn(p, batch, rng), has_aux=True
    )(state["params"])
    updates, opt_state = tx.update(grads, state["opt_state"], state["params"])
    return (
        {
            "params": optax.apply_updates(state["params"], updates),
            "opt_state": opt_state,
            "step": state["step"] + 1,
            "rng": state["rng"],
        },
        {"loss": loss, "accuracy": acc, "grad_norm": optax.tree.norm(grads)},
    )

  return jax.jit(
      step, in_shardings=(rep, bsh), out_shardings=(rep, rep), donate_argnums=0
  )


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


@dataclasses.dataclass
class LoopResult:
  """What `run` hands back.

  stopped: True when `stop_at_step` ended the run early (rerun to resume);
    then `params` and `selected` are those of the last step.
  params: the selected parameters; selected: 'last' or 'val (step S)'.
  meta: {'history': [...], 'best_val', 'train_seconds'} as checkpointed.
  """

  step: int
  stopped: bool
  params: object
  selected: str
  meta: Dict
  num_params: int


def run(
    *,
    init: Callable,
    step_fn: Callable,
    batch_at: Callable[[int], Dict],
    evaluate: Callable[[object], Dict],
    train_config,
    workdir: str,
    mesh,
    log: Callable[[str], None],
) -> LoopResult:
  """Trains (or resumes) in `workdir/checkpoints`; see the module docstring.

  Args:
    init: key -> training state (`train_state`), traced once for the
      checkpoint's abstract structure and jitted on a fresh run.
    step_fn: `make_train_step`'s step.
    batch_at: step -> sharded batch of that (0-based) step.
    evaluate: params -> extra history fields of an evaluation step; a
      'val_accuracy' among them decides the best checkpoint.
    train_config: the task's `train` section (fields in the module docstring).
    mesh: the device mesh (the state is replicated over it).
    log: progress messages.
  """
  t = train_config
  rep = mesh_lib.replicated(mesh)
  abstract = ckpt_lib.abstract_like(
      jax.eval_shape(init, jax.random.PRNGKey(0)), rep
  )
  with ckpt_lib.RunCheckpoints(os.path.join(workdir, "checkpoints")) as ckpts:
    restored = ckpts.restore(abstract)
    if restored is None:
      state = jax.jit(init, out_shardings=rep)(jax.random.PRNGKey(t.seed))
      meta = {"history": [], "best_val": None, "train_seconds": 0.0}
    else:
      state, meta = restored
      log(f"resumed at step {int(state['step'])}")
    num_params = int(
        sum(
            np.prod(x.shape) for x in jax.tree_util.tree_leaves(state["params"])
        )
    )
    step = int(state["step"])
    stop = min(t.steps, t.stop_at_step or t.steps)
    save_every = t.checkpoint_every or t.eval_every
    started = time.time()
    while step < stop:
      state, metrics = step_fn(state, batch_at(step))
      step += 1
      evaluate_now = step % t.eval_every == 0 or step == t.steps
      if not (evaluate_now or step % save_every == 0 or step == stop):
        continue
      loss = float(metrics["loss"])
      if not math.isfinite(loss):
        raise NonFiniteLossError(
            f"loss {loss} at step {step}; the last good checkpoint "
            f"(step {ckpts.latest_step()}) in {workdir} is kept."
        )
      meta["train_seconds"] += time.time() - started
      started = time.time()
      best = False
      if evaluate_now:
        entry = {
            "step": step,
            "loss": loss,
            "train_accuracy": float(metrics["accuracy"]),
            **evaluate(state["params"]),
        }
        if "val_accuracy" in entry:
          best = (
              meta["best_val"] is None
              or entry["val_accuracy"] > meta["best_val"]
          )
          if best:
            meta["best_val"] = entry["val_accuracy"]
        meta["history"].append(entry)
        log(
            f"step {step}: loss {loss:.4f}, "
            + ", ".join(
                f"{k} {v:.4f}"
                for k, v in entry.items()
                if k.endswith("accuracy")
            )
        )
      ckpts.save(step, state, meta, best=best)
    meta["train_seconds"] += time.time() - started
    if step < t.steps:
      log(f"stopped at step {step} (train.stop_at_step); rerun to resume")
      return LoopResult(step, True, state["params"], "last", meta, num_params)
    params, selected = state["params"], "last"
    if t.select_on == "val" and ckpts.latest_step("best") is not None:
      best_state, _ = ckpts.restore(abstract, "best")
      params = best_state["params"]
      selected = f"val (step {ckpts.latest_step('best')})"
  return LoopResult(step, False, params, selected, meta, num_params)


def restore_params(
    init: Callable, workdir: str, mesh, which: str = "latest"
) -> Optional[object]:
  """Parameters of the newest `which` checkpoint in `workdir` (None if none);
  `init` as for `run`."""
  abstract = ckpt_lib.abstract_like(
      jax.eval_shape(init, jax.random.PRNGKey(0)), mesh_lib.replicated(mesh)
  )
  with ckpt_lib.RunCheckpoints(os.path.join(workdir, "checkpoints")) as ckpts:
    restored = ckpts.restore(abstract, which)
  return None if restored is None else restored[0]["params"]
