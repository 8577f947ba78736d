r"""One SCAN training step, ours against the authors' PyTorch code.

  python -m experiments.bench.scan_step --reference=/tmp/cs \
      --reference_python=/tmp/torchvenv/bin/python --threads=2 \
      --output=results/bench_scan_step.json

What is timed: one training step (forward, backward, optimiser update) of
the SCAN length-cutoff-26 relative Universal Transformer at the settings of
Csordas et al. 2021 (their sweep `sweeps/scan_trafo_length_cutoff.yaml`,
profile `trafo_scan` of their `main.py`: d 128, 8 heads, 3+3 tied layers,
FFN 256, dropout on every activation, batch 256, Adam lr 1e-3, clip 5; the
rate does not change the cost). Ours is the jitted
`relational_jax.training.seq2seq` step of the reproduction
`scan_cutoff26_relative_universal` (`experiments.reproductions`); theirs is
their own `Task.train_step()` on their own model
(`experiments/compare/refs/scan_csordas_torch.py --mode=bench`, run by
`--reference_python`, the authors' environment).

Same batches: `--num_batches` real training batches of 256 examples are
drawn once (our seeded training stream, `trainer.epoch_indices`, seed 0,
over the cutoff-26 training set) and both sides train on exactly these examples, in the same order,
each padding them as its own training loop does (ours: the training set's
longest source and target; theirs: their `VarLengthCollate`, each batch's
longest; the shapes are recorded in the JSON).

Same CPU: both sides run in their own process, pinned to the same first
`--threads` cores (`sched_setaffinity`, which sizes XLA's thread pool) with
`torch.set_num_threads(--threads)` on their side. After `--warmup` steps
each (compilation, allocator warm-up), the timed calls alternate between the
processes, `--steps_per_round` steps at a time, for `--rounds` rounds (the
order reversed every other round), so load from other processes hits both
sides alike. Reported: the median step time of each side over all timed
steps, the per-round medians, and ours / theirs.

The authors' code is never vendored: without `--reference` (a checkout of
github.com/RobertCsordas/transformer_generalization) the benchmark says what
to fetch and exits with status 2.
"""

import json
import os
import statistics
import sys
import tempfile
import time

from absl import app
from absl import flags

from experiments.bench import worker

REPOSITORY = "RobertCsordas/transformer_generalization"
MARKER = "main.py"
REPRODUCTION = "scan_cutoff26_relative_universal"
# Their sweep scan_trafo_length_cutoff.yaml, the relative_universal cell at
# cutoff 26, as their main.py command line.
AUTHORS_FLAGS = (
    "-profile trafo_scan -task scan_resplit_transformer "
    "-transformer.variant relative_universal "
    "-scan.length_cutoff 26 -stop_after 50000 -log tb"
)
_REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
_REF_SCRIPT = os.path.join(
    _REPO, "experiments", "compare", "refs", "scan_csordas_torch.py"
)

FLAGS = flags.FLAGS


def our_config(batch_size: int = 256, data_dir=None, dropout_prng=None):
  """The reproduction's paper config (the Csordas settings); `dropout_prng`
  overrides its dropout generator (`relational_jax.training.prng`)."""
  from experiments import reproductions  # pylint: disable=g-import-not-at-top

  c = reproductions.get(REPRODUCTION).build("paper")
  c.train.batch_size = batch_size
  if dropout_prng:
    c.train.dropout_prng = dropout_prng
  c.train.progress = False
  if data_dir:
    c.data.data_dir = data_dir
  return c


def draw_batches(config, num_batches: int):
  """`num_batches` training batches (lists of [source, target]) from our
  seeded training stream (`trainer.epoch_indices`, seed 0) over the
  configured SCAN training set; full batches (fewer than an epoch's)."""
  from relational_jax.training import trainer  # pylint: disable=g-import-not-at-top
  from relational_jax.training.seq2seq import data as data_lib  # pylint: disable=g-import-not-at-top

  data = data_lib.load_data(config.data)
  size = config.train.batch_size
  if num_batches * size > len(data.train):
    raise ValueError(
        f"{num_batches} batches of {size} are more than one epoch of the "
        f"{len(data.train)} training examples."
    )
  return [
      [
          list(data.train[i])
          for i in trainer.epoch_indices(k, len(data.train), size, 0)
      ]
      for k in range(num_batches)
  ]


def check_reference(path):
  """The checkout's absolute path; raises
  `experiments.compare.reference.MissingReferenceError` naming what to
  fetch when `path` is not a checkout of the authors' repository."""
  from experiments.compare import reference as reference_lib  # pylint: disable=g-import-not-at-top

  return reference_lib.require("bench.scan_step", path, REPOSITORY, MARKER)


