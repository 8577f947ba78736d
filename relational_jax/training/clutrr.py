"""CLUTRR training and evaluation (Bergen et al. 2021, sec. 4.1, Figure 3).

    results = train_and_evaluate(default_config(), workdir)

Protocol (the ET authors' `clutrr/train.py`): train on stories of
k = 2, 3 facts (`config.protocol.train_ks`), 80% of the training rows for
training and 20% for validation (`val_fraction`), a fixed number of steps,
then test the last model (`train.select_on='last'`; 'val' tests the
best-validation checkpoint) and report accuracy per k on the official test
file (`data.data_dir`/`data.test_files`, any file in the CLUTRR 1.0 schema)
and on a generated test set
(`relational_jax.data.clutrr_generator.generate_splits`, graphs disjoint from
the generated training graphs at shared k).

Training rows: `protocol.train_source='generated'` draws
`num_train_per_k` rows per k with CLUTRR's own procedure
(`relational_jax.data.clutrr_generator.generate_splits`; the authors
generated 35k k = 2, 3 rows with CLUTRR's code); any other value is a CSV
file name in `data.data_dir` (e.g. 'validation.csv', the 2,020 official
k = 2, 3 rows).

Optimisation: cross-entropy over the 21 classes, Adam, global-norm clipping
(authors: 1.0), learning rate with linear warmup then linear decay to 0 at
`train.steps` ('linear', HuggingFace's `get_linear_schedule_with_warmup` as
the authors) or constant after warmup. One jitted step over the data mesh
(params replicated, batch split over 'data'; `relational_jax.parallel.mesh`).
A training epoch is a seeded permutation of the training rows; its last
batch is padded with zero-weight rows, so every batch has the fixed size and
`step` alone fixes the batch: resuming (`RunCheckpoints`, orbax) is exact.

Config sections:
  config.model             'edge_transformer' | 'rat' | 'rt' | 'floyd'
  config.edge_transformer  `ETConfig` fields (ablations: `ablation`, `tied`)
  config.rat               `RATConfig` fields
  config.rt                `RTConfig` fields
  config.floyd             `FloydConfig` fields (FloydNet's pivotal attention)
  config.head              layers (2: authors' MLP head, 1: linear),
                           rt_readout, rt_node_init (see models.clutrr)
  config.data              data_dir, test_files, max_eval_examples
  config.protocol          train_source, train_ks, num_train_per_k,
                           val_fraction, generated_test_ks,
                           num_generated_test_per_k, generation_seed,
                           holdout_fraction
  config.train             learning_rate, schedule, warmup_steps, steps,
                           clip, batch_size, eval_batch_size, eval_every,
                           eval_tests (score the test sets at every
                           evaluation too: learning curves in `history`),
                           checkpoint_every, keep_every, seed, select_on, devices,
                           progress, stop_at_step
  config.results_path      '' = <workdir>/results.json

Defaults: the authors' CLUTRR Edge Transformer (paper Table 1 and
`clutrr/train.py`): 8 tied layers, d 200, 4 heads, FFN 4d, dropout 0.2, the
released code's layer layout, batch 400, Adam lr 1e-3 with 100 warmup steps
and linear decay, clip 1.0, 50 epochs of 28k rows (35k generated, 80%) =
3,500 steps.
"""

import math
import os
from typing import Callable, Dict, List, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from relational_jax.data import clutrr as data_lib
from relational_jax.data import clutrr_generator
from relational_jax.data import paths as data_paths
from relational_jax.layers.shapes import check_choice
from relational_jax.models import clutrr as models
from relational_jax.models.edge_transformer import ETConfig
from relational_jax.models.floyd import FloydConfig
from relational_jax.models.relational_transformer import RTConfig
from relational_jax.training import config as config_lib
from relational_jax.parallel import mesh as mesh_lib
from relational_jax.training import engine
from relational_jax.training import task as task_lib
from relational_jax.training import optim
from relational_jax.training import reporting
from relational_jax.training import trainer

ConfigDict = config_lib.ConfigDict

DEFAULT_DATA_DIR = data_paths.CLUTRR_K23_DIR

