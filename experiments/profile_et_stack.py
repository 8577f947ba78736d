r"""Where one Edge Transformer training step's time goes (XLA:CPU op profile).

  python -m experiments.profile_et_stack --batch_size=32 --nodes=16

Times `iters` jitted forward+backward passes of the `EdgeTransformer` stack at
the CLRS benchmark size (`experiments.bench_processors` ENTRIES['et']: 3 tied
layers, 12 heads x 16) under `jax.profiler.trace`, then sums the executed
XLA ops' durations by pass (forward / backward) and by part of the layer
(eq. 3): 'project' (LN_1 and q, k, V^1, V^2, eq. 6-8), 'core' (the pivot
sum, eq. 4-8), 'remat' (the FFN recomputed in the backward) and 'update'
(W^o, LN_2, FFN). Op durations on 2 threads overlap, so the shares, not the
sums, are the result.
"""

import collections
import glob
import gzip
import json
import re
import tempfile
import time

from absl import app
from absl import flags
import jax

from relational_jax.models.edge_transformer import ETConfig
from relational_jax.models.edge_transformer import EdgeTransformer

flags.DEFINE_integer("batch_size", 32, "Graphs per batch.")
flags.DEFINE_integer("nodes", 16, "Nodes per graph.")
flags.DEFINE_integer("iters", 3, "Profiled forward+backward passes.")
FLAGS = flags.FLAGS

PARTS = ("project", "rematted", "aggregate", "update")


def _part(op_name: str) -> str:
  for part in PARTS:
    if part in op_name:
      return {"rematted": "remat", "aggregate": "core"}.get(part, part)
  return "other"


def main(argv):
  del argv
  config = ETConfig()
  model = EdgeTransformer(config)
  x_BxNxNxD = jax.random.normal(
      jax.random.PRNGKey(0),
      (FLAGS.batch_size, FLAGS.nodes, FLAGS.nodes, config.edge_width))
  params = model.init(jax.random.PRNGKey(1), x_BxNxNxD)
  step = jax.jit(jax.value_and_grad(
      lambda p, x: (model.apply(p, x) ** 2).sum(), argnums=(0, 1)))
  jax.block_until_ready(step(params, x_BxNxNxD))
  hlo = step.lower(params, x_BxNxNxD).compile().as_text()
  op_names = {}
  for line in hlo.split("\n"):
    m = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = .*op_name=\"([^\"]*)\"", line)
    if m:
      op_names[m.group(1)] = m.group(2)
  log_dir = tempfile.mkdtemp(prefix="profile_et_")
  t = time.perf_counter()
  with jax.profiler.trace(log_dir, create_perfetto_trace=True):
    for _ in range(FLAGS.iters):
      jax.block_until_ready(step(params, x_BxNxNxD))
  wall_s = (time.perf_counter() - t) / FLAGS.iters
  trace = glob.glob(f"{log_dir}/**/perfetto_trace.json.gz", recursive=True)[0]
  events = json.load(gzip.open(trace))
  events = events["traceEvents"] if isinstance(events, dict) else events
  totals = collections.Counter()
  for e in events:
    name = e.get("name", "")
    if e.get("ph") != "X" or name not in op_names or name.startswith("while"):
      continue
    op = op_names[name]
    kind = "dot" if "dot_general" in op else "elementwise/reduce"
    totals[("backward" if "transpose(" in op else "forward", _part(op),
            kind)] += e["dur"] / 1e3 / FLAGS.iters
  total = sum(totals.values())
  print(f"wall {wall_s:.3f} s per forward+backward (profiled)")
  for key, ms in totals.most_common():
    print(f"{ms:8.1f} ms  {100 * ms / total:5.1f}%  {' / '.join(key)}")


if __name__ == "__main__":
  app.run(main)
