"""The optimiser of every task: `make_optimizer(config.train)`, Adam or AdamW
with a learning-rate schedule and global-norm clipping (optax), from the
fields every task's `train` section has (`Settings`); CLRS hands it to
`processors.CarryModel` (`optimizer=`) in place of dm-clrs's own.

Schedules (`make_schedule`, of the update count c = 0, 1, ...; lr the peak
rate, w the warmup steps, T the run's steps):

  constant  lr after an optional linear warmup;
  linear    linear warmup, then linear decay to 0 at T (HuggingFace's
            `get_linear_schedule_with_warmup`, the ET authors' CLUTRR and
            COGS runs);
  cosine    linear warmup, then cosine decay to 0 at T (optax's
            `warmup_cosine_decay_schedule`);
  noam      lr * min(s / w, sqrt(w / s)) (peak lr at s = w), s the count as
            the warmup convention has it: c + 1 or c. At lr = (D w)^-0.5
            it is Vaswani et al.'s D^-0.5 min(s^-0.5, s w^-1.5), the default
            of Shiv & Quirk's code (microsoft/icecaps, w = 4000).

Warmup conventions (`WARMUPS`), as each paper's code has it:

  'count'           rate lr * c / w: the first update has rate 0
                    (HuggingFace's schedules; the ET authors' code; optax's);
  'count_plus_one'  rate lr * (c + 1) / w: the first update has rate lr / w
                    (Csordas et al.'s code).

Every schedule follows the convention given, except 'linear', which is
HuggingFace's and refuses 'count_plus_one'.
"""

from typing import NamedTuple

import jax.numpy as jnp
import optax

from relational_jax.layers.shapes import check_choice
from relational_jax.training import errors

SCHEDULES = ("constant", "linear", "cosine", "noam")
WARMUPS = ("count", "count_plus_one")
OPTIMIZERS = ("adam", "adamw")
# The schedules that decay over the run's steps T (`train.steps`).
DECAYING = ("linear", "cosine")


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
  if warmup_steps < 0:
    raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}.")
  w = int(warmup_steps)
  shift = 1.0 if warmup == "count_plus_one" else 0.0
  if schedule == "noam":
    if w < 1:
      raise ValueError(f"schedule='noam' needs warmup_steps >= 1, got {w}.")

    def noam(count):
      s = count + shift  # At s = 0 ('count'): rate 0.
      return lr * jnp.minimum(s / w, jnp.sqrt(w / jnp.maximum(s, 1.0)))

    return noam
  if schedule == "cosine":
    if w == 0:
      return optax.cosine_decay_schedule(lr, max(steps, 1))
    cosine = optax.warmup_cosine_decay_schedule(
        0.0, lr, w, max(steps, w + 1), 0.0
    )
    if not shift:
      return cosine
    return lambda count: jnp.where(
        count < w, lr * jnp.minimum(1.0, (count + shift) / w), cosine(count)
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


class Settings(NamedTuple):
  """The optimiser fields of every task's `train` section (hashable, so a
  compiled step can be cached by them)."""

  learning_rate: float
  schedule: str  # SCHEDULES
  warmup_steps: int
  steps: int
  clip: float  # global-norm clipping; 0: off
  warmup: str  # WARMUPS: the warmup convention
  optimizer: str  # OPTIMIZERS
  weight_decay: float  # 'adamw' only


def settings_of(train) -> Settings:
  """The `Settings` of a `train` config section (or of `Settings`)."""
  return Settings(*(getattr(train, name) for name in Settings._fields))


def validate(train) -> None:
  """Raises ValueError naming a bad optimiser field of `train` and the
  valid choices."""
  s = settings_of(train)
  check_choice(s.schedule, SCHEDULES, "train.schedule")
  check_choice(s.warmup, WARMUPS, "train.warmup")
  check_choice(s.optimizer, OPTIMIZERS, "train.optimizer")
  if not s.learning_rate > 0:
    raise ValueError(
        f"train.learning_rate must be positive, got {s.learning_rate}."
    )
  for name in ("warmup_steps", "clip", "weight_decay"):
    if getattr(s, name) < 0:
      raise ValueError(f"train.{name} must be >= 0, got {getattr(s, name)}.")
  if s.optimizer == "adam" and s.weight_decay:
    raise ValueError(
        f"train.weight_decay={s.weight_decay} needs train.optimizer='adamw'"
        " (Adam has no weight decay)."
    )


def make_optimizer(train) -> optax.GradientTransformation:
  """The optimiser of every task, from its `train` section (`Settings`):
  global-norm clipping (if clip > 0), then Adam ('adam') or AdamW ('adamw',
  with `weight_decay`, PyTorch's defaults b1 0.9, b2 0.999, eps 1e-8, as the
  ET authors' COGS code) at the `schedule` of `learning_rate`."""
  validate(train)
  s = settings_of(train)
  rate = make_schedule(
      s.learning_rate, s.schedule, s.warmup_steps, s.steps, s.warmup
  )
  if s.optimizer == "adam":
    opt = optax.adam(rate)
  else:
    opt = optax.adamw(
        rate, b1=0.9, b2=0.999, eps=1e-8, weight_decay=s.weight_decay
    )
  if s.clip > 0:
    return optax.chain(optax.clip_by_global_norm(s.clip), opt)
  return opt


def check_resumed_steps(saved_train, train) -> None:
  """Raises `errors.UserError` where a run saved with `train` section record
  `saved_train` (a dict) is resumed with another `train.steps` while its
  schedule decays over them (`DECAYING`): the resumed run would follow
  neither config's schedule. With 'constant' or 'noam' more steps extend
  the run exactly."""
  before = saved_train.get("steps", train.steps)
  if train.schedule in DECAYING and before != train.steps:
    raise errors.UserError(
        f"train.steps: saved {before}, now {train.steps}; schedule "
        f"{train.schedule!r} decays over train.steps, so the resumed run "
        "would follow neither schedule. Use a new work directory, or "
        f"train.steps={before}."
    )
