"""The optimiser of every task: Adam with a learning-rate schedule and
global-norm clipping (optax). CLRS tasks use CLRS's own `BaselineModel`
optimiser (Adam, constant rate) and do not come here.

Schedules (`make_schedule`, of the update count c = 0, 1, ...; lr the peak
rate, w the warmup steps, T the run's steps):

  constant  lr after an optional linear warmup;
  linear    linear warmup, then linear decay to 0 at T (HuggingFace's
            `get_linear_schedule_with_warmup`, the ET authors' CLUTRR and
            COGS runs);
  cosine    linear warmup, then cosine decay to 0 at T;
  noam      lr * min(s / w, sqrt(w / s)), s = c + 1 (peak lr at s = w).

Warmup conventions (`WARMUPS`), as each paper's code has it:

  'count'           rate lr * c / w: the first update has rate 0
                    (HuggingFace's schedules; the ET authors' code);
  'count_plus_one'  rate lr * (c + 1) / w: the first update has rate lr / w
                    (Csordas et al.'s code).
"""

from typing import Optional

import jax.numpy as jnp
import optax

from relational_jax.layers.shapes import check_choice

SCHEDULES = ("constant", "linear", "cosine", "noam")
WARMUPS = ("count", "count_plus_one")


def make_schedule(
    lr: float,
    schedule: str,
    warmup_steps: int,
    steps: int,
    warmup: str = "count_plus_one",
):
  """The learning rate as a function of the update count (an optax schedule);
  see the module docstring."""
  check_choice(schedule, SCHEDULES, "schedule")
  check_choice(warmup, WARMUPS, "warmup")
  w = max(int(warmup_steps), 0)
  if schedule == "noam":
    if w < 1:
      raise ValueError(f"schedule='noam' needs warmup_steps >= 1, got {w}.")
    return lambda count: lr * jnp.minimum(
        (count + 1.0) / w, jnp.sqrt(w / (count + 1.0))
    )
  if schedule == "cosine":
    if w == 0:
      return optax.cosine_decay_schedule(lr, max(steps, 1))
    return optax.warmup_cosine_decay_schedule(
        0.0, lr, w, max(steps, w + 1), 0.0
    )
  if warmup == "count_plus_one":
    if schedule == "constant":
      if w == 0:
        return optax.constant_schedule(lr)
      return lambda count: lr * jnp.minimum(1.0, (count + 1.0) / w)
    raise ValueError(
        "schedule='linear' has the warmup convention of HuggingFace's "
        "get_linear_schedule_with_warmup: warmup='count', got "
        f"{warmup!r}."
    )

  def counted(count):
    count = jnp.asarray(count, jnp.float32)
    warm = jnp.minimum(1.0, count / w) if w else 1.0
    if schedule == "constant":
      return lr * warm
    decay = jnp.clip((steps - count) / max(steps - w, 1), 0.0, 1.0)
    return lr * jnp.where(count < w, warm, decay)

  return counted


def make_optimizer(
    lr: float,
    schedule: str,
    warmup_steps: int,
    steps: int,
    clip: float,
    warmup: str = "count_plus_one",
    weight_decay: Optional[float] = None,
) -> optax.GradientTransformation:
  """Global-norm clipping (if clip > 0), then Adam with the schedule; with a
  `weight_decay` (even 0.0), AdamW with PyTorch's defaults (b1 0.9, b2
  0.999, eps 1e-8), as the ET authors' COGS code."""
  rate = make_schedule(lr, schedule, warmup_steps, steps, warmup)
  if weight_decay is None:
    opt = optax.adam(rate)
  else:
    opt = optax.adamw(
        rate, b1=0.9, b2=0.999, eps=1e-8, weight_decay=weight_decay
    )
  if clip > 0:
    return optax.chain(optax.clip_by_global_norm(clip), opt)
  return opt