MODEL_CONFIGS = {
    "edge_transformer": ETConfig,
    "rat": models.RATConfig,
    "rt": RTConfig,
    "floyd": FloydConfig,
}
MODELS = tuple(MODEL_CONFIGS)
SCHEDULES = ("linear", "constant")
SELECT_ON = trainer.SELECT_ON
GENERATED = "generated"
# Paths that may differ when a run is resumed; every other path of the
# saved config must match. data.data_dir is fixed: a CSV
# `protocol.train_source` (training and validation rows) is read from it.
RESUMABLE_CHANGES = trainer.RESUMABLE_TRAIN_CHANGES + (
    "data.test_files",
    "data.max_eval_examples",
    "protocol.generated_test_ks",
    "protocol.num_generated_test_per_k",
    "train.eval_tests",
)


# ----------------------------------------------------------------------------
# Config.
# ----------------------------------------------------------------------------


def default_config() -> ConfigDict:
  """The authors' CLUTRR Edge Transformer run (module docstring)."""
  c = ConfigDict()
  c.model = "edge_transformer"
  et = c.edge_transformer = config_lib.section(ETConfig)
  et.num_layers, et.num_heads, et.head_dim = 8, 4, 50  # d = 200.
  et.tied, et.dropout_rate, et.layout = True, 0.2, "released_code"
  et.attention_dropout_rate = 0.2  # Their EdgeAttention drops `att` too.
  et.chunk_size = et.ffn_chunk_size = None  # Graphs of <= 11 nodes.
  r = c.rat = config_lib.section(models.RATConfig)
  r.num_layers, r.num_heads, r.d_model = 8, 8, 320  # Table 1, RAT.
  r.tied, r.dropout_rate = True, 0.2
  t = c.rt = config_lib.section(RTConfig)
  # No published RT setting for CLUTRR: ET's width, depth and tying.
  t.num_layers, t.num_heads, t.head_dim = 8, 4, 50  # Node width 200.
  t.node_ffn_dim, t.edge_msg_dim, t.edge_ffn_dim = 800, 200, 800
  t.tied, t.dropout_rate = True, 0.2
  t.chunk_size = 8
  f = c.floyd = config_lib.section(FloydConfig)
  # No published FloydNet setting for CLUTRR: ET's width (4 heads x 50 =
  # 200), depth (8), FFN (4d), dropout (0.2) and unchunked pivots; FloydConfig
  # has no tying, so the 8 blocks are untied. The block's own options stay
  # FloydConfig's (the authors' block: pre-norm LayerNorm, symmetric mix,
  # ReLU, no biases).
  f.num_layers, f.num_heads, f.head_dim = 8, 4, 50
  f.ffn_expansion_ratio, f.dropout_rate = 4, 0.2
  f.chunk_size = None  # Graphs of <= 11 nodes.
  c.head = ConfigDict(
      dict(layers=2, rt_readout="nodes_and_edge", rt_node_init="zeros")
  )
  c.data = ConfigDict(
      dict(
          data_dir=DEFAULT_DATA_DIR,
          test_files=("test.csv",),
          max_eval_examples=0,
      )
  )  # > 0: a seeded subset.
  c.protocol = ConfigDict(
      dict(
          train_source=GENERATED,  # Or a CSV file name in data.data_dir.
          train_ks=(2, 3),
          num_train_per_k=17_500,  # 35k generated rows (paper sec. 4.1).
          val_fraction=0.2,  # Authors: random 80/20 split.
          # Generated tests at k beyond training: with no holdout a k in
          # both would test on trained story graphs (generate_splits refuses).
          generated_test_ks=tuple(range(4, 11)),
          num_generated_test_per_k=100,  # 0: no generated test set.
          generation_seed=0,
          # Fraction of the k = 2, 3 story graphs kept out of training for the
          # generated test at those k. Authors: none (their CLUTRR data config
          # has no holdout; every graph is trained), so 0.
          holdout_fraction=0.0,
          # The relations of a generated tree's pairs: 'clutrr', CLUTRR's own
          # labels, as the authors' data (all 328 story graphs of the
          # official k = 3 files); 'sound', only relations that hold (312 of
          # them; relational_jax.data.clutrr_generator).
          closure="clutrr",
      )
  )
  c.train = ConfigDict(
      dict(
          learning_rate=1e-3,
          schedule="linear",
          warmup_steps=100,
          warmup="count",  # HuggingFace's convention, as the authors.
          optimizer="adam",
          weight_decay=0.0,
          steps=3500,
          clip=1.0,
          batch_size=400,
          eval_batch_size=0,
          eval_every=350,
          eval_tests=False,
          checkpoint_every=0,
          keep_every=0,  # > 0: also keep the latest steps that are multiples.
          seed=42,
          select_on="last",
          devices=0,
          progress=True,
          tensorboard=False,  # Also TensorBoard events (metrics.jsonl always).
          stop_at_step=0,
      )
  )
  c.results_path = ""
  return c


