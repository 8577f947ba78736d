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


def check_divisible(global_batch: int, num_devices: int,
                    what: str = "global batch size") -> None:
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
        f"fewer devices.")


def shard_batch(batch: Any, mesh: Mesh) -> Any:
  """Places every array of a batch pytree on the mesh, split along axis 0.

  Raises:
    ValueError: if an array is a scalar, if the leaves disagree on the batch
      size, or if the batch size does not divide by the number of devices
      (the message names both numbers).
  """
  leaves = jax.tree_util.tree_leaves(batch)
  sizes = set()
  for leaf in leaves:
    shape = np.shape(leaf)
    if not shape:
      raise ValueError("shard_batch needs arrays with a leading batch axis, "
                       "got a scalar leaf.")
    sizes.add(shape[0])
  if len(sizes) > 1:
    raise ValueError(f"batch arrays disagree on the batch size: "
                     f"{sorted(sizes)}.")
  if sizes:
    check_divisible(sizes.pop(), num_data_shards(mesh))
  return jax.device_put(batch, batch_sharded(mesh))


def mesh_of_first(num_devices: int) -> Mesh:
  """The data mesh of the first `num_devices` of `jax.devices()` (0: all)."""
  devices = jax.devices()
  if num_devices > len(devices):
    raise ValueError(f"devices={num_devices} but only {len(devices)} "
                     f"devices are available.")
  return make_data_mesh(devices[:num_devices or len(devices)])


def replicate(tree: Any, mesh: Mesh) -> Any:
  """Places every array of a pytree on all devices of the mesh."""
  return jax.device_put(tree, replicated(mesh))


def maybe_initialize_distributed(enabled: bool, **kwargs) -> bool:
  """Calls `jax.distributed.initialize(**kwargs)` when `enabled` (multi-host
  runs; the coordinator, process count and id come from `kwargs` or the
  cluster environment). Must run before any other JAX call. Returns whether
  it initialised."""
  if not enabled:
    return False
  jax.distributed.initialize(**kwargs)
  return True
