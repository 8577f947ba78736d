"""Data parallelism the JAX way: one device mesh, NamedShardings, one jit.

No pmap. Parameters and optimiser state are replicated (`P()`), batches are
split along their leading axis over the mesh axis 'data' (`P('data')`), and
the train step is a single

    jax.jit(step, in_shardings=(replicated(mesh), batch_sharded(mesh)),
            out_shardings=(replicated(mesh), replicated(mesh)),
            donate_argnums=0)

XLA inserts the gradient all-reduce. On one device the mesh has one entry
and the code path is the same. On CPU, test with
`XLA_FLAGS=--xla_force_host_platform_device_count=4`.

Several processes (JAX's multi-controller runtime, one process per host
after `maybe_initialize_distributed`): the mesh spans every process's
devices, and a global batch array is formed with
`jax.make_array_from_process_local_data` from the rows that this process's
devices hold (`process_rows`: one contiguous block, process 0 first, as
`jax.devices()` orders them). `shard_batch` takes the whole global batch and
keeps this process's rows; `shard_process_batch` takes only those rows (for
loops that build just their share). With one process both are the plain
`device_put` of before, so single-process results are unchanged.
"""

from typing import Any, Optional, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

DATA_AXIS = "data"


def make_data_mesh(devices: Optional[Sequence[Any]] = None) -> Mesh:
  """A 1-D mesh with axis 'data' over `devices`.

  Default: `jax.devices()`, i.e. all local devices in a single process, and
  every process's devices after `jax.distributed.initialize()` (then every
  process must feed the same global batch to `shard_batch`; each keeps its
  own shards).

  Raises:
    ValueError: if `devices` is given but empty.
  """
  if devices is None:
    devices = jax.devices()
  devices = list(devices)
  if not devices:
    raise ValueError("make_data_mesh needs at least one device, got none.")
  return Mesh(np.array(devices), (DATA_AXIS,))


def num_data_shards(mesh: Mesh) -> int:
  """Number of devices the batch is split over."""
  return int(mesh.shape[DATA_AXIS])


def replicated(mesh: Mesh) -> NamedSharding:
  """Sharding of parameters, optimiser state, RNG and metrics: a full copy on
  every device."""
  return NamedSharding(mesh, P())


def batch_sharded(mesh: Mesh) -> NamedSharding:
  """Sharding of batch arrays: the leading (batch) axis split over 'data'."""
  return NamedSharding(mesh, P(DATA_AXIS))


def check_divisible(
    global_batch: int, num_devices: int, what: str = "global batch size"
) -> None:
  """Raises a ValueError naming both numbers unless num_devices divides
  global_batch."""
  if num_devices <= 0:
    raise ValueError(f"number of devices must be positive, got {num_devices}.")
  if global_batch % num_devices:
    raise ValueError(
        f"{what} {global_batch} is not divisible by the number of devices "
        f"{num_devices}: each device needs an equal share of the batch. Use a "
        f"multiple of {num_devices} (e.g. "
        f"{max(num_devices, global_batch // num_devices * num_devices)}) or "
        "fewer devices."
    )


def _batch_size(batch: Any, batch_axis: int = 0) -> Optional[int]:
  """The common size of axis `batch_axis` of every leaf (None: no leaves).

  Raises:
    ValueError: if a leaf has no such axis or the leaves disagree."""
  sizes = set()
  for leaf in jax.tree_util.tree_leaves(batch):
    shape = np.shape(leaf)
    if len(shape) <= batch_axis:
      raise ValueError(
          "shard_batch needs arrays with a leading batch axis, got a scalar "
          "leaf."
          if batch_axis == 0
          else f"a batch array of shape {shape} has no batch axis {batch_axis}."
      )
    sizes.add(shape[batch_axis])
  if len(sizes) > 1:
    raise ValueError(
        f"batch arrays disagree on the batch size: {sorted(sizes)}."
    )
  return sizes.pop() if sizes else None


def _sharding(mesh: Mesh, batch_axis: int) -> NamedSharding:
  return NamedSharding(mesh, P(*([None] * batch_axis), DATA_AXIS))


def process_rows(global_batch: int, mesh: Mesh) -> slice:
  """The rows [start, stop) of a global batch of `global_batch` examples
  that this process's devices hold when it is split over `mesh`'s 'data'
  axis: the whole batch with one process, 1/process_count of it (process
  `jax.process_index()`'s contiguous block) with several.

  Raises:
    ValueError: if the batch does not divide by the number of devices, if
      this process holds no device of the mesh, or if its devices do not
      hold one contiguous block (a mesh whose device order interleaves the
      processes; build it from `jax.devices()` as `make_data_mesh` does).
  """
  check_divisible(global_batch, num_data_shards(mesh))
  held = batch_sharded(mesh).addressable_devices_indices_map((global_batch,))
  blocks = sorted(
      {index[0].indices(global_batch)[:2] for index in held.values()}
  )
  if not blocks:
    raise ValueError(
        f"process {jax.process_index()} holds none of the "
        f"{num_data_shards(mesh)} devices of the data mesh."
    )
  start, stop = blocks[0][0], blocks[-1][1]
  if sum(b - a for a, b in blocks) != stop - start:
    raise ValueError(
        f"process {jax.process_index()}'s devices hold the non-contiguous "
        f"rows {blocks} of the global batch; order the mesh devices by "
        "process (jax.devices() order)."
    )
  return slice(start, stop)


