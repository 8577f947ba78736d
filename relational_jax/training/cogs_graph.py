"""COGS graph parsing with the Edge Transformer (Bergen et al. 2021,
sec. 4.4, appendix A.3, Table 4).

    results = train_and_evaluate(default_config(), workdir)

Data: the original COGS TSV files in `data.data_dir` (train.tsv, dev.tsv,
test.tsv, gen.tsv), converted to the graph ("seqtag") form of Ontanon et al.
by `relational_jax.data.cogs_graph.convert_file` (identical to the authors'
`*_seqtag.jsonl`). Vocabularies come from the training graphs.

Model (`relational_jax.models.cogs_graph.CogsGraphEdgeTransformer`): eq. 10
sequence input, an Edge Transformer stack, one linear head per label field on
x_ii and a parent pointer (softmax over j of a linear map of x_ji; tokens
without a parent point at themselves).

Loss: the sum of five cross-entropies (parent, role, category, noun_type,
verb_name), each the mean over the real tokens of the batch, as the
authors' `cogs/model.py`. Accuracy: a sentence is correct when the parent
and every label of every token are right (the paper's metric); reported
for every evaluation file in total and per category (the TSV's third
column: `in_distribution`, `primitive`, or a generalisation category of
gen.tsv).

Optimisation: AdamW (PyTorch defaults: weight decay 0.01, eps 1e-8) with a
linear warmup then linear decay to 0 at `train.steps`
(`relational_jax.training.optim`, schedule 'linear'), global-norm clipping. One
jitted step over the data mesh. A training epoch is a seeded permutation of
the training rows (the last batch padded with zero-weight rows), so `step`
alone fixes the batch and resuming from a `RunCheckpoints` checkpoint is
exact. Batches are padded to the longest sentence rounded up to a multiple
of `data.length_multiple` (few shapes, few compilations).

Config sections:
  config.edge_transformer  `ETConfig` fields
  config.head              max_distance, parent_from_column
  config.data              data_dir, train_file, eval_files, val_file,
                           max_train_examples, max_eval_examples,
                           length_multiple
  config.train             learning_rate, weight_decay, warmup_steps, steps,
                           clip, batch_size, eval_batch_size, eval_every,
                           checkpoint_every, keep_every, seed, select_on, devices,
                           progress, stop_at_step, eval_tests (score every
                           evaluation file at every eval_every: learning
                           curves)
  config.results_path      '' = <workdir>/results.json

Defaults: the authors' `cogs/train.py`: 3 layers, d 64, 4 heads, FFN 4d,
dropout 0.1 (also on the triangular attention weights, as their
`EdgeAttention`), their initialisation (`edge_transformer.init='bergen'`:
N(0, 1) token embeddings, Xavier-uniform maps and relative positions,
PyTorch's default biases and output layers), AdamW lr 5e-4, 1000 warmup
steps, linear decay, clip 1.0, batch 100, 200 epochs of the 24,155
training rows as the authors count them (241 full batches per epoch:
48,200 steps; our epochs pad the short last batch, 242 steps, so that is
199.2 of ours), the last model tested on gen.tsv.

Tied layers by default: the paper's "Base" model (sec. 3, "by default we
tie the weights"; Table 6: Base 87.4, untied 86.3). Their released COGS
code does not tie them: its `EdgeTransformerEncoder` applies three
independently initialised clones, and its `share_layers` flag (default
True) is read only by their Lightning hook `on_post_move_to_device`, which
Lightning calls only in its TPU (later also HPU) strategies.
`edge_transformer.tied=False` is the function their code trains (the
`cogs_graph_et` comparison).
"""

import json
import math
import os
from typing import Callable, Dict, List

import jax
import jax.numpy as jnp
import numpy as np
import optax

from relational_jax.data import cogs_graph as data_lib
from relational_jax.data import paths as data_paths
from relational_jax.models.cogs_graph import CogsGraphEdgeTransformer
from relational_jax.models.cogs_graph import HEADS
from relational_jax.models.edge_transformer import ETConfig
from relational_jax.training import config as config_lib
from relational_jax.parallel import distributed
from relational_jax.parallel import mesh as mesh_lib
from relational_jax.training import engine
from relational_jax.training import task as task_lib
from relational_jax.training import optim
from relational_jax.training import reporting
from relational_jax.training import trainer

ConfigDict = config_lib.ConfigDict

