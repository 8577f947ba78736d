r"""Benchmark: one Edge Transformer layer, chunked triangular attention vs reference.

Times forward+backward (and forward only) of one `EdgeTransformerLayer`
(eq. 3, triangular attention eq. 4-9) for two implementations:
  chunked    pivot-chunked online softmax with a custom VJP, O(B N^2 D) memory
  reference  materialises the B x N x N x N x D value tensor and the
             B x N x N x N x H scores, plain autodiff, as the authors' einsum
             code does
Memory comes from XLA's compiled `memory_analysis()` (temp + arguments +
outputs; on GPU also the device's peak bytes in use when available); speed
is the median wall time of `--repeats` runs after one warm-up run. A
configuration whose compiled memory exceeds `--memory_limit_gb` is compiled
(to report its memory) but not run.

Usage (tiny smoke run, then the full default sizes):
  python3 -m experiments.bench.triangular --batch=2 --width=16 --num_heads=2 \
      --sizes=8,12 --forward_only_sizes=16 --output=/tmp/bench.json
  python3 -m experiments.bench.triangular
"""

import json
import os
import platform
import statistics
import time
from typing import Any, Dict, List, Optional, Sequence

from absl import app
from absl import flags
import jax
import jax.numpy as jnp

from relational_jax.models.edge_transformer import EdgeTransformerLayer

_BATCH = flags.DEFINE_integer("batch", 32, "Batch size B.")
_WIDTH = flags.DEFINE_integer("width", 192, "Edge width D.")
_HEADS = flags.DEFINE_integer(
    "num_heads", 8, "Attention heads H (must divide D)."
)
_SIZES = flags.DEFINE_list(
    "sizes", ["16", "32", "64"], "Node counts N timed forward+backward."
)
_FORWARD_ONLY_SIZES = flags.DEFINE_list(
    "forward_only_sizes", ["128"], "Node counts N timed forward only."
)
_IMPLS = flags.DEFINE_list(
    "impls", ["chunked", "reference"], "Implementations to compare."
)
_CHUNK_SIZE = flags.DEFINE_integer(
    "chunk_size", 8, "Pivots per chunk of the chunked impl."
)
_FFN_CHUNK_SIZE = flags.DEFINE_integer(
    "ffn_chunk_size",
    4,
    "Rows per rematerialised FFN block of the chunked impl (0: unchunked). "
    "The reference always runs its FFN unchunked.",
)
_DTYPE = flags.DEFINE_enum(
    "dtype",
    "float32",
    ["float32", "bfloat16"],
    "Activation dtype (parameters stay fp32).",
)
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed runs per configuration.")
_MEMORY_LIMIT_GB = flags.DEFINE_float(
    "memory_limit_gb",
    None,
    "Skip running configurations whose compiled memory exceeds this; "
    "default: 60% of the host's physical memory (CPU) or of the device's "
    "memory limit (GPU).",
)
_OUTPUT = flags.DEFINE_string(
    "output",
    "results/bench_triangular.json",
    "Where to write the JSON results.",
)


def _default_memory_limit_bytes() -> int:
  device = jax.devices()[0]
  stats = device.memory_stats() if hasattr(device, "memory_stats") else None
  if stats and stats.get("bytes_limit"):
    return int(0.6 * stats["bytes_limit"])
  try:
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  except (ValueError, OSError, AttributeError):
    total = 8 * 2**30
  return int(0.6 * total)


def _peak_device_bytes() -> Optional[int]:
  stats = jax.devices()[0].memory_stats()
  return None if not stats else stats.get("peak_bytes_in_use")


def _measure(fn, args, repeats: int, memory_limit: int) -> Dict[str, Any]:
  """Compiles `fn`, reads its memory analysis, and times it if it fits."""
  record: Dict[str, Any] = {}
  start = time.perf_counter()
  compiled = jax.jit(fn).lower(*args).compile()
  record["compile_s"] = time.perf_counter() - start
  analysis = compiled.memory_analysis()
  if analysis is not None:
    record["temp_bytes"] = int(analysis.temp_size_in_bytes)
    record["argument_bytes"] = int(analysis.argument_size_in_bytes)
    record["output_bytes"] = int(analysis.output_size_in_bytes)
    record["compiled_peak_bytes"] = (
        record["temp_bytes"] + record["argument_bytes"] + record["output_bytes"]
    )
  needed = record.get("compiled_peak_bytes", 0)
  if needed > memory_limit:
    record["ran"] = False
    record["skipped"] = (
        f"needs {needed / 2**30:.2f} GiB > limit {memory_limit / 2**30:.2f} GiB"
    )
    return record
  jax.block_until_ready(compiled(*args))  # warm-up
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    times.append(time.perf_counter() - start)
  record.update(ran=True, times_s=times, median_s=statistics.median(times))
  peak = _peak_device_bytes()
  if peak is not None:
    record["device_peak_bytes_in_use"] = int(peak)
  return record


