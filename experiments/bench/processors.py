r"""Processor speed benchmark: training examples/s at n=16 and a forward pass at n=64.

  python -m experiments.bench.processors --output=results/bench_processors.json

Each entry builds the CLRS model the experiment would build (our CarryModel
for our kinds, stock BaselineModel for CLRS kinds) on one algorithm, compiles,
then times `train_iters` optimisation steps on a batch of `batch_size` n=16
trajectories and `eval_iters` predictions on a batch at n=64. The first call
of each is excluded (compilation). Ratios are relative to mpnn-512.
"""

import json
import os
import platform
import time

from absl import app
from absl import flags
from absl import logging
import jax
import numpy as np

from relational_jax.training.clrs import config as clrs_config
from relational_jax.training.clrs import data as clrs_data
from relational_jax.training.clrs import loop as clrs_loop

flags.DEFINE_string(
    "algorithm",
    "bellman_ford",
    "CLRS algorithm (RT paper Table 5 uses Bellman-Ford).",
)
flags.DEFINE_integer(
    "batch_size", 32, "Batch size for training and the forward pass."
)
flags.DEFINE_integer("train_length", 16, "Training graph size.")
flags.DEFINE_integer("eval_length", 64, "Forward-pass graph size.")
flags.DEFINE_integer("train_iters", 20, "Timed training steps.")
flags.DEFINE_integer("eval_iters", 3, "Timed forward passes.")
flags.DEFINE_list(
    "entries",
    ["rt", "mpnn512", "mpnn192", "triplet_gmpnn", "rt_triangular", "et"],
    "Which entries of ENTRIES to run.",
)
flags.DEFINE_string(
    "output", "results/bench_processors.json", "JSON output path."
)
FLAGS = flags.FLAGS


# The configurations compared (CLRS config paths, `clrs_config.get_config`):
# RT at the paper's tuned size (Table 2), MPNN at its tuned width 512 and at
# RT's width 192, Triplet-GMPNN (Ibarz et al. 2022), our triangular kinds at
# RT's width (ET: 3 tied layers, 12 heads x 16) and FloydNet at the same
# width (3 untied blocks, 12 heads x 16; the floyd section of the config).
def _pair_model(kind: str, section: str, **fields) -> dict:
  return {
      "processor_type": kind,
      "model.hidden_dim": 192,
      "processor.nb_heads": 12,
      f"{section}.head_dim": 16,
      f"{section}.num_layers": 3,
      "model.carry_state": True,
      "model.ptr_from_edges": True,
      **{f"{section}.{k}": v for k, v in fields.items()},
  }


_RT_SIZES = dict(node_ffn_dim=32)
_RT_EDGE_SIZES = dict(_RT_SIZES, edge_msg_dim=16, edge_ffn_dim=8)


def _stock(kind: str, hidden_dim: int, **fields) -> dict:
  return {
      "processor_type": kind,
      "model.hidden_dim": hidden_dim,
      "model.carry_state": False,
      "model.ptr_from_edges": False,
      **fields,
  }


ENTRIES = {
    "rt": _pair_model("rt", "rt", **_RT_EDGE_SIZES),
    "rt_no_edge_update": _pair_model("rt_no_edge_update", "rt", **_RT_SIZES),
    "rt_triangular": _pair_model("rt_triangular", "rt", **_RT_EDGE_SIZES),
    "et": _pair_model("et", "et"),
    "floyd": _pair_model("floyd", "floyd"),
    "mpnn512": _stock("mpnn", 512),
    "mpnn192": _stock("mpnn", 192),
    "triplet_gmpnn": _stock(
        "triplet_gmpnn", 128, **{"processor.nb_triplet_fts": 8}
    ),
}


def _block(tree):
  jax.tree_util.tree_map(
      lambda x: x.block_until_ready() if hasattr(x, "block_until_ready") else x,
      tree,
  )


def bench_entry(name: str, overrides: dict) -> dict:
  config = clrs_config.get_config(overrides)
  stream = clrs_data.TrainStream(
      FLAGS.algorithm, [FLAGS.train_length], FLAGS.batch_size, seed=0
  )
  feedback = next(stream)
  model = clrs_loop.build_model(
      config, stream.spec, feedback, "/tmp/bench_clrs"
  )
  model.init(feedback.features, seed=0)
  n_params = int(
      sum(np.size(x) for x in jax.tree_util.tree_leaves(model.params))
  )
  key = jax.random.PRNGKey(0)
  t = time.perf_counter()
  float(model.feedback(key, feedback))
  compile_train = time.perf_counter() - t
  t = time.perf_counter()
  for i in range(FLAGS.train_iters):
    loss = model.feedback(jax.random.fold_in(key, i), feedback)
  float(loss)
  train_s = (time.perf_counter() - t) / FLAGS.train_iters

  test = clrs_data.make_eval_set(
      FLAGS.algorithm,
      "test",
      FLAGS.eval_length,
      FLAGS.batch_size,
      max_samples=FLAGS.batch_size,
  )
  batch, _ = next(test.batches())
  t = time.perf_counter()
  _block(model.predict(key, batch.features))
  compile_eval = time.perf_counter() - t
  t = time.perf_counter()
  for i in range(FLAGS.eval_iters):
    _block(model.predict(jax.random.fold_in(key, i), batch.features))
  eval_s = (time.perf_counter() - t) / FLAGS.eval_iters
  return {
      "config": overrides,
      "params": n_params,
      "hint_steps_train": int(feedback.features.hints[0].data.shape[0]),
      "train_step_s": train_s,
      "train_examples_per_s": FLAGS.batch_size / train_s,
      "train_compile_s": compile_train,
      "eval_n": FLAGS.eval_length,
      "eval_batch_s": eval_s,
      "eval_examples_per_s": FLAGS.batch_size / eval_s,
      "eval_compile_s": compile_eval,
  }


def main(argv):
  del argv
  if not FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)
  unknown = [e for e in FLAGS.entries if e not in ENTRIES]
  if unknown:
    raise ValueError(
        f"Unknown entries {unknown}; valid entries are {list(ENTRIES)}."
    )
  results = {
      "algorithm": FLAGS.algorithm,
      "batch_size": FLAGS.batch_size,
      "train_length": FLAGS.train_length,
      "device": str(jax.devices()[0]),
      "device_kind": jax.devices()[0].device_kind,
      "cpu_count": os.cpu_count(),
      "machine": platform.machine(),
      "entries": {},
  }
  for name in FLAGS.entries:
    results["entries"][name] = bench_entry(name, ENTRIES[name])
    r = results["entries"][name]
    print(
        f"{name:18s} params {r['params']:>9,d}  train"
        f" {r['train_examples_per_s']:8.1f} ex/s  eval n={r['eval_n']}"
        f" {r['eval_examples_per_s']:8.1f} ex/s",
        flush=True,
    )
  if "mpnn512" in results["entries"]:
    base = results["entries"]["mpnn512"]
    results["ratios_vs_mpnn512"] = {
        name: {
            "train": r["train_examples_per_s"] / base["train_examples_per_s"],
            "eval": r["eval_examples_per_s"] / base["eval_examples_per_s"],
        }
        for name, r in results["entries"].items()
    }
    for name, r in results["ratios_vs_mpnn512"].items():
      print(
          f"{name:18s} vs mpnn512: train x{r['train']:.2f}  eval"
          f" x{r['eval']:.2f}"
      )
  os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output)), exist_ok=True)
  with open(FLAGS.output, "w") as f:
    json.dump(results, f, indent=1)


if __name__ == "__main__":
  app.run(main)
