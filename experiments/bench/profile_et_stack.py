r"""Where one Edge Transformer training step's time goes (XLA:CPU op profile).

  python -m experiments.bench.profile_et_stack --batch_size=32 --nodes=16

Times `iters` jitted forward+backward passes of the `EdgeTransformer` stack at
the CLRS benchmark size (`experiments.bench.processors` ENTRIES['et']: 3 tied
layers, 12 heads x 16) under `jax.profiler.trace`, then sums the executed
XLA ops' durations by pass (forward / backward) and by part of the layer
(eq. 3): 'project' (LN_1 and q, k, V^1, V^2, eq. 6-8), 'core' (the pivot
sum, eq. 4-8), 'remat' (the FFN recomputed in the backward) and 'update'
(W^o, LN_2, FFN). Op durations on 2 threads overlap, so the shares, not the
sums, are the result.
"""

import collections

from absl import app
from absl import flags
import jax

from experiments.bench import xla_op_profile

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
      (FLAGS.batch_size, FLAGS.nodes, FLAGS.nodes, config.edge_width),
  )
  params = model.init(jax.random.PRNGKey(1), x_BxNxNxD)
  step = jax.jit(
      jax.value_and_grad(
          lambda p, x: (model.apply(p, x) ** 2).sum(), argnums=(0, 1)
      )
  )
  jax.block_until_ready(step(params, x_BxNxNxD))
  hlo = step.lower(params, x_BxNxNxD).compile().as_text()

  def run():
    for _ in range(FLAGS.iters):
      jax.block_until_ready(step(params, x_BxNxNxD))

  wall_s, ops = xla_op_profile.traced_ops(run, hlo, FLAGS.iters)
  totals = collections.Counter()
  for op, ms in ops:
    kind = "dot" if "dot_general" in op else "elementwise/reduce"
    totals[
        ("backward" if "transpose(" in op else "forward", _part(op), kind)
    ] += ms
  total = sum(totals.values())
  print(f"wall {wall_s:.3f} s per forward+backward (profiled)")
  for key, ms in totals.most_common():
    print(f"{ms:8.1f} ms  {100 * ms / total:5.1f}%  {' / '.join(key)}")


if __name__ == "__main__":
  app.run(main)