def run_benchmark(
    *,
    batch: int,
    width: int,
    heads: int,
    sizes: Sequence[int],
    forward_only_sizes: Sequence[int],
    impls: Sequence[str],
    chunk_size: int,
    dtype: str,
    repeats: int,
    ffn_chunk_size: Optional[int] = 4,
    memory_limit_bytes: Optional[int] = None,
    output: Optional[str] = None,
) -> Dict[str, Any]:
  """Runs the benchmark grid; returns (and optionally writes) the results."""
  memory_limit = memory_limit_bytes or _default_memory_limit_bytes()
  act_dtype = jnp.dtype(dtype)
  results: List[Dict[str, Any]] = []
  report = dict(
      config=dict(
          batch=batch,
          width=width,
          heads=heads,
          chunk_size=chunk_size,
          ffn_chunk_size=ffn_chunk_size,
          dtype=dtype,
          repeats=repeats,
          memory_limit_bytes=memory_limit,
      ),
      device=str(jax.devices()[0]),
      platform=jax.default_backend(),
      host=dict(machine=platform.machine(), cpu_count=os.cpu_count()),
      jax_version=jax.__version__,
      results=results,
  )
  grid = [(n, "forward+backward") for n in sizes] + [
      (n, "forward") for n in forward_only_sizes
  ]
  for n, mode in grid:
    x = jax.random.normal(
        jax.random.PRNGKey(n), (batch, n, n, width), act_dtype
    )
    params = None
    for impl in impls:
      # The reference is the plain layer: materialising attention and an
      # unchunked FFN (autodiff saves everything).
      layer = EdgeTransformerLayer(
          num_heads=heads,
          impl=impl,
          chunk_size=chunk_size,
          ffn_chunk_size=None if impl == "reference" else ffn_chunk_size,
      )
      if params is None:  # The same parameters for every implementation.
        params = layer.lazy_init(jax.random.PRNGKey(0), x)
      if mode == "forward":
        fn = layer.apply
      else:

        def fn(params, x, layer=layer):
          loss = lambda p, x: jnp.sum(layer.apply(p, x).astype(jnp.float32))
          return jax.grad(loss, argnums=(0, 1))(params, x)

      record = dict(impl=impl, n=n, mode=mode)
      record.update(_measure(fn, (params, x), repeats, memory_limit))
      # Size of one B x N x N x N x D tensor in the activation dtype.
      record["cubic_tensor_bytes"] = batch * n**3 * width * act_dtype.itemsize
      results.append(record)
      print(json.dumps(record), flush=True)
      if output:  # Rewritten after every configuration: partial runs count.
        _write(output, report)
  return report


def _write(path: str, report: Dict[str, Any]) -> None:
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, "w") as f:
    json.dump(report, f, indent=2)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError("Too many command-line arguments.")
  limit = (
      None
      if _MEMORY_LIMIT_GB.value is None
      else int(_MEMORY_LIMIT_GB.value * 2**30)
  )
  run_benchmark(
      batch=_BATCH.value,
      width=_WIDTH.value,
      heads=_HEADS.value,
      sizes=[int(n) for n in _SIZES.value],
      forward_only_sizes=[int(n) for n in _FORWARD_ONLY_SIZES.value],
      impls=_IMPLS.value,
      chunk_size=_CHUNK_SIZE.value,
      dtype=_DTYPE.value,
      ffn_chunk_size=_FFN_CHUNK_SIZE.value or None,
      repeats=_REPEATS.value,
      memory_limit_bytes=limit,
      output=_OUTPUT.value,
  )


if __name__ == "__main__":
  app.run(main)
