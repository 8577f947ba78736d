"""Training: the library calls behind the experiments, and their utilities.

* :mod:`relational_jax.training.clrs` -- CLRS training and evaluation
  (`train_and_evaluate(config, workdir, processor_factory=None)`).
* :mod:`relational_jax.training.seq2seq` -- seq2seq training and evaluation
  (`train_and_evaluate(config, workdir, model=None, data=None,
  optimizer=None)`).
* :mod:`relational_jax.training.config` -- ConfigDict sections made from the
  config dataclasses (one declaration per field), legacy flag aliases.
* :mod:`relational_jax.training.reporting` -- atomic JSON, the plotting helper.
* :mod:`relational_jax.training.errors` -- `NonFiniteLossError`.
* :mod:`relational_jax.training.mesh` -- data parallelism with one device mesh
  and NamedShardings (`make_data_mesh`, `replicated`, `batch_sharded`,
  `shard_batch`, `maybe_initialize_distributed`; with several processes
  `process_rows`, `shard_process_batch`).
* :mod:`relational_jax.training.distributed` -- several processes, one run:
  JAX's multi-process flags, process 0 writes the files, `barrier`.
* :mod:`relational_jax.training.checkpoints` -- orbax latest/best checkpoints
  of a pytree state plus a JSON record, for exact resume (`RunCheckpoints`).
"""

from relational_jax.training import checkpoints, distributed, mesh
from relational_jax.training.checkpoints import (
    NonFiniteStateError,
    RunCheckpoints,
    abstract_like,
    is_finite,
)
from relational_jax.training.mesh import (
    DATA_AXIS,
    batch_sharded,
    check_divisible,
    make_data_mesh,
    maybe_initialize_distributed,
    num_data_shards,
    process_rows,
    replicate,
    replicated,
    shard_batch,
    shard_process_batch,
)

__all__ = [
    "checkpoints",
    "distributed",
    "mesh",
    "NonFiniteStateError",
    "RunCheckpoints",
    "abstract_like",
    "is_finite",
    "DATA_AXIS",
    "batch_sharded",
    "check_divisible",
    "make_data_mesh",
    "maybe_initialize_distributed",
    "num_data_shards",
    "process_rows",
    "replicate",
    "replicated",
    "shard_batch",
    "shard_process_batch",
]
