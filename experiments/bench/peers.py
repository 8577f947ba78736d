r"""Speed against the peers, measured side by side in one process.

  python -m experiments.bench.peers --rt_reference=/tmp/peers/rt \
      --output=results/bench_peers.json

Entries (all at the RT paper's tuned sizes where they are RT-like, see
`experiments.bench.processors.ENTRIES`): our `rt`; `rt_authors`, the RT
authors' own RT processor (github.com/CameronDiao/relational-transformer,
their CLRS fork, `clrs/_src/processors.py: RT`) plugged into the same CLRS
model as our `rt` through a processor factory; dm-clrs `mpnn` at width 512
and `triplet_gmpnn`; our `et`, `rt_triangular` and `floyd` (FloydNet's
pivotal attention, 3 blocks of 12 x 16); `et_mueller`, the Edge Transformer
processor of Mueller et al. 2024 ("Towards Principled Graph Transformers",
github.com/ksmdnl/clrs, `clrs/_src/processors.py: ET_Processor`) in the
model their nets.py runs it in (see `mueller_et_factory`).

Every entry builds its model with `relational_jax.training.clrs.loop.
build_model` (our CarryModel; with carry_state=False it computes exactly
stock CLRS BaselineModel). `rt` and `rt_authors` share the same surroundings
(carry_state=True: the edge hidden is carried between algorithm steps, as the
authors' own nets.py does; pointers decoded from edges), so their ratio is
the processors' ratio. All models are built and compiled first; then the
timed calls alternate between entries (A B C A B C ... for `rounds` rounds,
the order reversed every other round) so that load from other processes hits
every entry alike. Reported times are medians over rounds.

Timed: a training step (`model.feedback`, batch `batch_size` at n =
`train_length`) and a forward pass (`model.predict`, batch
`eval_batch_size` at n = `eval_length`). Output: examples/s per entry, the
ratios ours / authors' (rt / rt_authors, et / et_mueller), et / mpnn512,
floyd / mpnn512 and floyd / et, and the spread over rounds. With
`--memory`, each entry's compiled training step and forward pass are also
measured by XLA's buffer assignment (`lower(...).compile().
memory_analysis()`: argument, output and temp bytes; temp is the peak
working memory beyond parameters, optimiser state and batch).

The authors' code is never vendored: pass `--rt_reference=DIR`, a checkout of
their repository. Without it `rt_authors` is skipped with a message. Only
their processors.py and base_modules/*.py run: we register a bare package
object `clrs._src.base_modules` whose __path__ points into their checkout (the
installed dm-clrs has no such subpackage), load their processors.py under a
private module name, then drop the registration. Their package __init__
(datasets, TensorFlow) is not run and nothing in the checkout is edited.
Likewise `--et_mueller_reference=DIR`, a checkout of github.com/ksmdnl/clrs,
for `et_mueller`: their processors.py imports only chex, haiku, jax and
numpy, so it is loaded from the checkout under a private module name as it
is.
"""

import importlib.util
import json
import os
import pathlib
import platform
import statistics
import sys
import time
import types
from typing import Callable, Dict, Optional

from absl import app
from absl import flags
from absl import logging
import jax
import jax.numpy as jnp
import numpy as np

from experiments.bench import processors as bench_processors
from experiments.compare import reference as reference_lib
from relational_jax.training.clrs import config as clrs_config
from relational_jax.training.clrs import data as clrs_data
from relational_jax.training.clrs import loop as clrs_loop

RT_URL = "https://github.com/CameronDiao/relational-transformer"
ET_MUELLER_URL = "https://github.com/ksmdnl/clrs"
REPO = pathlib.Path(__file__).resolve().parents[2]