def model_config(config: ConfigDict):
  """The model config dataclass of `config.model`, from its section."""
  check_choice(config.model, MODELS, "model")
  return config_lib.instantiate(
      MODEL_CONFIGS[config.model], config[config.model]
  )


def build_model(config: ConfigDict):
  """The Flax module of `config.model`."""
  cfg = model_config(config)
  head = config.head.layers
  if config.model == "edge_transformer":
    return models.ClutrrEdgeTransformer(cfg, head_layers=head)
  if config.model == "rat":
    return models.ClutrrRAT(cfg, head_layers=head)
  if config.model == "floyd":
    return models.ClutrrFloyd(cfg, head_layers=head)
  return models.ClutrrRT(
      cfg,
      head_layers=head,
      readout=config.head.rt_readout,
      node_init=config.head.rt_node_init,
  )


def validate(config: ConfigDict) -> None:
  """Raises ValueError naming the bad value (and the valid choices)."""
  model_config(config)
  check_choice(config.head.rt_readout, models.RT_READOUTS, "head.rt_readout")
  check_choice(config.head.rt_node_init, models.NODE_INITS, "head.rt_node_init")
  defaults = default_config()
  config_lib.check_unselected_sections(config, defaults, MODELS, config.model)
  for name in ("rt_readout", "rt_node_init"):
    if config.model != "rt" and config.head[name] != defaults.head[name]:
      raise ValueError(
          f"head.{name}={config.head[name]!r} is read by model 'rt' only, "
          f"not by model={config.model!r}; leave it at its default "
          f"{defaults.head[name]!r}."
      )
  if config.head.layers not in (1, 2):
    raise ValueError(f"head.layers must be 1 or 2, got {config.head.layers}.")
  t, p = config.train, config.protocol
  check_choice(t.schedule, SCHEDULES, "train.schedule")
  check_choice(p.closure, clutrr_generator.CLOSURES, "protocol.closure")
  trainer.validate_train_section(t)
  optim.validate(t)
  if not 0.0 <= p.val_fraction < 1.0:
    raise ValueError(
        f"protocol.val_fraction must be in [0, 1), got {p.val_fraction}."
    )
  if t.select_on == "val" and p.val_fraction == 0.0:
    raise ValueError(
        "train.select_on='val' needs validation rows; protocol.val_fraction"
        "=0.0 gives none."
    )
  if config.data.max_eval_examples < 0:
    raise ValueError(
        "data.max_eval_examples must be >= 0 (0: all), got "
        f"{config.data.max_eval_examples}."
    )
  if not p.train_ks or min(p.train_ks) < 2:
    raise ValueError(
        "protocol.train_ks must be non-empty with every k >= 2, "
        f"got {tuple(p.train_ks)}."
    )
  if p.train_source == GENERATED and p.num_train_per_k < 1:
    raise ValueError(
        f"protocol.num_train_per_k must be >= 1, got {p.num_train_per_k}."
    )
  if p.num_generated_test_per_k < 0:
    raise ValueError(
        "protocol.num_generated_test_per_k must be >= 0, got "
        f"{p.num_generated_test_per_k}."
    )
  if p.num_generated_test_per_k and min(p.generated_test_ks) < 2:
    raise ValueError(
        "every protocol.generated_test_ks must be >= 2, got "
        f"{tuple(p.generated_test_ks)}."
    )
  try:  # Before generating anything (generate_splits checks the same).
    clutrr_generator.check_holdout(
        p.train_ks,
        p.generated_test_ks if p.num_generated_test_per_k else (),
        p.holdout_fraction,
    )
  except ValueError as e:
    raise ValueError(f"protocol: {e}.") from None
  _check_unread_protocol(p, defaults.protocol)
  if p.train_source != GENERATED:
    path = os.path.join(config.data.data_dir, p.train_source)
    if not os.path.isfile(path):
      raise ValueError(
          f"protocol.train_source {p.train_source!r} is neither "
          f"'{GENERATED}' nor a file in data.data_dir ({path} "
          "not found)."
      )
  for name in config.data.test_files:
    path = os.path.join(config.data.data_dir, name)
    if not os.path.isfile(path):
      raise ValueError(f"data.test_files: {path} not found.")


