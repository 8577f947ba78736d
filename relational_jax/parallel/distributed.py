"""Several processes, one training run: JAX's own multi-controller runtime.

One process per host (or per group of devices), all running the same
program: `jax.distributed.initialize` connects them through a coordinator,
`jax.devices()` then lists every process's devices, and the data mesh
(`mesh.make_data_mesh`) spans them all. Each process feeds its rows of
every global batch (`mesh.process_rows`, `mesh.shard_process_batch`).

This module holds what the experiments share about that runtime:

  * the command-line flags, JAX's own arguments: `--distributed
    --coordinator_address=HOST:PORT --num_processes=N --process_id=I`
    (any of the last three left out is read from the cluster environment by
    `jax.distributed.initialize`);
  * who writes files: results JSON, plots, config and vocabularies are
    written by process 0 only (`is_primary`); orbax checkpoints are saved
    and restored by every process together (orbax coordinates them);
  * `barrier`, for a file that process 0 writes and the others then read.
"""

from absl import flags
import jax
from jax.experimental import multihost_utils

from relational_jax.parallel import mesh as mesh_lib


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """--distributed, --coordinator_address, --num_processes, --process_id."""
  flags.DEFINE_boolean(
      "distributed",
      False,
      "Run as one of several processes (jax.distributed.initialize before "
      "anything else); without the three flags below JAX reads them from the "
      "cluster environment.",
      flag_values=flag_values,
  )
  flags.DEFINE_string(
      "coordinator_address",
      None,
      "HOST:PORT of process 0's coordinator service (with --distributed).",
      flag_values=flag_values,
  )
  flags.DEFINE_integer(
      "num_processes",
      None,
      "Number of processes of the run (with --distributed).",
      lower_bound=1,
      flag_values=flag_values,
  )
  flags.DEFINE_integer(
      "process_id",
      None,
      "This process's index, 0 .. num_processes - 1 (with --distributed).",
      lower_bound=0,
      flag_values=flag_values,
  )


def initialize_from_flags(flag_values: flags.FlagValues = flags.FLAGS) -> bool:
  """`jax.distributed.initialize` with the flags' values when --distributed
  (returns True), nothing otherwise (False). Call before any other JAX use.

  Raises:
    ValueError: a process flag is given without --distributed, or
      --process_id is not below --num_processes.
  """
  given = {
      name: flag_values[name].value
      for name in ("coordinator_address", "num_processes", "process_id")
  }
  if not flag_values.distributed:
    stray = [f"--{k}" for k, v in given.items() if v is not None]
    if stray:
      raise ValueError(f"{', '.join(stray)} given without --distributed.")
    return False
  num, index = given["num_processes"], given["process_id"]
  if num is not None and index is not None and index >= num:
    raise ValueError(
        f"--process_id={index} must be below --num_processes={num}."
    )
  return mesh_lib.maybe_initialize_distributed(True, **given)


def is_primary() -> bool:
  """Whether this process writes the run's files (process 0)."""
  return jax.process_index() == 0


def barrier(name: str) -> None:
  """Waits until every process reaches `barrier(name)` (no-op with one)."""
  if jax.process_count() > 1:
    multihost_utils.sync_global_devices(name)