# bench.processors defines algorithm, batch_size, train_length, eval_length,
# train_iters, eval_iters, entries and output; we reuse them with our defaults.
flags.DEFINE_string(
    "rt_reference",
    None,
    f"Checkout of {RT_URL} (their CLRS fork); without it the "
    "'rt_authors' entry is skipped.",
)
flags.DEFINE_string(
    "et_mueller_reference",
    None,
    f"Checkout of {ET_MUELLER_URL} (Mueller et al.'s CLRS fork); without it"
    " the 'et_mueller' entry is skipped.",
)
flags.DEFINE_bool(
    "memory",
    False,
    "Also record XLA's memory analysis of every entry's compiled training"
    " step and forward pass.",
)
flags.DEFINE_integer(
    "rounds",
    3,
    "Timed rounds; each entry is timed once per round, entries alternating.",
)
flags.DEFINE_integer(
    "eval_batch_size",
    8,
    "Batch of the n=eval_length forward pass (examples/s is per example).",
)
flags.DEFINE_integer(
    "eval_rounds", None, "Rounds of the forward pass (default: rounds)."
)
FLAGS = flags.FLAGS
FLAGS.set_default(
    "entries",
    ["rt", "rt_authors", "mpnn512", "triplet_gmpnn", "et", "rt_triangular"],
)
FLAGS.set_default("output", "results/bench_peers.json")
FLAGS.set_default("train_iters", 2)
FLAGS.set_default("eval_iters", 1)

# The RT paper's tuned sizes (Table 2): 3 layers, 12 heads x 16 (node and
# edge width 192), d_nh 32, d_eh1 16, d_eh2 8; graph_vec 'cat' (their default).
RT_SIZES = dict(
    nb_layers=3,
    nb_heads=12,
    vec_size=192,
    node_hid_size=32,
    edge_hid_size_1=16,
    edge_hid_size_2=8,
    graph_vec="cat",
    disable_edge_updates=False,
)

ENTRIES = dict(bench_processors.ENTRIES)
# processor_type 'rt_triangular' with the default config.rt.triangular_heads=0
# builds an RT without triangular attention (the factory's default of
# num_heads is only applied when the option is absent); say it explicitly.
ENTRIES["rt_triangular"] = {
    **ENTRIES["rt_triangular"],
    "rt.triangular_heads": 12,
}
# The authors' RT in the model our rt runs in (same carry / decoder switches).
# (processor_type and the RT sizes of the config are unused: the factory
# replaces the processor; its sizes are RT_SIZES, the same.)
ENTRIES["rt_authors"] = dict(ENTRIES["rt"])
# Mueller et al.'s ET in the model their nets.py runs it in: stock CLRS
# (no carried pair state: the processor gets the node hidden only, its pair
# output goes to the edge decoders; pointers from nodes), width 192.
# (processor_type is unused: the factory replaces the processor.)
ENTRIES["et_mueller"] = bench_processors.ENTRIES["mpnn192"]
# Their run.py defaults (clrs/examples/run.py): 3 layers, 12 heads, width
# 192, norm_first_att=True, node_readout 'diagonal', relu, no dropout.
ET_MUELLER_SIZES = dict(
    nb_heads=12,
    num_layers=3,
    activation="relu",
    dropout=0.0,
    attention_dropout=0.0,
    norm_first=True,
)
ET_MUELLER_READOUT = "diagonal"


# ----------------------------------------------------------------------------
# The authors' RT as a CLRS processor.
# ----------------------------------------------------------------------------


