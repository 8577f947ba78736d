r"""Where one CLRS training step's time goes (XLA:CPU op profile).

  python -m experiments.bench.profile_clrs_step --entry=rt
  python -m experiments.bench.profile_clrs_step --entry=et --output=results/profile_clrs_step_et.json
  python -m experiments.bench.profile_clrs_step --entry=rt --by=instruction --output=results/profile_clrs_step_rt_instructions.json

Builds the benchmark model of `experiments.bench.processors.ENTRIES[entry]`
(by default Bellman-Ford, batch 32, n = 16, the paper-tuned sizes), runs `iters` jitted
training steps (`CarryModel.train_step`: forward over all hint steps, backward,
Adam) under `jax.profiler.trace`, and sums the executed XLA ops' durations by
where they come from: the module path in the op's name stack (Haiku and Flax
scopes, cut to `depth` components after the processor's stack) and by pass
(forward, or backward: a `transpose(` in the name stack) and kind ('dot' for
matrix products and convolutions, 'other' for the rest). Op durations on
several threads overlap, so the shares, not the sums, are the result.
"""

import collections
import json
import os
import re
import tempfile

from absl import app
from absl import flags
from absl import logging
import jax

from experiments.bench import processors as bench_processors
from experiments.bench import xla_op_profile
from relational_jax.training.clrs import config as clrs_config
from relational_jax.training.clrs import data as clrs_data
from relational_jax.training.clrs import loop as clrs_loop

flags.DEFINE_string(
    "entry", "rt", "Entry of experiments.bench.processors.ENTRIES."
)
flags.DEFINE_integer("iters", 3, "Profiled training steps.")
flags.DEFINE_integer("depth", 3, "Module-path components kept per group.")
flags.DEFINE_integer("top", 25, "Groups printed.")
flags.DEFINE_enum(
    "by",
    "module",
    ["module", "instruction"],
    "Group by (pass, module, kind), or also by executed HLO "
    "instruction (name and result shape): finds a single slow "
    "op, e.g. a GEMM with transposed operands.",
)
FLAGS = flags.FLAGS
# bench.processors defines algorithm, batch_size, train_length and output
# (among others); we reuse them, with no JSON written unless asked.
FLAGS.set_default("output", None)

# Name-stack components that carry no module information.
_NOISE = re.compile(
    r"^(jit\(.*\)|pjit\(.*\)|while|body|cond|checkpoint|remat|"
    r"transpose\(.*\)|jvp\(.*\)|vmap\(.*\)|scan|"
    r"[a-z_]+\[.*\])$"
)


def module_path(op_name: str, depth: int) -> str:
  """The module components of an XLA op_name, up to `depth` of them."""
  *stack, primitive = op_name.split("/")
  parts = [p for p in stack if not _NOISE.match(p)]
  return "/".join(parts[-depth:]) if parts else f"(top level) {primitive}"


def main(argv):
  del argv
  if not FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)
  if FLAGS.entry not in bench_processors.ENTRIES:
    raise ValueError(
        f"Unknown entry {FLAGS.entry!r}; valid entries are "
        f"{list(bench_processors.ENTRIES)}."
    )
  overrides = bench_processors.ENTRIES[FLAGS.entry]
  config = clrs_config.get_config(overrides)
  stream = clrs_data.TrainStream(
      FLAGS.algorithm, [FLAGS.train_length], FLAGS.batch_size, seed=0
  )
  feedback = next(stream)
  model = clrs_loop.build_model(
      config, stream.spec, feedback, tempfile.mkdtemp(prefix="profile_clrs_")
  )
  model.init(feedback.features, seed=0)
  key = jax.random.PRNGKey(0)
  float(model.feedback(key, feedback))  # compile
  hlo = (
      model.jitted_train_step.lower(
          model.state()["params"],
          key,
          model.shard_feedback(feedback),  # pylint: disable=protected-access
          model.state()["opt_state"],
          0,
      )
      .compile()
      .as_text()
  )  # pylint: disable=protected-access

  def run():
    for i in range(FLAGS.iters):
      loss = model.feedback(jax.random.fold_in(key, i), feedback)
    float(loss)

  by_instruction = FLAGS.by == "instruction"
  wall_s, ops = xla_op_profile.traced_ops(
      run, hlo, FLAGS.iters, instructions=by_instruction
  )
  totals = collections.Counter()
  for op, ms, *instruction in ops:
    kind = "dot" if ("dot_general" in op or "conv" in op) else "other"
    direction = "backward" if "transpose(" in op else "forward"
    totals[(direction, module_path(op, FLAGS.depth), kind, *instruction)] += ms
  total = sum(totals.values())
  for label, pick in (("pass", 0), ("kind", 2)):
    share = collections.Counter()
    for k, ms in totals.items():
      share[k[pick]] += ms
    print(
        f"by {label}: "
        + ", ".join(f"{v} {ms / total:.1%}" for v, ms in share.most_common())
    )
  print(
      f"{FLAGS.entry}: wall {wall_s:.3f} s per training step (profiled), "
      f"op time {total / 1e3:.3f} s"
  )
  for k, ms in totals.most_common(FLAGS.top):
    print(f"{ms:8.1f} ms  {100 * ms / total:5.1f}%  {' | '.join(k)}")
  if FLAGS.output:
    os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output)), exist_ok=True)
    with open(FLAGS.output, "w") as f:
      json.dump(
          {
              "entry": FLAGS.entry,
              "config": overrides,
              "wall_s_per_step": wall_s,
              "op_ms_per_step": total,
              "device": str(jax.devices()[0]),
              "groups": [
                  {
                      "pass": k[0],
                      "module": k[1],
                      "kind": k[2],
                      **({"instruction": k[3]} if by_instruction else {}),
                      "ms": ms,
                      "share": ms / total,
                  }
                  for k, ms in totals.most_common()
              ],
          },
          f,
          indent=1,
      )


if __name__ == "__main__":
  app.run(main)