DEFAULT_DATA_DIR = data_paths.COGS_DIR
SELECT_ON = trainer.SELECT_ON
TARGETS = ("parent_or_self",) + data_lib.LABEL_FIELDS
# Paths that may differ when a run is resumed. data.data_dir is fixed: the
# training file and the vocabularies are read from it.
RESUMABLE_CHANGES = trainer.RESUMABLE_TRAIN_CHANGES + (
    "data.eval_files",
    "data.val_file",
    "data.max_eval_examples",
    "train.eval_tests",
)


def default_config() -> ConfigDict:
  """The authors' COGS Edge Transformer run (module docstring)."""
  c = ConfigDict()
  et = c.edge_transformer = config_lib.section(ETConfig)
  et.num_layers, et.num_heads, et.head_dim = 3, 4, 16  # d = 64.
  et.tied, et.dropout_rate, et.layout = True, 0.1, "released_code"
  et.attention_dropout_rate = 0.1  # Their EdgeAttention drops `att` too.
  et.init = "bergen"  # Their parameters' distributions (ETConfig.init).
  c.head = ConfigDict(dict(max_distance=16, parent_from_column=True))
  c.data = ConfigDict(
      dict(
          data_dir=DEFAULT_DATA_DIR,
          train_file="train.tsv",
          eval_files=("dev.tsv", "test.tsv", "gen.tsv"),
          val_file="dev.tsv",  # Scored every eval_every steps ('' none).
          max_train_examples=0,  # > 0: the first rows of train_file.
          max_eval_examples=0,  # > 0: a seeded subset of each file.
          length_multiple=8,
      )
  )
  c.train = ConfigDict(
      dict(
          learning_rate=5e-4,
          schedule="linear",  # HuggingFace's, as the authors' COGS code.
          optimizer="adamw",
          weight_decay=0.01,
          warmup_steps=1000,
          warmup="count",
          steps=48_200,
          clip=1.0,
          batch_size=100,
          eval_batch_size=0,
          eval_every=2410,
          checkpoint_every=0,
          keep_every=0,  # > 0: also keep the latest steps that are multiples.
          seed=42,
          select_on="last",
          devices=0,
          progress=True,
          tensorboard=False,  # Also TensorBoard events (metrics.jsonl always).
          stop_at_step=0,
          eval_tests=False,
      )
  )
  c.results_path = ""
  return c


def model_config(config: ConfigDict) -> ETConfig:
  return config_lib.instantiate(ETConfig, config.edge_transformer)


def build_model(config: ConfigDict, vocabs: data_lib.GraphVocabs):
  return CogsGraphEdgeTransformer(
      model_config(config),
      vocab_size=len(vocabs.tokens),
      label_sizes=tuple(len(getattr(vocabs, f)) for f in data_lib.LABEL_FIELDS),
      max_distance=int(config.head.max_distance),
      parent_from_column=bool(config.head.parent_from_column),
  )


def validate(config: ConfigDict) -> None:
  """Raises ValueError naming the bad value."""
  model_config(config)
  t, d = config.train, config.data
  trainer.validate_train_section(t)
  optim.validate(t)
  if config.head.max_distance < 0:
    raise ValueError(
        f"head.max_distance must be >= 0, got {config.head.max_distance}."
    )
  if d.length_multiple < 1:
    raise ValueError(
        f"data.length_multiple must be >= 1, got {d.length_multiple}."
    )
  for name in ("max_train_examples", "max_eval_examples"):
    if d[name] < 0:
      raise ValueError(f"data.{name} must be >= 0 (0: all), got {d[name]}.")
  if t.select_on == "val" and not d.val_file:
    raise ValueError("train.select_on='val' needs data.val_file.")
  if not d.eval_files:
    raise ValueError(
        "data.eval_files is empty: name at least one file to test on (e.g. "
        "('test.tsv', 'gen.tsv'))."
    )
  for name in (
      (d.train_file,)
      + tuple(d.eval_files)
      + ((d.val_file,) if d.val_file else ())
  ):
    path = os.path.join(d.data_dir, name)
    if not os.path.isfile(path):
      raise ValueError(
          f"COGS file {path} not found (data.data_dir={d.data_dir!r})."
      )


results_path = task_lib.results_path


# The training seed (`experiments.reproduce --seeds` sets it per run).
SEED_PATH = "train.seed"


def headline(results: Dict) -> Dict[str, float]:
  """The selected model's sentence accuracy per evaluation file stem."""
  return dict(results["final"]["accuracies"])


# ----------------------------------------------------------------------------
# Data.
# ----------------------------------------------------------------------------