def import_authors_processors(reference: str):
  """Their clrs/_src/processors.py as a module (see the module docstring)."""
  root = pathlib.Path(reference).resolve()
  source = root / "clrs" / "_src" / "processors.py"
  if not source.exists():
    raise SystemExit(
        f"{source} not found: is --rt_reference a checkout of {RT_URL}?"
    )
  import clrs._src  # pylint: disable=g-import-not-at-top,unused-import

  key = "clrs._src.base_modules"
  if key in sys.modules:
    raise SystemExit(f"{key} is already imported; cannot load their code.")
  package = types.ModuleType(key)
  package.__path__ = [str(root / "clrs" / "_src" / "base_modules")]
  sys.modules[key] = package
  try:
    spec = importlib.util.spec_from_file_location(
        "rt_authors_processors", source
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
  finally:  # their modules stay alive through `module`; unregister the names
    for name in [n for n in sys.modules if n == key or n.startswith(key + ".")]:
      del sys.modules[name]
  return module


def authors_rt_factory(reference: str, **sizes) -> Callable:
  """A CLRS processor factory `out_size -> Processor` running their RT.

  Their RT takes the carried edge and graph hiddens as `e_hidden` / `g_hidden`
  and returns (nodes, edges, graph). The adapter speaks both contracts of our
  model: CarryNet's (`edge_hidden`, `graph_hidden`, `return_state=True` ->
  ProcessorState) and stock CLRS's (-> (nodes, edges), hiddens as zeros).
  """
  from clrs._src import processors as clrs_processors  # pylint: disable=g-import-not-at-top
  from processors.relational_transformer import ProcessorState  # pylint: disable=g-import-not-at-top

  theirs = import_authors_processors(reference)
  sizes = {**RT_SIZES, **sizes}

  class AuthorsRT(clrs_processors.Processor):
    carries_state = True

    def __init__(self, out_size: int, name: str = "rt_authors"):
      super().__init__(name=name)
      if out_size != sizes["vec_size"]:
        raise ValueError(
            f"their RT outputs width vec_size={sizes['vec_size']};"
            f" the CLRS hidden width is {out_size}."
        )
      self.out_size = out_size

    def __call__(
        self,
        node_fts,
        edge_fts,
        graph_fts,
        adj_mat,
        hidden,
        edge_hidden=None,
        graph_hidden=None,
        return_state=False,
        **unused_kwargs,
    ):
      b, n, _ = node_fts.shape
      width = sizes["vec_size"]
      if edge_hidden is None:
        edge_hidden = jnp.zeros((b, n, n, width), node_fts.dtype)
      if graph_hidden is None:
        graph_hidden = jnp.zeros((b, width), node_fts.dtype)
      nodes, edges, graph = theirs.RT(name="rt", **sizes)(
          node_fts,
          edge_fts,
          graph_fts,
          adj_mat,
          hidden,
          e_hidden=edge_hidden,
          g_hidden=graph_hidden,
      )
      if return_state:
        return ProcessorState(nodes, edges, graph)
      return nodes, edges

  return lambda out_size: AuthorsRT(out_size)


def import_mueller_processors(reference: str):
  """Their clrs/_src/processors.py as a module (it imports only chex,
  haiku, jax and numpy)."""
  source = pathlib.Path(reference).resolve() / "clrs" / "_src" / "processors.py"
  if not source.exists():
    raise SystemExit(
        f"{source} not found: is --et_mueller_reference a checkout of"
        f" {ET_MUELLER_URL}?"
    )
  spec = importlib.util.spec_from_file_location("et_mueller_processors", source)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  if not hasattr(module, "ET_Processor"):
    raise SystemExit(f"{source} has no ET_Processor.")
  return module


def mueller_et_factory(reference: str, spec, **sizes) -> Callable:
  """A CLRS processor factory `out_size -> Processor` running Mueller et
  al.'s `ET_Processor`.

  Their processor takes three keyword arguments their own nets.py passes
  and stock CLRS does not: `repred` (False in training: their dropout is
  applied; the rates are 0 here, so it changes nothing but whether a few
  PRNG keys are split, and False is passed in both passes), `readout`
  (their node readout, run.py's default 'diagonal') and
  `is_graph_fts_avail` (run.py: whether any input or hint of the algorithm
  lives on the graph; False for Bellman-Ford). It returns (nodes, pair
  states); the pair states go to the edge decoders, as in their nets.py.
  """
  from clrs._src import processors as clrs_processors  # pylint: disable=g-import-not-at-top

  theirs = import_mueller_processors(reference)
  sizes = {**ET_MUELLER_SIZES, **sizes}
  has_graph_fts = any(
      "graph" in value
      for value in spec.values()
      if value[0] in ("input", "hint")
  )

  class MuellerET(clrs_processors.Processor):

    def __init__(self, out_size: int, name: str = "et_mueller"):
      super().__init__(name=name)
      self.out_size = out_size

    def __call__(
        self, node_fts, edge_fts, graph_fts, adj_mat, hidden, **unused_kwargs
    ):
      return theirs.ET_Processor(out_size=self.out_size, **sizes)(
          node_fts,
          edge_fts,
          graph_fts,
          adj_mat,
          hidden,
          repred=False,
          readout=ET_MUELLER_READOUT,
          is_graph_fts_avail=has_graph_fts,
      )

  return lambda out_size: MuellerET(out_size)


def _reference_commit(
    reference: str, goldens_key: Optional[str] = "rt"
) -> Optional[str]:
  """The checkout's commit; when it is not a git work tree, the commit of
  the fidelity goldens' snapshot of `goldens_key` (None: no fallback)."""
  commit = reference_lib.commit(reference)
  if commit is not None or goldens_key is None:
    return commit
  readme = REPO / "tests" / "fidelity" / "goldens" / "README.json"
  try:  # the snapshot the fidelity goldens were made from
    commit = json.loads(readme.read_text())["references"][goldens_key]["commit"]
    return (
        f"{commit} (not a git work tree; commit of the fidelity goldens'"
        " snapshot)"
    )
  except (OSError, KeyError, ValueError):
    return None


# ----------------------------------------------------------------------------
# Timing.
# ----------------------------------------------------------------------------


class Entry:
  """One model, built and compiled; `train()` / `evaluate()` time one call."""

  def __init__(
      self, name: str, overrides: dict, factory: Optional[Callable] = None
  ):
    self.name = name
    self.overrides = overrides
    config = clrs_config.get_config(overrides)
    stream = clrs_data.TrainStream(
        FLAGS.algorithm, [FLAGS.train_length], FLAGS.batch_size, seed=0
    )
    self.feedback = next(stream)
    self.model = clrs_loop.build_model(
        config,
        stream.spec,
        self.feedback,
        f"/tmp/bench_peers_{name}",
        processor_factory=factory,
    )
    self.model.init(self.feedback.features, seed=0)
    self.params = int(
        sum(np.size(x) for x in jax.tree_util.tree_leaves(self.model.params))
    )
    test = clrs_data.make_eval_set(
        FLAGS.algorithm,
        "test",
        FLAGS.eval_length,
        FLAGS.eval_batch_size,
        max_samples=FLAGS.eval_batch_size,
    )
    self.eval_batch, _ = next(test.batches())
    self.key = jax.random.PRNGKey(0)
    self.calls = 0
    self.train_s, self.eval_s = [], []

  def compile(self):
    t = time.perf_counter()
    float(self.model.feedback(self.key, self.feedback))
    self.train_compile_s = time.perf_counter() - t
    t = time.perf_counter()
    bench_processors._block(
        self.model.predict(
            self.key,  # pylint: disable=protected-access
            self.eval_batch.features,
        )
    )
    self.eval_compile_s = time.perf_counter() - t

  def train(self):
    t = time.perf_counter()
    for _ in range(FLAGS.train_iters):
      self.calls += 1
      loss = self.model.feedback(
          jax.random.fold_in(self.key, self.calls), self.feedback
      )
    float(loss)
    self.train_s.append((time.perf_counter() - t) / FLAGS.train_iters)

  def evaluate(self):
    t = time.perf_counter()
    for _ in range(FLAGS.eval_iters):
      self.calls += 1
      bench_processors._block(
          self.model.predict(  # pylint: disable=protected-access
              jax.random.fold_in(self.key, self.calls), self.eval_batch.features
          )
      )
    self.eval_s.append((time.perf_counter() - t) / FLAGS.eval_iters)

  def memory(self) -> Dict:
    """XLA's memory analysis of the compiled training step and forward
    pass (compiled again here, not run)."""
    model = self.model
    key = jax.device_put(self.key, model._replicated)  # pylint: disable=protected-access
    train = model.jitted_train_step.lower(
        model.state()["params"],
        key,
        model.shard_feedback(self.feedback),
        model.state()["opt_state"],
        0,
    )
    predict = model.jitted_predict.lower(
        model.state()["params"],
        key,
        model.shard_features(self.eval_batch.features),
        0,
        False,
        False,
    )
    out = {}
    for name, lowered in (("train_step", train), ("eval", predict)):
      stats = lowered.compile().memory_analysis()
      out[name] = {
          "argument_bytes": int(stats.argument_size_in_bytes),
          "output_bytes": int(stats.output_size_in_bytes),
          "alias_bytes": int(stats.alias_size_in_bytes),
          "temp_bytes": int(stats.temp_size_in_bytes),
      }
    return out

  def result(self) -> Dict:
    train_s = statistics.median(self.train_s)
    out = {
        "config": self.overrides,
        "params": self.params,
        "hint_steps_train": int(self.feedback.features.hints[0].data.shape[0]),
        "train_compile_s": self.train_compile_s,
        "train_step_s_rounds": self.train_s,
        "train_step_s": train_s,
        "train_examples_per_s": FLAGS.batch_size / train_s,
        "eval_compile_s": self.eval_compile_s,
    }
    if self.eval_s:
      eval_s = statistics.median(self.eval_s)
      out.update({
          "eval_n": FLAGS.eval_length,
          "eval_batch_size": FLAGS.eval_batch_size,
          "eval_batch_s_rounds": self.eval_s,
          "eval_batch_s": eval_s,
          "eval_examples_per_s": FLAGS.eval_batch_size / eval_s,
      })
    return out


def alternate(entries, method: str, rounds: int):
  """Times `method` of every entry once per round, A B C / C B A / ..."""
  for r in range(rounds):
    order = entries if r % 2 == 0 else entries[::-1]
    for entry in order:
      getattr(entry, method)()
      last = getattr(entry, "train_s" if method == "train" else "eval_s")[-1]
      print(
          f"  round {r} {method:8s} {entry.name:14s} {last:8.3f} s", flush=True
      )


def _ratio(results, a, b, key):
  if a in results and b in results and key in results[a] and key in results[b]:
    return results[a][key] / results[b][key]
  return None


def main(argv):
  del argv
  if not FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)
  names = list(FLAGS.entries)
  unknown = [e for e in names if e not in ENTRIES]
  if unknown:
    raise ValueError(
        f"Unknown entries {unknown}; valid entries are {list(ENTRIES)}."
    )
  factories = {}
  skipped = {}
  if "et_mueller" in names:
    if FLAGS.et_mueller_reference:
      import clrs  # pylint: disable=g-import-not-at-top

      factories["et_mueller"] = mueller_et_factory(
          FLAGS.et_mueller_reference, clrs.SPECS[FLAGS.algorithm]
      )
    else:
      skipped["et_mueller"] = (
          "no --et_mueller_reference: fetch Mueller et al.'s CLRS fork (git"
          f" clone {ET_MUELLER_URL} /tmp/peers/et_mueller) and pass"
          " --et_mueller_reference=/tmp/peers/et_mueller"
      )
      print(f"Skipping et_mueller: {skipped['et_mueller']}", file=sys.stderr)
      names.remove("et_mueller")
  if "rt_authors" in names:
    if FLAGS.rt_reference:
      factories["rt_authors"] = authors_rt_factory(FLAGS.rt_reference)
    else:
      skipped["rt_authors"] = (
          f"no --rt_reference: fetch the RT authors' code (git clone {RT_URL} "
          "/tmp/peers/rt) and pass --rt_reference=/tmp/peers/rt"
      )
      print(f"Skipping rt_authors: {skipped['rt_authors']}", file=sys.stderr)
      names.remove("rt_authors")

  entries = []
  for name in names:
    t = time.perf_counter()
    entry = Entry(name, ENTRIES[name], factories.get(name))
    entry.compile()
    print(
        f"{name:14s} params {entry.params:>9,d}  built+compiled in "
        f"{time.perf_counter() - t:6.1f} s (train {entry.train_compile_s:.1f}"
        f" s, eval {entry.eval_compile_s:.1f} s)",
        flush=True,
    )
    entries.append(entry)
  memory = {}
  if FLAGS.memory:
    for entry in entries:
      memory[entry.name] = entry.memory()
      print(
          f"{entry.name:14s} XLA temp: train step"
          f" {memory[entry.name]['train_step']['temp_bytes'] / 1e6:9.1f} MB,"
          f" eval {memory[entry.name]['eval']['temp_bytes'] / 1e6:9.1f} MB",
          flush=True,
      )
  load_before = os.getloadavg()
  alternate(entries, "train", FLAGS.rounds)
  eval_rounds = FLAGS.rounds if FLAGS.eval_rounds is None else FLAGS.eval_rounds
  alternate(entries, "evaluate", eval_rounds)

  results = {
      "algorithm": FLAGS.algorithm,
      "batch_size": FLAGS.batch_size,
      "train_length": FLAGS.train_length,
      "eval_length": FLAGS.eval_length,
      "eval_batch_size": FLAGS.eval_batch_size,
      "rounds": FLAGS.rounds,
      "eval_rounds": eval_rounds,
      "train_iters": FLAGS.train_iters,
      "eval_iters": FLAGS.eval_iters,
      "timing": (
          "one process; entries alternated per round (order reversed "
          "every other round); medians over rounds"
      ),
      "device": str(jax.devices()[0]),
      "device_kind": jax.devices()[0].device_kind,
      "cpu_count": os.cpu_count(),
      "machine": platform.machine(),
      "load_average_before": load_before,
      "load_average": os.getloadavg(),
      "jax": jax.__version__,
      "entries": {e.name: e.result() for e in entries},
      "skipped": skipped,
  }
  for name, m in memory.items():
    results["entries"][name]["xla_memory"] = m
  if FLAGS.rt_reference:
    results["rt_reference"] = {
        "repository": RT_URL,
        "commit": _reference_commit(FLAGS.rt_reference),
        "sizes": RT_SIZES,
    }
  if "et_mueller" in results["entries"]:
    results["et_mueller_reference"] = {
        "repository": ET_MUELLER_URL,
        "commit": _reference_commit(FLAGS.et_mueller_reference, None),
        "sizes": ET_MUELLER_SIZES,
        "readout": ET_MUELLER_READOUT,
    }
  res = results["entries"]
  results["ratios"] = {
      "rt_over_rt_authors": {
          "train": _ratio(res, "rt", "rt_authors", "train_examples_per_s"),
          "eval": _ratio(res, "rt", "rt_authors", "eval_examples_per_s"),
      },
      "et_over_mpnn512": {
          "train": _ratio(res, "et", "mpnn512", "train_examples_per_s"),
          "eval": _ratio(res, "et", "mpnn512", "eval_examples_per_s"),
      },
      "et_over_et_mueller": {
          "train": _ratio(res, "et", "et_mueller", "train_examples_per_s"),
          "eval": _ratio(res, "et", "et_mueller", "eval_examples_per_s"),
      },
      "floyd_over_mpnn512": {
          "train": _ratio(res, "floyd", "mpnn512", "train_examples_per_s"),
          "eval": _ratio(res, "floyd", "mpnn512", "eval_examples_per_s"),
      },
      "floyd_over_et": {
          "train": _ratio(res, "floyd", "et", "train_examples_per_s"),
          "eval": _ratio(res, "floyd", "et", "eval_examples_per_s"),
      },
      "floyd_over_rt": {
          "train": _ratio(res, "floyd", "rt", "train_examples_per_s"),
          "eval": _ratio(res, "floyd", "rt", "eval_examples_per_s"),
      },
  }
  print()
  for name, r in res.items():
    ev = (
        f"  eval n={r['eval_n']} {r['eval_examples_per_s']:8.2f} ex/s"
        if "eval_examples_per_s" in r
        else ""
    )
    print(
        f"{name:14s} params {r['params']:>9,d}  train "
        f"{r['train_examples_per_s']:8.2f} ex/s{ev}"
    )
  for name, r in results["ratios"].items():
    cells = "  ".join(f"{k} x{v:.2f}" for k, v in r.items() if v is not None)
    if cells:
      print(f"{name:22s} {cells}")
  os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output)), exist_ok=True)
  with open(FLAGS.output, "w") as f:
    json.dump(results, f, indent=1)


if __name__ == "__main__":
  app.run(main)
