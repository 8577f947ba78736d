r"""FLOPs of one CLRS training step per processor, from XLA's cost analysis.

  python -m experiments.bench.flops_processors --entries=et,mpnn512,rt \
      --output=results/flops_processors.json

Speed ratios between processors (experiments.bench.peers) are bounded by
the work each step does. This compiles the same training step the
benchmarks time (`CarryModel.jitted_train_step`: forward, backward and Adam
update over the hint trajectory of one batch; `bench.processors` flags:
algorithm, batch_size, train_length) and reads XLA's own count
(`Compiled.cost_analysis()['flops']`, the optimised HLO, per device) without
running it, so the numbers do not depend on machine load. Also reports
bytes accessed and each entry's FLOPs relative to the first entry.

XLA's cost analysis counts a while loop's body once, whatever its trip
count. CLRS runs the hint steps after the first as a `hk.scan` (a while
loop), and the Edge Transformer has loops of its own: the triangular
attention's pivot chunks (forward and backward) and the row-chunked FFN
(`ffn_chunk_size`, rematerialised in the backward). So the step is compiled
here with every scan fully unrolled (`_unrolled_scans`: CLRS's `hk.scan`
and `jax.lax.scan`; the same computation, traced for counting only): every
hint step, chunk and recomputation is counted. `--unroll_scans=false` gives
the loops as trained, each body counted once.
"""

import contextlib
import json
import time

from absl import app
from absl import flags
from absl import logging
from clrs._src import nets as clrs_nets
import haiku as hk
import jax
import numpy as np

from experiments.bench import processors as bench_processors
from relational_jax.training import reporting
from relational_jax.training.clrs import config as clrs_config
from relational_jax.training.clrs import data as clrs_data
from relational_jax.training.clrs import loop as clrs_loop

flags.DEFINE_boolean(
    "unroll_scans",
    True,
    "Count every hint step and "
    "every chunk of the ET's loops (module docstring); "
    "false: XLA's count of the loops as trained, each body "
    "once.",
)
FLAGS = flags.FLAGS
FLAGS.set_default("entries", ["mpnn512", "et", "rt", "triplet_gmpnn"])
FLAGS.set_default("output", "results/flops_processors.json")


class _UnrolledScanHaiku:
  """`haiku` as CLRS's nets module sees it, with `scan` fully unrolled."""

  def __getattr__(self, name):
    return getattr(hk, name)

  @staticmethod
  def scan(f, init, xs, length=None, reverse=False, unroll=1):
    del unroll
    return hk.scan(f, init, xs, length=length, reverse=reverse, unroll=True)


def _unrolled_lax_scan(scan):
  """`jax.lax.scan` with its loop fully unrolled."""

  def unrolled(*args, **kwargs):
    kwargs["unroll"] = True
    return scan(*args, **kwargs)

  return unrolled


@contextlib.contextmanager
def _unrolled_scans(enabled: bool):
  """CLRS's hint-step scan (`clrs._src.nets.hk.scan`) and every
  `jax.lax.scan` (the ET's chunk loops) fully unrolled while the training
  step is traced."""
  if not enabled:
    yield
    return
  saved_hk, saved_scan = clrs_nets.hk, jax.lax.scan
  clrs_nets.hk = _UnrolledScanHaiku()
  jax.lax.scan = _unrolled_lax_scan(saved_scan)
  try:
    yield
  finally:
    clrs_nets.hk, jax.lax.scan = saved_hk, saved_scan


def train_step_cost(name: str) -> dict:
  """XLA's cost analysis of entry `name`'s jitted training step."""
  config = clrs_config.get_config(bench_processors.ENTRIES[name])
  stream = clrs_data.TrainStream(
      FLAGS.algorithm, [FLAGS.train_length], FLAGS.batch_size, seed=0
  )
  feedback = next(stream)
  model = clrs_loop.build_model(
      config, stream.spec, feedback, "/tmp/flops_clrs"
  )
  model.init(feedback.features, seed=0)
  started = time.perf_counter()
  with _unrolled_scans(FLAGS.unroll_scans):
    compiled = model.jitted_train_step.lower(
        model.state()["params"],
        jax.device_put(jax.random.PRNGKey(0), model._replicated),  # pylint: disable=protected-access
        model.shard_feedback(feedback),
        model.state()["opt_state"],
        0,
    ).compile()  # pylint: disable=protected-access
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  return {
      "config": bench_processors.ENTRIES[name],
      "params": int(
          sum(np.size(x) for x in jax.tree_util.tree_leaves(model.params))
      ),
      "hint_steps_train": int(feedback.features.hints[0].data.shape[0]),
      "train_step_gflops": float(cost["flops"]) / 1e9,
      "scans_unrolled": FLAGS.unroll_scans,
      "train_step_gbytes_accessed": (
          float(cost.get("bytes accessed", float("nan"))) / 1e9
      ),
      "compile_s": time.perf_counter() - started,
  }


def main(argv):
  del argv
  if not FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)
  unknown = [e for e in FLAGS.entries if e not in bench_processors.ENTRIES]
  if unknown:
    raise ValueError(
        f"Unknown entries {unknown}; valid entries are "
        f"{list(bench_processors.ENTRIES)}."
    )
  entries = {}
  for name in FLAGS.entries:
    entries[name] = train_step_cost(name)
    print(
        name,
        json.dumps({k: v for k, v in entries[name].items() if k != "config"}),
        flush=True,
    )
  first = FLAGS.entries[0]
  for e in entries.values():
    e[f"flops_over_{first}"] = (
        e["train_step_gflops"] / entries[first]["train_step_gflops"]
    )
  reporting.write_json(
      FLAGS.output,
      {
          "algorithm": FLAGS.algorithm,
          "batch_size": FLAGS.batch_size,
          "train_length": FLAGS.train_length,
          "jax": jax.__version__,
          "device_kind": jax.devices()[0].device_kind,
          "source": (
              "XLA Compiled.cost_analysis() of CarryModel.jitted_train_step"
          ),
          "entries": entries,
      },
  )


if __name__ == "__main__":
  app.run(main)