def _subset(graphs: List[Dict], limit: int, salt: int) -> List[Dict]:
  if not limit or len(graphs) <= limit:
    return graphs
  idx = np.sort(
      np.random.default_rng([0, salt]).choice(len(graphs), limit, replace=False)
  )
  return [graphs[int(i)] for i in idx]


def load_data(config: ConfigDict) -> Dict[str, List[Dict]]:
  """{'train': graphs, 'val': graphs (if val_file), <file stem>: graphs}."""
  d = config.data
  train = data_lib.convert_file(os.path.join(d.data_dir, d.train_file))
  if d.max_train_examples:
    train = train[: d.max_train_examples]
  out = {"train": train}
  names = ((("val", d.val_file),) if d.val_file else ()) + tuple(
      (os.path.splitext(os.path.basename(f))[0], f) for f in d.eval_files
  )
  for salt, (key, name) in enumerate(names, start=1):
    out[key] = _subset(
        data_lib.convert_file(os.path.join(d.data_dir, name)),
        int(d.max_eval_examples),
        salt,
    )
  return out


def _padded_length(lengths, multiple: int) -> int:
  return int(math.ceil(max(int(np.max(lengths)), 1) / multiple) * multiple)


def make_batch(
    arrays: Dict[str, np.ndarray], idx: np.ndarray, size: int, multiple: int
) -> Dict[str, np.ndarray]:
  """Rows `idx` of `arrays`, cut to their padded length, plus zero-weight
  copies up to `size` rows (`trainer.pad_indices`)."""
  fill, weights = trainer.pad_indices(idx, size)
  length = _padded_length(arrays["lengths"][fill], multiple)
  batch = {k: arrays[k][fill, :length] for k in ("tokens", "mask") + TARGETS}
  batch["weights"] = weights
  return batch


# ----------------------------------------------------------------------------
# Loss, step, evaluation.
# ----------------------------------------------------------------------------


def token_correct(logits: Dict[str, jax.Array], batch) -> jax.Array:
  """BxN: every head right at the token (True on padding)."""
  ok = jnp.ones(batch["tokens"].shape, bool)
  for head, target in zip(HEADS, TARGETS):
    ok &= jnp.argmax(logits[head], -1) == batch[target]
  return ok | ~batch["mask"]


def _loss(model, params, batch, rng, deterministic):
  logits = model.apply(
      {"params": params},
      batch["tokens"],
      batch["mask"],
      deterministic=deterministic,
      rngs={"dropout": rng},
  )
  w_BxN = batch["mask"] * batch["weights"][:, None]
  total = jnp.maximum(jnp.sum(w_BxN), 1.0)
  loss = 0.0
  for head, target in zip(HEADS, TARGETS):
    ce = optax.softmax_cross_entropy_with_integer_labels(
        logits[head].astype(jnp.float32), batch[target]
    )
    loss += jnp.sum(ce * w_BxN) / total
  sent_B = jnp.all(token_correct(logits, batch), -1)
  acc = jnp.sum(sent_B * batch["weights"]) / jnp.maximum(
      jnp.sum(batch["weights"]), 1.0
  )
  return loss, acc


def make_train_step(model, tx, mesh):
  """`trainer.make_train_step` of the graph-COGS loss (training mode)."""
  return trainer.make_train_step(
      lambda p, batch, rng: _loss(model, p, batch, rng, False), tx, mesh
  )


def make_predict(model, mesh):
  """predict(params, batch) -> B bools: the whole sentence right."""
  rep, bsh = mesh_lib.replicated(mesh), mesh_lib.batch_sharded(mesh)

  def predict(params, batch):
    logits = model.apply(
        {"params": params}, batch["tokens"], batch["mask"], deterministic=True
    )
    return jnp.all(token_correct(logits, batch), -1)

  return jax.jit(predict, in_shardings=(rep, bsh), out_shardings=bsh)


def sentence_accuracy(
    predict, params, graphs, vocabs, batch_size: int, multiple: int, mesh
) -> Dict[str, object]:
  """{'all', 'count', 'per_category', 'count_per_category'} of `graphs`
  (batches sorted by length to limit padding and compilations)."""
  arrays = data_lib.graphs_to_arrays(graphs, vocabs)

  def correct_at(idx):
    batch = make_batch(arrays, idx, batch_size, multiple)
    batch.pop("weights")
    return mesh_lib.to_host(predict(params, mesh_lib.shard_batch(batch, mesh)))

  correct = trainer.map_rows(
      correct_at,
      len(graphs),
      batch_size,
      order=np.argsort(arrays["lengths"], kind="stable"),
  )
  cats = np.asarray([g.get("distribution") or "none" for g in graphs])
  per, counts = {}, {}
  for c in sorted(set(cats.tolist())):
    sel = cats == c
    per[c], counts[c] = float(correct[sel].mean()), int(sel.sum())
  return {
      "all": float(correct.mean()),
      "count": len(graphs),
      "per_category": per,
      "count_per_category": counts,
  }