def summarize(times):
  return {
      "median_s": statistics.median(times),
      "min_s": min(times),
      "max_s": max(times),
      "n": len(times),
  }


# -- Our side's worker (its own process, like theirs). ------------------------


def _serve_ours(
    batches_path: str, batch_size: int, data_dir=None, dropout_prng=None
) -> None:
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from relational_jax.training.seq2seq import loop  # pylint: disable=g-import-not-at-top

  exp = loop.Experiment(our_config(batch_size, data_dir, dropout_prng))
  index = {tuple(p): i for i, p in enumerate(exp.data.train)}
  with open(batches_path) as f:
    batches = [
        exp.sharded_batch(np.asarray([index[tuple(p)] for p in b]))
        for b in json.load(f)
    ]
  state = exp.init_state()
  cursor = 0
  print(
      "READY "
      + json.dumps({
          "cpus": len(os.sched_getaffinity(0)),
          "devices": len(jax.devices()),
          "parameters": int(
              sum(
                  np.prod(x.shape)
                  for x in jax.tree_util.tree_leaves(state["params"])
              )
          ),
          "src_shape_BxS": list(batches[0]["src"].shape),
          "tgt_shape_BxT": list(batches[0]["tgt_in"].shape),
          "jax": jax.__version__,
      }),
      flush=True,
  )
  for line in sys.stdin:
    cmd = line.split()
    if not cmd or cmd[0] == "quit":
      break
    times = []
    for _ in range(int(cmd[1])):
      batch = batches[cursor % len(batches)]
      start = time.perf_counter()
      state, metrics = exp.train_step(state, batch, cursor)
      cursor += 1
      jax.block_until_ready((state, metrics))
      times.append(time.perf_counter() - start)
    print("TIMES " + json.dumps(times), flush=True)


# -- The driver. --------------------------------------------------------------


def run_benchmark(
    reference: str,
    reference_python: str,
    threads: int,
    warmup: int,
    rounds: int,
    steps_per_round: int,
    num_batches: int,
    batch_size: int,
    data_dir=None,
    log=print,
    dropout_prng=None,
):
  """Both workers, alternated; the result dictionary."""
  config = our_config(batch_size, data_dir, dropout_prng)
  available = sorted(os.sched_getaffinity(0))
  if not 1 <= threads <= len(available):
    raise ValueError(
        f"--threads={threads}: valid values are 1.."
        f"{len(available)} (the CPUs this process may use)."
    )
  cpus = set(available[:threads])
  scratch = tempfile.mkdtemp(prefix="bench_scan_step_")
  batches_path = os.path.join(scratch, "batches.json")
  with open(batches_path, "w") as f:
    json.dump(draw_batches(config, num_batches), f)
  env = dict(
      os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads)
  )
  scan_file = os.path.join(config.data.data_dir, "scan", "tasks.txt")
  theirs_cmd = [
      reference_python,
      _REF_SCRIPT,
      f"--reference={reference}",
      f"--scratch={scratch}/theirs",
      f"--scan_file={scan_file}",
      "--mode=bench",
      f"--threads={threads}",
      "--seed=0",
      f"--batches={batches_path}",
      f"--authors_flags={AUTHORS_FLAGS} -batch_size {batch_size}",
  ]
  ours_cmd = [
      sys.executable,
      "-m",
      "experiments.bench.scan_step",
      "--worker=ours",
      f"--batches={batches_path}",
      f"--batch_size={batch_size}",
  ]
  if data_dir:
    ours_cmd.append(f"--data_dir={data_dir}")
  ours_cmd.append(f"--dropout_prng={config.train.dropout_prng}")
  log(
      f"[bench.scan_step] starting both workers on cpus {sorted(cpus)}; "
      f"logs in {scratch}"
  )
  workers = {
      "ours": worker.Worker(
          "ours", ours_cmd, cpus, env, os.path.join(scratch, "ours.log")
      ),
      "theirs": worker.Worker(
          "theirs", theirs_cmd, cpus, env, os.path.join(scratch, "theirs.log")
      ),
  }
  try:
    for w in workers.values():
      w.ask(f"run {warmup}", "TIMES")
    times = {"ours": [], "theirs": []}
    per_round = {"ours": [], "theirs": []}
    for r in range(rounds):
      order = ("ours", "theirs") if r % 2 == 0 else ("theirs", "ours")
      for name in order:
        t = workers[name].ask(f"run {steps_per_round}", "TIMES")
        times[name] += t
        per_round[name].append(statistics.median(t))
      log(
          f"[bench.scan_step] round {r}: ours "
          f"{per_round['ours'][-1]:.3f} s, theirs "
          f"{per_round['theirs'][-1]:.3f} s"
      )
  finally:
    for w in workers.values():
      w.close()
  ours, theirs = summarize(times["ours"]), summarize(times["theirs"])
  return {
      "what": (
          "one training step (forward, backward, optimiser update) of "
          "the SCAN length-cutoff-26 relative Universal Transformer, "
          "Csordas et al. 2021 settings, steady state"
      ),
      "reproduction": REPRODUCTION,
      "authors_flags": AUTHORS_FLAGS,
      "reference": {"repository": REPOSITORY, "path": reference},
      "batch_size": batch_size,
      "threads": threads,
      "cpus": sorted(cpus),
      "ours_dropout_prng": config.train.dropout_prng,
      "warmup_steps": warmup,
      "rounds": rounds,
      "steps_per_round": steps_per_round,
      "num_batches": num_batches,
      "workers": {n: w.info for n, w in workers.items()},
      "ours": dict(
          ours, per_round_median_s=per_round["ours"], times_s=times["ours"]
      ),
      "theirs": dict(
          theirs,
          per_round_median_s=per_round["theirs"],
          times_s=times["theirs"],
      ),
      "ours_over_theirs_time": ours["median_s"] / theirs["median_s"],
      "speedup_ours_vs_theirs": theirs["median_s"] / ours["median_s"],
      "load_average": os.getloadavg(),
  }


