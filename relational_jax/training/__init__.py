"""Training: the library calls behind the experiments, and their utilities.

* `relational_jax.training.clrs` -- CLRS training and evaluation
  (`train_and_evaluate(config, workdir, processor_factory=None)`).
* `relational_jax.training.seq2seq` -- seq2seq training and evaluation
  (`train_and_evaluate(config, workdir, model=None, data=None,
  optimizer=None)`).
* `relational_jax.training.config` -- ConfigDict sections made from the
  config dataclasses (one declaration per field), the resume check.
* `relational_jax.training.reporting` -- atomic JSON, the plotting helper.
* `relational_jax.training.errors` -- `NonFiniteLossError`.
* The device mesh and the multi-process runtime live in
  `relational_jax.parallel` (below `processors/` in the layering).
* `relational_jax.training.checkpoints` -- orbax latest/best checkpoints
  of a pytree state plus a JSON record, for exact resume (`RunCheckpoints`).
"""

from relational_jax.training import checkpoints
from relational_jax.training.checkpoints import (
    NonFiniteStateError,
    RunCheckpoints,
    abstract_like,
    is_finite,
)

__all__ = [
    "checkpoints",
    "NonFiniteStateError",
    "RunCheckpoints",
    "abstract_like",
    "is_finite",
]