# ----------------------------------------------------------------------------
# The loop.
# ----------------------------------------------------------------------------


def train_and_evaluate(
    config: ConfigDict,
    workdir: str,
    log: Callable[[str], None] = print,
) -> Dict:
  """Trains (or resumes) the run of `config` in `workdir`; returns and
  writes the results (`results_path`).

  `results['final']['accuracies']` maps every evaluation file stem (dev,
  test, gen) to its sentence accuracy; `results['evaluations'][stem]` adds
  per-category accuracies and counts. With `train.stop_at_step` the run
  stops (checkpointed) there and returns {'stopped_at': step}. The engine
  (`engine.run`) does all but `build`.
  """
  return TASK.train_and_evaluate(config, workdir, log)


def build(config: ConfigDict, mesh, workdir: str, log) -> task_lib.Built:
  """The trainer's task of `config` and its final evaluation (`engine`);
  writes the vocabularies to `<workdir>/vocabs.json`."""
  t_cfg, multiple = config.train, int(config.data.length_multiple)
  eval_batch = t_cfg.eval_batch_size or t_cfg.batch_size
  data = load_data(config)
  vocabs = data_lib.build_graph_vocabs(data["train"])
  if distributed.is_primary():
    reporting.write_json(
        os.path.join(workdir, "vocabs.json"), reporting_vocabs(vocabs)
    )
  train_arrays = data_lib.graphs_to_arrays(data["train"], vocabs)
  num_train = len(data["train"])
  steps_per_epoch = math.ceil(num_train / t_cfg.batch_size)
  log(
      f"COGS graph ET: {num_train} train rows, sets "
      f"{ {k: len(v) for k, v in data.items() if k != 'train'} }; "
      f"{steps_per_epoch} steps/epoch"
  )

  def batch_at(idx):
    return mesh_lib.shard_batch(
        make_batch(train_arrays, idx, t_cfg.batch_size, multiple), mesh
    )

  model = build_model(config, vocabs)
  tx = optim.make_optimizer(t_cfg)
  example = make_batch(train_arrays, np.arange(1), 1, multiple)

  def init(key):
    init_key, rng = jax.random.split(key)
    params = model.init(init_key, example["tokens"], example["mask"])["params"]
    return trainer.train_state(params, tx, rng)

  predict = make_predict(model, mesh)

  def score(params, graphs):
    return sentence_accuracy(
        predict, params, graphs, vocabs, eval_batch, multiple, mesh
    )

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
        name: score(params, graphs)
        for name, graphs in data.items()
        if name not in ("train", "val")
    }
    final_entry = {
        "step": done.step,
        "selected": selected,
        "accuracies": {k: v["all"] for k, v in evaluations.items()},
    }
    if "gen" in evaluations:
      final_entry["gen_per_category"] = evaluations["gen"]["per_category"]
    return {"final": final_entry, "evaluations": evaluations}

  def summary(results):
    return "sentence accuracy: " + ", ".join(
        f"{k} {v:.4f}" for k, v in results["final"]["accuracies"].items()
    )

  return task_lib.Built(
      task=task,
      description="cogs_graph/edge_transformer",
      header={
          "model": "edge_transformer",
          "data": {k: len(v) for k, v in data.items()},
      },
      final=final,
      summary=summary,
  )


def reporting_vocabs(vocabs: data_lib.GraphVocabs) -> Dict:
  """The vocabularies as JSON-ready lists (`GraphVocabs.from_json` reads
  `json.dumps` of this)."""
  return json.loads(vocabs.to_json())


class CogsGraph(task_lib.Task):
  """Graph COGS, task 'cogs_graph' (this module's functions)."""

  RESUMABLE_CHANGES = RESUMABLE_CHANGES
  SEED_PATH = SEED_PATH

  def default_config(self):
    return default_config()

  def validate(self, config):
    validate(config)

  def build(self, config, mesh, workdir, log):
    return build(config, mesh, workdir, log)

  def headline(self, results):
    return headline(results)

  def train_and_evaluate(self, config, workdir, log=print):
    return engine.run(self, config, workdir, log)


TASK = CogsGraph()
