r"""Cost of dropout masks per generator on this machine.

  taskset -c 0 python -m experiments.bench.dropout_prng \
      --output=results/bench_dropout_prng.json

Times one jitted `jax.random.bernoulli(key, 0.5, (n,))` (summed, so the mask
is consumed) for threefry and for `relational_jax.training.prng`'s counter
hash; median of `--repeats` calls after one compile.
"""

import json
import os
import statistics
import time

from absl import app
from absl import flags
import jax

from relational_jax.training import prng
from relational_jax.training import reporting

_N = flags.DEFINE_integer(
    "n",
    25_000_000,
    "Draws per call (about one SCAN step's dropout at the Csordas settings).",
)
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed calls per generator.")
_OUTPUT = flags.DEFINE_string(
    "output", "results/bench_dropout_prng.json", "JSON output."
)


def main(argv):
  del argv
  draw = jax.jit(lambda key: jax.random.bernoulli(key, 0.5, (_N.value,)).sum())
  seconds = {}
  for name in prng.DROPOUT_PRNGS:
    key = prng.dropout_key(jax.random.PRNGKey(0), name)
    draw(key).block_until_ready()
    times = []
    for i in range(_REPEATS.value):
      start = time.perf_counter()
      draw(jax.random.fold_in(key, i)).block_until_ready()
      times.append(time.perf_counter() - start)
    seconds[name] = statistics.median(times)
  result = {
      "draws": _N.value,
      "median_seconds": seconds,
      "threefry_over_counter_hash": (
          seconds["threefry"] / seconds["counter_hash"]
      ),
      "cpus": len(os.sched_getaffinity(0)),
      "load_average": os.getloadavg(),
      "jax": jax.__version__,
  }
  reporting.write_json(_OUTPUT.value, result)
  print(json.dumps(result))


if __name__ == "__main__":
  app.run(main)