def main(argv):
  del argv
  if FLAGS.worker:
    if FLAGS.worker != "ours":
      raise app.UsageError(f"--worker={FLAGS.worker!r}: valid value 'ours'.")
    _serve_ours(
        FLAGS.batches, FLAGS.batch_size, FLAGS.data_dir, FLAGS.dropout_prng
    )
    return
  from experiments.compare import reference as reference_lib  # pylint: disable=g-import-not-at-top

  try:
    reference = check_reference(FLAGS.reference)
  except reference_lib.MissingReferenceError as e:
    print(f"Skipping the SCAN step benchmark: {e}", file=sys.stderr)
    sys.exit(2)
  from relational_jax.training import reporting  # pylint: disable=g-import-not-at-top

  result = run_benchmark(
      reference,
      FLAGS.reference_python,
      FLAGS.threads,
      FLAGS.warmup,
      FLAGS.rounds,
      FLAGS.steps_per_round,
      FLAGS.num_batches,
      FLAGS.batch_size,
      FLAGS.data_dir,
      dropout_prng=FLAGS.dropout_prng,
  )
  os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output)), exist_ok=True)
  reporting.write_json(FLAGS.output, result)
  print(
      f"ours {result['ours']['median_s']:.3f} s/step, theirs "
      f"{result['theirs']['median_s']:.3f} s/step, ours/theirs time "
      f"{result['ours_over_theirs_time']:.3f} -> {FLAGS.output}"
  )


def define_flags():
  """The command-line flags (defined only when run as a script, so that
  importing this module beside other absl entry points does not clash)."""
  flags.DEFINE_string("reference", None, "Checkout of the authors' repository.")
  flags.DEFINE_string(
      "reference_python",
      sys.executable,
      "Python of the authors' environment (torch).",
  )
  flags.DEFINE_integer("threads", 2, "CPU cores (and torch threads) per side.")
  flags.DEFINE_integer("warmup", 3, "Untimed steps per side first.")
  flags.DEFINE_integer("rounds", 6, "Alternating timed rounds.")
  flags.DEFINE_integer("steps_per_round", 3, "Timed steps per side per round.")
  flags.DEFINE_integer("num_batches", 8, "Distinct real batches, cycled.")
  flags.DEFINE_integer("batch_size", 256, "Batch size (Csordas: 256).")
  flags.DEFINE_string(
      "data_dir",
      None,
      "Holds scan/tasks.txt (default: the "
      "seq2seq config's data_dir, the shipped official files).",
  )
  flags.DEFINE_string("output", "results/bench_scan_step.json", "JSON output.")
  flags.DEFINE_string(
      "dropout_prng",
      None,
      "Our dropout generator "
      "(threefry | counter_hash; default: the reproduction's).",
  )
  flags.DEFINE_string("worker", "", "Internal: 'ours' runs our side's worker.")
  flags.DEFINE_string("batches", "", "Internal: the batches JSON file.")


if __name__ == "__main__":
  define_flags()
  app.run(main)