def _check_unread_protocol(p: ConfigDict, defaults: ConfigDict) -> None:
  """Raises ValueError where protocol.num_train_per_k, the size of the
  generated training set, differs from its default while the training rows
  come from a CSV file (it would be silently ignored). The generated test
  set's fields stay settable with num_generated_test_per_k=0, its
  documented off switch."""
  if p.train_source != GENERATED and (
      p.num_train_per_k != defaults.num_train_per_k
  ):
    raise ValueError(
        f"protocol.num_train_per_k={p.num_train_per_k} is never read: "
        f"protocol.train_source={p.train_source!r} reads its rows from the "
        f"CSV file. Leave it at its default {defaults.num_train_per_k}."
    )


def resume_conflicts(saved: dict, config: ConfigDict) -> dict:
  """{path: (saved, now)} of the fields that forbid resuming a run saved
  with config record `saved` under `config`: those outside
  RESUMABLE_CHANGES, ignoring the model sections `config.model` does not
  select."""
  return config_lib.selected_resume_conflicts(
      saved, config, RESUMABLE_CHANGES, MODELS
  )


results_path = task_lib.results_path


# The training seed (`experiments.reproduce --seeds` sets it per run).
SEED_PATH = "train.seed"


def aggregate(results: Sequence[Dict]) -> Dict[str, Dict]:
  """Runs of one config at several training seeds: {evaluation set:
  `mean_over_runs` of its per-k accuracies} for every set all runs scored
  on the same rows (the test sets; the validation rows follow the training
  seed, so they differ and are left out)."""
  out = {}
  for name in results[0]["evaluations"]:
    entries = [r["evaluations"].get(name) for r in results]
    if all(
        e is not None and e["count_per_k"] == entries[0]["count_per_k"]
        for e in entries
    ):
      out[name] = mean_over_runs(entries)
  return out


def headline(results: Dict) -> Dict[str, float]:
  """The selected model's accuracies on the first test set ('k2'.., 'iid',
  'gen', 'all')."""
  return dict(results["final"]["accuracies"])


# ----------------------------------------------------------------------------
# Data.
# ----------------------------------------------------------------------------


def _subset(examples: List, limit: int, seed: int) -> List:
  if limit <= 0 or len(examples) <= limit:
    return list(examples)
  keep = np.sort(np.random.default_rng(seed).permutation(len(examples))[:limit])
  return [examples[int(i)] for i in keep]


def load_data(config: ConfigDict) -> Dict[str, List]:
  """{'train', 'val', <test file stem>..., 'generated'}: lists of
  `ClutrrExample`. Evaluation sets are capped at `data.max_eval_examples`."""
  p, d = config.protocol, config.data
  train_ks = tuple(int(k) for k in p.train_ks)
  gen_test_ks = tuple(int(k) for k in p.generated_test_ks)
  num_test = int(p.num_generated_test_per_k)
  generated_test: List = []
  if p.train_source == GENERATED:
    train_rows, test_rows = clutrr_generator.generate_splits(
        train_ks,
        gen_test_ks if num_test else (),
        int(p.num_train_per_k),
        num_test,
        seed=int(p.generation_seed),
        holdout_fraction=float(p.holdout_fraction),
        closure=p.closure,
    )
    rows = data_lib.examples_from_rows(train_rows, "generated train rows")
    if num_test:
      generated_test = data_lib.examples_from_rows(
          test_rows, "generated test rows"
      )
  else:
    rows = data_lib.load_clutrr(os.path.join(d.data_dir, p.train_source))
    rows = [ex for ex in rows if ex.k in train_ks]
    if not rows:
      raise ValueError(f"{p.train_source} has no rows with k in {train_ks}.")
    if num_test:  # The generated test set only (train part discarded).
      _, test_rows = clutrr_generator.generate_splits(
          train_ks,
          gen_test_ks,
          1,
          num_test,
          seed=int(p.generation_seed),
          holdout_fraction=float(p.holdout_fraction),
          closure=p.closure,
      )
      generated_test = data_lib.examples_from_rows(
          test_rows, "generated test rows"
      )
  order = np.random.default_rng([int(config.train.seed), 7]).permutation(
      len(rows)
  )
  num_val = int(round(p.val_fraction * len(rows)))
  out = {
      "train": [rows[int(i)] for i in order[num_val:]],
      "val": [rows[int(i)] for i in order[:num_val]],
  }
  limit = int(d.max_eval_examples)
  out["val"] = _subset(out["val"], limit, 1)
  for name in d.test_files:
    stem = os.path.splitext(os.path.basename(name))[0]
    out[stem] = _subset(
        data_lib.load_clutrr(os.path.join(d.data_dir, name)), limit, 2
    )
  if generated_test:
    out[GENERATED] = _subset(generated_test, limit, 3)
  return {k: v for k, v in out.items() if v}


