"""The plain loop that stands in for a Lightning `Trainer.fit` in the Edge
Transformer wrappers (`clutrr_et_torch.py`, `cogs_graph_et_torch.py`).

Runs in the authors' environment (torch imported there); each wrapper is run
as a script, so this directory is on its `sys.path`. Per batch it does what
`trainer.fit` does with `gradient_clip_val` and a per-step scheduler: their
`_calculate_loss`, backward, `clip_grad_norm_`, optimiser step, scheduler
step. Every `--eval_every` steps (and at the last) the point `{"step",
"loss", "train_seconds", "tests"}` is appended to `<out_dir>/curve.jsonl`,
then the run is checkpointed to `<out_dir>/checkpoint.pt` (model, optimiser,
scheduler, step, torch's RNG state), in that order, so a run killed between
the two redoes the step rather than losing its point. A resumed run skips
the batches of its epoch already trained on: a wrapper's epoch order must be
fixed by the epoch's number. `enter_checkout` and `build` are the wrappers'
shared set-up (their checkout on the path, their model and optimisers).
"""

import argparse
import os
import sys
import time
from typing import Callable, Iterable

import curve_file  # pylint: disable=g-bad-import-order  (refs/, on sys.path)


def add_flags(parser: argparse.ArgumentParser, scratch_help: str) -> None:
  """The flags every Edge Transformer wrapper takes."""
  parser.add_argument(
      "--reference",
      required=True,
      help="Checkout of github.com/bergen/EdgeTransformer.",
  )
  parser.add_argument("--scratch", required=True, help=scratch_help)
  parser.add_argument("--seed", type=int, required=True)
  parser.add_argument("--steps", type=int, required=True)
  parser.add_argument("--eval_every", type=int, required=True)
  parser.add_argument("--threads", type=int, default=1)
  parser.add_argument(
      "--stop_at",
      type=int,
      default=0,
      help="Stop after the checkpoint of this step (a resume test).",
  )
  parser.add_argument(
      "--out_dir", required=True, help="curve.jsonl and checkpoint.pt go here."
  )
  parser.add_argument(
      "--authors_flags",
      default="",
      help="Extra flags for their train.py parser, space separated.",
  )


def enter_checkout(a: argparse.Namespace, task: str) -> None:
  """Runs torch on `--threads` threads, puts their `<task>/` of
  `--reference` first on `sys.path` (their modules import each other by
  name; exits if it has no train.py) and enters `--scratch`, where their
  loaders read ./data/."""
  import torch  # pylint: disable=g-import-not-at-top

  torch.set_num_threads(a.threads)
  task_dir = os.path.join(a.reference, task)
  if not os.path.isfile(os.path.join(task_dir, "train.py")):
    sys.exit(
        f"--reference={a.reference} has no {task}/train.py: pass a "
        "checkout of github.com/bergen/EdgeTransformer."
    )
  sys.path.insert(0, task_dir)
  os.chdir(a.scratch)


def build(model_class, args, steps: int):
  """Their `model_class(args)` with its `configure_optimizers()`, the linear
  warmup schedule's `num_training_steps` set to `steps`: (model, optimiser,
  scheduler)."""
  args.scheduler_args = {
      "num_warmup_steps": args.num_warmup_steps,
      "num_training_steps": steps,
  }
  model = model_class(args)
  opt = model.configure_optimizers()
  return model, opt["optimizer"], opt["lr_scheduler"]["scheduler"]


def fit(
    a: argparse.Namespace,
    model,
    optimizer,
    scheduler,
    max_grad_norm: float,
    epoch_batches: Callable[[int], Iterable],
    steps_per_epoch: int,
    evaluate: Callable[[], dict],
) -> None:
  """Trains `model` (their LightningModule) for `a.steps` batches, resuming
  from `a.out_dir`'s checkpoint; `epoch_batches(e)` is epoch e's batches,
  `evaluate()` the point's "tests" (called in eval mode, without
  gradients)."""
  import torch  # pylint: disable=import-outside-toplevel

  os.makedirs(a.out_dir, exist_ok=True)
  ckpt_path = os.path.join(a.out_dir, "checkpoint.pt")
  curve_path = os.path.join(a.out_dir, "curve.jsonl")
  step = 0
  if os.path.isfile(ckpt_path):
    ckpt = torch.load(ckpt_path, weights_only=False)
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    scheduler.load_state_dict(ckpt["scheduler"])
    torch.set_rng_state(ckpt["torch_rng"])
    step = ckpt["step"]
    curve_file.restart(curve_path, step)
    print(f"resumed at step {step}", flush=True)
  else:
    curve_file.restart(curve_path, None)

  def record(point):
    model.eval()
    with torch.no_grad():
      point["tests"] = evaluate()
    model.train()
    curve_file.append(curve_path, point)
    torch.save(
        {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "step": step,
            "torch_rng": torch.get_rng_state(),
        },
        ckpt_path + ".tmp",
    )
    os.replace(ckpt_path + ".tmp", ckpt_path)
    print(f"step {step}: loss {point['loss']:.4f}", flush=True)

  started = time.time()
  model.train()
  while step < a.steps:
    skip = step % steps_per_epoch  # Batches of this epoch already done.
    for batch in epoch_batches(step // steps_per_epoch):
      if skip:
        skip -= 1
        continue
      loss, _ = model._calculate_loss(batch)  # pylint: disable=protected-access
      optimizer.zero_grad()
      loss.backward()
      torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
      optimizer.step()
      scheduler.step()
      step += 1
      if step % a.eval_every == 0 or step == a.steps:
        record({
            "step": step,
            "loss": float(loss.detach()),
            "train_seconds": time.time() - started,
        })
        started = time.time()
        if step == a.stop_at:
          return
      if step >= a.steps:
        break