def shard_process_batch(
    local_batch: Any, mesh: Mesh, global_batch: int, batch_axis: int = 0
) -> Any:
  """Global batch arrays from this process's share of the batch.

  Args:
    local_batch: a pytree of host arrays holding rows `process_rows(
      global_batch, mesh)` of the global batch along `batch_axis`.
    mesh: the data mesh.
    global_batch: the global batch size.
    batch_axis: the batch axis of every leaf (CLRS hints are time-major: 1).

  Returns:
    jax Arrays of the global shape, split along `batch_axis` over 'data';
    with one process simply `jax.device_put(local_batch, ...)`.

  Raises:
    ValueError: if the leaves do not hold exactly this process's rows.
  """
  rows = process_rows(global_batch, mesh)
  size = _batch_size(local_batch, batch_axis)
  if size is not None and size != rows.stop - rows.start:
    raise ValueError(
        f"process {jax.process_index()} must give its {rows.stop - rows.start}"
        f" rows ({rows.start}:{rows.stop}) of the global batch of "
        f"{global_batch}, got {size}."
    )
  sharding = _sharding(mesh, batch_axis)
  if jax.process_count() == 1:
    return jax.device_put(local_batch, sharding)

  def to_global(x):
    x = np.asarray(x)
    shape = x.shape[:batch_axis] + (global_batch,) + x.shape[batch_axis + 1 :]
    return jax.make_array_from_process_local_data(sharding, x, shape)

  return jax.tree_util.tree_map(to_global, local_batch)


def take_rows(batch: Any, rows: slice, batch_axis: int = 0) -> Any:
  """`rows` of every host array of `batch` along `batch_axis`."""
  index = (slice(None),) * batch_axis + (rows,)
  return jax.tree_util.tree_map(lambda x: np.asarray(x)[index], batch)


def shard_batch(batch: Any, mesh: Mesh, batch_axis: int = 0) -> Any:
  """Places every array of a global batch pytree on the mesh, split along
  `batch_axis` (default 0). With several processes each must pass the same
  global batch; it keeps its own rows (`process_rows`).

  Raises:
    ValueError: if an array is a scalar, if the leaves disagree on the batch
      size, or if the batch size does not divide by the number of devices
      (the message names both numbers).
  """
  size = _batch_size(batch, batch_axis)
  if size is None:
    return batch
  check_divisible(size, num_data_shards(mesh))
  if jax.process_count() == 1:
    return jax.device_put(batch, _sharding(mesh, batch_axis))
  return shard_process_batch(
      take_rows(batch, process_rows(size, mesh), batch_axis),
      mesh,
      size,
      batch_axis,
  )


def mesh_of_first(num_devices: int) -> Mesh:
  """The data mesh of the first `num_devices` of `jax.devices()` (0: all)."""
  devices = jax.devices()
  if num_devices > len(devices):
    raise ValueError(
        f"devices={num_devices} but only {len(devices)} devices are available."
    )
  if jax.process_count() > 1 and num_devices not in (0, len(devices)):
    raise ValueError(
        f"devices={num_devices} with {jax.process_count()} processes: a "
        f"multi-process run uses all {len(devices)} devices (devices=0)."
    )
  return make_data_mesh(devices[: num_devices or len(devices)])


def replicate(tree: Any, mesh: Mesh) -> Any:
  """Places every array of a pytree on all devices of the mesh."""
  return jax.device_put(tree, replicated(mesh))


def maybe_initialize_distributed(enabled: bool, **kwargs) -> bool:
  """Calls `jax.distributed.initialize(**kwargs)` when `enabled` (multi-host
  runs). `kwargs` are its arguments (coordinator_address, num_processes,
  process_id, ...); those that are None are left out, so JAX reads them
  from the cluster environment (SLURM, Open MPI, Kubernetes, TPU pods...).
  Cross-process collectives on CPU use gloo (JAX's
  `jax_cpu_collectives_implementation`, unless another one is set). Must
  run before any other JAX call. Returns whether it initialised.

  Then `create_communicators` runs, while the processes are still in step.
  """
  if not enabled:
    return False
  if jax.config.jax_cpu_collectives_implementation in (None, "none"):
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
  jax.distributed.initialize(
      **{k: v for k, v in kwargs.items() if v is not None}
  )
  create_communicators()
  return True


def create_communicators() -> None:
  """Runs one all-reduce over the data mesh and one cross-process gather, so
  that the collective communicators the runs use exist from the start.

  On CPU, XLA creates a gloo communicator the first time a program uses a
  group of devices, and every process must join within 30 s (a fixed
  timeout, `--xla_cpu_collective_timeout_seconds` does not change it: the
  error is "Gloo context initialization failed: DEADLINE_EXCEEDED:
  GetKeyValue() timed out"). A first train step reached after compiles or
  data loading that took one process 30 s longer than another failed so.
  Created here, right after `jax.distributed.initialize` returned on every
  process, the communicators are reused later, and a process that is late
  then only waits. No-op with one process.
  """
  if jax.process_count() == 1:
    return
  from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top

  mesh = make_data_mesh()
  ones = jax.make_array_from_process_local_data(
      batch_sharded(mesh), np.ones((jax.local_device_count(),), np.float32)
  )
  total = jax.jit(lambda x: x.sum(), out_shardings=replicated(mesh))(ones)
  if int(total.addressable_data(0)) != jax.device_count():
    raise RuntimeError(
        f"the all-reduce over {jax.device_count()} devices gave "
        f"{total.addressable_data(0)}."
    )
  multihost_utils.process_allgather(np.zeros((1,), np.int32))


def to_host(x: Any) -> np.ndarray:
  """A batch-sharded array as one host array of the global batch: with
  several processes every process gathers the others' rows."""
  if jax.process_count() > 1:
    from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))
  return np.asarray(x)