def _batch_of(
    arrays: Dict[str, np.ndarray], indices, size: int
) -> Dict[str, np.ndarray]:
  """The model's inputs of rows `indices` of `arrays`, padded to `size`
  rows with zero-weight copies (`trainer.pad_indices`)."""
  padded, weights = trainer.pad_indices(indices, size)
  batch = {k: arrays[k][padded] for k in _INPUTS}
  batch["weights"] = weights
  return batch


_INPUTS = ("edge_labels", "query", "node_mask", "targets")


# ----------------------------------------------------------------------------
# Optimiser, step, evaluation.
# ----------------------------------------------------------------------------


def _loss(model, params, batch, rng, deterministic):
  logits_BxY = model.apply(
      {"params": params},
      batch["edge_labels"],
      batch["query"],
      batch["node_mask"],
      deterministic=deterministic,
      rngs={"dropout": rng},
  ).astype(jnp.float32)
  ce_B = optax.softmax_cross_entropy_with_integer_labels(
      logits_BxY, batch["targets"]
  )
  w_B = batch["weights"]
  total = jnp.maximum(jnp.sum(w_B), 1.0)
  correct_B = jnp.argmax(logits_BxY, -1) == batch["targets"]
  return jnp.sum(ce_B * w_B) / total, jnp.sum(correct_B * w_B) / total


def make_train_step(model, tx, mesh):
  """`trainer.make_train_step` of the CLUTRR loss (training mode, dropout on)."""
  return trainer.make_train_step(
      lambda p, batch, rng: _loss(model, p, batch, rng, False), tx, mesh
  )


def make_predict(model, mesh):
  rep, bsh = mesh_lib.replicated(mesh), mesh_lib.batch_sharded(mesh)

  def predict(params, batch):
    logits = model.apply(
        {"params": params},
        batch["edge_labels"],
        batch["query"],
        batch["node_mask"],
        deterministic=True,
    )
    return jnp.argmax(logits, -1)

  return jax.jit(predict, in_shardings=(rep, bsh), out_shardings=bsh)


def accuracy_by_k(
    predict, params, examples, batch_size: int, mesh
) -> Dict[str, object]:
  """{'all', 'per_k': {k: acc}, 'count_per_k': {k: n}} of `examples`
  (batches of `batch_size`, padded; graphs padded to the set's largest)."""
  arrays = data_lib.to_arrays(examples)
  preds = trainer.map_rows(
      lambda idx: mesh_lib.to_host(
          predict(
              params,
              mesh_lib.shard_batch(_batch_of(arrays, idx, batch_size), mesh),
          )
      ),
      len(examples),
      batch_size,
  )
  correct = preds == arrays["targets"]
  per_k, counts = {}, {}
  for k in sorted(set(arrays["k"].tolist())):
    sel = arrays["k"] == k
    per_k[str(k)] = float(correct[sel].mean())
    counts[str(k)] = int(sel.sum())
  return {"all": float(correct.mean()), "per_k": per_k, "count_per_k": counts}


def mean_over_runs(entries: Sequence[Dict]) -> Dict[str, object]:
  """Per-k mean of `accuracy_by_k` entries of runs on the same test set
  (e.g. training seeds; Table 5 reports means over runs): {'all', 'per_k',
  'std_per_k' (sample standard deviation, 0 for one run), 'count_per_k',
  'runs'}."""
  if not entries:
    raise ValueError("mean_over_runs: no entries given")
  counts = entries[0]["count_per_k"]
  for i, entry in enumerate(entries[1:], 1):
    if entry["count_per_k"] != counts:
      raise ValueError(
          f"mean_over_runs: entry {i} has rows per k {entry['count_per_k']},"
          f" entry 0 has {counts}: not the same test set"
      )
  per_k, std_per_k = {}, {}
  for k in counts:
    values = np.array([entry["per_k"][k] for entry in entries])
    per_k[k] = float(values.mean())
    std_per_k[k] = float(values.std(ddof=1)) if len(values) > 1 else 0.0
  return {
      "all": float(np.mean([entry["all"] for entry in entries])),
      "per_k": per_k,
      "std_per_k": std_per_k,
      "count_per_k": dict(counts),
      "runs": len(entries),
  }


def headline_accuracies(entry: Dict, train_ks: Sequence[int]) -> Dict:
  """{'k2'.., 'iid' (k in train_ks), 'gen' (other k), 'all'} of one set."""
  out = {f"k{k}": v for k, v in entry["per_k"].items()}
  for name, inside in (("iid", True), ("gen", False)):
    ks = [k for k in entry["per_k"] if (int(k) in train_ks) == inside]
    total = sum(entry["count_per_k"][k] for k in ks)
    if total:
      out[name] = (
          sum(entry["per_k"][k] * entry["count_per_k"][k] for k in ks) / total
      )
  out["all"] = entry["all"]
  return out


# ----------------------------------------------------------------------------
# The loop.
# ----------------------------------------------------------------------------


def train_and_evaluate(
    config: ConfigDict,
    workdir: str,
    log: Callable[[str], None] = print,
) -> Dict:
  """Trains (or resumes) the run of `config` in `workdir`; returns and
  writes the results (`results_path`): per-k accuracy on every test set.

  `results['final']['accuracies']` holds the first test file's per-k
  accuracies ('k2'..), 'iid' (k in train_ks), 'gen' (k outside) and 'all'.
  With `train.stop_at_step` the run stops (checkpointed) there and returns
  {'stopped_at': step}; rerun to resume. The engine (`engine.run`) does all
  but `build`.
  """
  return TASK.train_and_evaluate(config, workdir, log)


def build(config: ConfigDict, mesh, workdir: str, log) -> task_lib.Built:
  """The trainer's task of `config` and its final evaluation (`engine`)."""
  del workdir  # Nothing of CLUTRR's own is written there.
  t_cfg = config.train
  eval_batch = t_cfg.eval_batch_size or t_cfg.batch_size
  data = load_data(config)
  train_ks = tuple(int(k) for k in config.protocol.train_ks)
  train_arrays = data_lib.to_arrays(
      data["train"], max(ex.num_nodes for ex in data["train"])
  )
  num_train = len(data["train"])
  steps_per_epoch = math.ceil(num_train / t_cfg.batch_size)
  log(
      f"CLUTRR {config.model}: {num_train} train rows, "
      f"{len(data.get('val', []))} val, sets "
      f"{[k for k in data if k != 'train']}; {steps_per_epoch} steps/epoch"
  )

  def batch_at(idx):
    return mesh_lib.shard_batch(
        _batch_of(train_arrays, idx, t_cfg.batch_size), mesh
    )

  model = build_model(config)
  tx = optim.make_optimizer(t_cfg)
  init = _state_init(model, tx, {k: v[:1] for k, v in train_arrays.items()})
  predict = make_predict(model, mesh)

  def score(params, examples):
    return accuracy_by_k(predict, params, examples, eval_batch, mesh)

  task = engine.held_out_task(
      init=init,
      train_step=make_train_step(model, tx, mesh),
      batch_at=batch_at,
      score=score,
      data=data,
      train=t_cfg,
      mesh=mesh,
  )

  def final(params, done, selected) -> Dict:
    evaluations = {
        name: score(params, examples)
        for name, examples in data.items()
        if name != "train"
    }
    primary = next(
        (
            os.path.splitext(os.path.basename(f))[0]
            for f in config.data.test_files
        ),
        None,
    )
    primary = (
        primary
        if primary in evaluations
        else (GENERATED if GENERATED in evaluations else None)
    )
    return {
        "final": {
            "step": done.step,
            "selected": selected,
            "test_set": primary,
            "accuracies": (
                headline_accuracies(evaluations[primary], train_ks)
                if primary
                else {}
            ),
        },
        "evaluations": evaluations,
    }

  def plot(results, path):
    plot_accuracy_by_k(
        [
            (f"{config.model} ({name})", e)
            for name, e in results["evaluations"].items()
            if name != "val"
        ],
        os.path.splitext(path)[0] + "_accuracy_by_k.png",  # Beside it.
        title=f"CLUTRR, trained on k={','.join(map(str, train_ks))}",
    )

  def summary(results):
    return "test accuracy by k: " + ", ".join(
        f"{k} {v:.3f}" for k, v in results["final"]["accuracies"].items()
    )

  return task_lib.Built(
      task=task,
      description=f"clutrr/{config.model}",
      header={
          "model": config.model,
          "data": {k: len(v) for k, v in data.items()},
      },
      final=final,
      summary=summary,
      plot=plot,
  )


def plot_accuracy_by_k(
    series,
    path: str,
    title: str = "",
    published: Optional[Dict[str, Dict[str, float]]] = None,
    published_bars: Optional[Dict[str, Dict[str, float]]] = None,
) -> None:
  """Figure 3 style: accuracy vs k, one line per (label, evaluation entry);
  `published` adds {label: {'k6': acc, ...}} lines (fractions), and
  `published_bars` ({label: {'k6': half-width, ...}}, the same keys) bars
  around some of them."""
  lines, bars = [], {}
  for label, entry in series:
    ks = sorted(entry["per_k"], key=int)
    lines.append((label, [int(k) for k in ks], [entry["per_k"][k] for k in ks]))
  for label, values in (published or {}).items():
    ks = sorted(values, key=lambda s: int(s[1:]))
    lines.append((label, [int(k[1:]) for k in ks], [values[k] for k in ks]))
    if label in (published_bars or {}):
      bars[label] = [published_bars[label][k] for k in ks]
  unknown = set(published_bars or {}) - set(published or {})
  if unknown:
    raise ValueError(
        f"published_bars for {sorted(unknown)}: not a published label "
        f"({sorted(published or {})})"
    )
  reporting.plot_curves(
      lines,
      path,
      xlabel="k (facts in the story)",
      ylabel="accuracy",
      title=title,
      error_bars=bars,
  )


def _state_init(model, tx, example: Dict[str, np.ndarray]) -> Callable:
  """key -> the training state of `model` (shapes from `example`, a batch
  of `data_lib.to_arrays` rows)."""

  def init(key):
    init_key, rng = jax.random.split(key)
    params = model.init(
        init_key, example["edge_labels"], example["query"], example["node_mask"]
    )["params"]
    return trainer.train_state(params, tx, rng)

  return init


def load_params(config: ConfigDict, workdir: str, which: str = "latest"):
  """Parameters of the run's newest `which` checkpoint (None if none)."""
  probe = data_lib.to_arrays(
      data_lib.examples_from_rows(clutrr_generator.generate_rows(2, 1, seed=0))
  )
  init = _state_init(
      build_model(config), optim.make_optimizer(config.train), probe
  )
  mesh = mesh_lib.mesh_of_first(config.train.devices)
  restored = trainer.restore(
      trainer.abstract_of(init, mesh), trainer.checkpoint_dir(workdir), which
  )
  return None if restored is None else restored[0]["params"]


class Clutrr(task_lib.Task):
  """CLUTRR, task 'clutrr' (this module's functions)."""

  RESUMABLE_CHANGES = RESUMABLE_CHANGES
  SEED_PATH = SEED_PATH

  def default_config(self):
    return default_config()

  def validate(self, config):
    validate(config)

  def resume_conflicts(self, saved, config):
    return resume_conflicts(saved, config)

  def build(self, config, mesh, workdir, log):
    return build(config, mesh, workdir, log)

  def headline(self, results):
    return headline(results)

  def aggregate(self, results):
    return aggregate(results)

  def train_and_evaluate(self, config, workdir, log=print):
    return engine.run(self, config, workdir, log)


TASK = Clutrr()
