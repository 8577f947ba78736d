"""Train an encoder-decoder on a compositional seq2seq task: `train_and_evaluate`.

Data (no files are copied into the repository):
  scan  generated from the grammar (`relational_jax.data.scan`); splits
        'length_cutoff' (default, with `cutoff`, Csordas et al. 2021),
        'simple', 'length', 'addprim_jump', 'addprim_turn_left'. With
        `scan_official_order` the length-cutoff IID hold-out is drawn from
        the line order of `<data_dir>/scan/tasks.txt`, as Csordas et al. did.
  cogs  `<data_dir>/cogs/{train,dev,test,gen}.tsv` (Kim & Linzen 2020).
  tsv   `<data_path>/{train,dev,test,gen,gen_dev}.tsv`, the COGS layout.

Evaluation sets (exact match of the greedy decoding, EOS included):
  'iid'      IID test set: SCAN length_cutoff 'iid', SCAN simple 'test', TSV
             'test.tsv' (COGS 'test' is in-distribution);
  'gen'      generalisation test set: SCAN 'test' of the other splits,
             TSV 'gen.tsv' (the COGS gen set; absent from ../shared/data);
  'iid_val'  IID validation set: TSV 'dev.tsv' (COGS 'dev' is IID);
  'gen_val'  generalisation validation set: TSV 'gen_dev.tsv'.

Model selection (`select_on`): 'auto' selects on 'gen_val' when the data has
one and otherwise keeps the LAST evaluated step (not the best IID step:
Csordas et al. 2021 sec. 3.2 show that IID accuracy saturates early and
early stopping on it hurts generalisation). So SCAN length_cutoff and COGS
(whose dev set is IID) select the last step by default; `select_on='iid'` or
'iid_val' select on IID accuracy instead, on request.

Training: teacher-forced token cross-entropy averaged over the real (non-PAD)
target tokens of the global batch; Adam + global-norm clipping + a learning
rate schedule (optax); one jitted step over a data mesh (params replicated,
batch split over 'data'; `relational_jax.training.mesh`).

Exact resume: `<workdir>/checkpoints/{latest,best}` (orbax) hold the train
state (params, optimiser state, step, RNG key) and a JSON record with the
batch-stream position (seed, epoch, index: every epoch is a permutation
seeded by (seed, epoch)), the per-step losses, the evaluation history and the
best score. A run stopped at step k and restarted on the same workdir
continues the same batches and RNG stream: its losses and final params equal
those of an uninterrupted run. Vocabularies are saved in
`<workdir>/vocab_{src,tgt}.json`.
"""

import dataclasses
import functools
import json
import math
import os
import time
from typing import Callable, Dict, List, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import tqdm
from jax.experimental import multihost_utils

from relational_jax.data import scan as scan_lib
from relational_jax.data import tsv as tsv_lib
from relational_jax.data.vocab import BOS_ID, EOS_ID, PAD_ID, Vocab
from relational_jax.layers import positions as pos_lib
from relational_jax.layers import tree as tree_lib
from relational_jax.models import et_seq2seq
from relational_jax.models import seq2seq
from relational_jax.training import checkpoints as ckpt_lib
from relational_jax.training import mesh as mesh_lib

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA_DIR = os.path.normpath(os.path.join(REPO_ROOT, "..", "shared",
                                                 "data"))

DATASETS = ("scan", "cogs", "tsv")
DEFAULT_SPLIT = {"scan": "length_cutoff", "cogs": "default", "tsv": "default"}
MODELS = ("transformer", "edge_transformer")
SCHEDULES = ("constant", "cosine", "noam")
SELECT_ON = ("auto", "last", "iid", "iid_val", "gen_val")
EVAL_SETS = ("iid", "gen", "iid_val", "gen_val")
# TSV layout (COGS names): file -> role.
TSV_FILES = {"train.tsv": "train", "test.tsv": "iid", "gen.tsv": "gen",
             "dev.tsv": "iid_val", "gen_dev.tsv": "gen_val"}
# Config fields that must not change when a run is resumed (`steps` may grow;
# with schedule='cosine' that stretches the remaining decay).
RESUME_FIXED = ("dataset", "split", "cutoff", "data_path",
                "scan_official_order", "model", "positions", "scaling",
                "universal", "layers", "decoder_layers", "d_model", "heads",
                "ff", "dropout", "lr", "schedule", "warmup_steps", "batch",
                "clip", "seed", "tree_depth", "tree_order")


class NonFiniteLossError(RuntimeError):
  """Training produced a NaN/Inf loss or gradient norm."""


def _check_choice(value, choices, name):
  if value not in choices:
    raise ValueError(f"unknown {name} {value!r}; valid choices are "
                     f"{list(choices)}.")


@dataclasses.dataclass
class Seq2SeqTrainConfig:
  """Everything a seq2seq run depends on (field names = command-line flags).

  Defaults: the SCAN length-cutoff setting of Csordas et al. 2021 (Table 4):
  relative Universal Transformer, d=128, 8 heads, 3+3 layers, d_ff=256,
  dropout 0.5, Adam lr 1e-3 constant, batch 256, clip 5, 50k steps.
  """
  dataset: str = "scan"
  split: str = ""                  # '' = dataset default (DEFAULT_SPLIT).
  cutoff: int = 26                 # SCAN 'length_cutoff' only.
  data_dir: str = DEFAULT_DATA_DIR
  data_path: str = ""              # 'tsv' only: directory of TSV files.
  scan_official_order: bool = True
  model: str = "transformer"
  positions: str = "relative"
  scaling: str = "ped"
  universal: bool = True
  layers: int = 3                  # Encoder layers (and decoder, see below).
  decoder_layers: int = 0          # 0: same as `layers`.
  d_model: int = 128
  heads: int = 8
  ff: int = 256
  dropout: float = 0.5
  tree_depth: int = 8              # positions='tree' only.
  tree_order: str = "dfs"
  lr: float = 1e-3
  schedule: str = "constant"
  warmup_steps: int = 0            # Linear warmup; noam needs > 0.
  batch: int = 256                 # Global batch (split over devices).
  eval_batch: int = 0              # 0: = batch.
  steps: int = 50000
  eval_every: int = 1000
  checkpoint_every: int = 0        # 0: = eval_every.
  clip: float = 5.0                # Global-norm clipping; 0: off.
  seed: int = 0
  max_eval_examples: int = 0       # > 0: a fixed random subset per set.
  select_on: str = "auto"
  devices: int = 0                 # 0: all devices (jax.devices()).
  progress: bool = True
  results_path: str = ""           # '' : <workdir>/results.json.
  stop_at_step: int = 0            # > 0: stop (checkpointed) at this step,
                                   # as if preempted; rerun to resume.
  nan_at_step: int = 0             # Testing hook: > 0 poisons that step's
                                   # batch so its loss is NaN.

  def resolved_split(self) -> str:
    return self.split or DEFAULT_SPLIT.get(self.dataset, "")

  def validate(self) -> None:
    """Raises ValueError naming the bad value and the valid choices."""
    _check_choice(self.dataset, DATASETS, "dataset")
    split = self.resolved_split()
    if self.dataset == "scan":
      _check_choice(split, scan_lib.SPLITS, "SCAN split")
      if split == "length_cutoff" and not (
          scan_lib.CUTOFF_MIN <= self.cutoff <= scan_lib.CUTOFF_MAX):
        raise ValueError(
            f"invalid SCAN length cutoff {self.cutoff!r}; valid cutoffs are "
            f"{scan_lib.CUTOFF_MIN}..{scan_lib.CUTOFF_MAX}.")
    else:
      _check_choice(split, ("default",), f"{self.dataset} split")
    if self.dataset == "tsv" and not self.data_path:
      raise ValueError("dataset='tsv' needs data_path, a directory with "
                       f"train.tsv and any of {sorted(TSV_FILES)[1:]}.")
    _check_choice(self.model, MODELS, "model")
    _check_choice(self.positions, seq2seq.POSITIONS, "positions")
    if self.model == "edge_transformer":
      if self.positions != "relative":
        raise ValueError(
            f"model='edge_transformer' takes the Edge Transformer's relative "
            f"positions (eq. 10): positions must be 'relative', got "
            f"{self.positions!r}.")
      if self.ff % self.d_model:
        raise ValueError(
            f"model='edge_transformer' has an FFN of width ffn_factor * "
            f"d_model: ff ({self.ff}) must be a multiple of d_model "
            f"({self.d_model}).")
    _check_choice(self.scaling, pos_lib.SCALINGS, "scaling")
    _check_choice(self.tree_order, tree_lib.ORDERS, "tree_order")
    _check_choice(self.schedule, SCHEDULES, "schedule")
    _check_choice(self.select_on, SELECT_ON, "select_on")
    for name in ("layers", "d_model", "heads", "ff", "batch", "steps",
                 "eval_every", "tree_depth"):
      if getattr(self, name) < 1:
        raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}.")
    for name in ("decoder_layers", "eval_batch", "checkpoint_every",
                 "warmup_steps", "max_eval_examples", "devices",
                 "stop_at_step", "nan_at_step"):
      if getattr(self, name) < 0:
        raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}.")
    if self.d_model % self.heads:
      raise ValueError(f"heads ({self.heads}) must divide d_model "
                       f"({self.d_model}).")
    if not 0.0 <= self.dropout < 1.0:
      raise ValueError(f"dropout must be in [0, 1), got {self.dropout}.")
    if not self.lr > 0:
      raise ValueError(f"lr must be > 0, got {self.lr}.")
    if self.clip < 0:
      raise ValueError(f"clip must be >= 0 (0: off), got {self.clip}.")
    if self.schedule == "noam" and self.warmup_steps < 1:
      raise ValueError("schedule='noam' needs warmup_steps >= 1 (e.g. 4000), "
                       f"got {self.warmup_steps}.")


def get_config(**overrides) -> Seq2SeqTrainConfig:
  """The default config with `overrides` (unknown names are a TypeError)."""
  return dataclasses.replace(Seq2SeqTrainConfig(), **overrides)


# ---------------------------------------------------------------------------
# Data.


Pairs = List[Tuple[str, str]]


@dataclasses.dataclass
class Seq2SeqData:
  """Raw (source, target) string pairs of a run."""
  train: Pairs
  evals: Dict[str, Pairs]          # Subset of EVAL_SETS, non-empty sets only.
  description: str
  notes: List[str]


def load_data(config: Seq2SeqTrainConfig) -> Seq2SeqData:
  """Training pairs and evaluation sets of `config` (see module docstring)."""
  split = config.resolved_split()
  notes = []
  if config.dataset == "scan":
    order = None
    if split == "length_cutoff" and config.scan_official_order:
      path = os.path.join(config.data_dir, "scan", "tasks.txt")
      if not os.path.isfile(path):
        raise FileNotFoundError(
            f"scan_official_order=True needs the official SCAN tasks.txt at "
            f"{path} (set data_dir, or scan_official_order=False for the "
            f"sorted order: same sizes, different IID hold-out).")
      order = scan_lib.read_scan_file(path)
      notes.append("IID hold-out drawn from the tasks.txt line order.")
    parts = scan_lib.split(split, config.cutoff, order=order)
    if split == "length_cutoff":
      evals = {"iid": parts["iid"], "gen": parts["test"]}
      description = f"SCAN length_cutoff={config.cutoff}"
    elif split == "simple":
      evals = {"iid": parts["test"]}
      description = "SCAN simple"
    else:
      evals = {"gen": parts["test"]}
      description = f"SCAN {split}"
    train = parts["train"]
  else:
    directory = (os.path.join(config.data_dir, "cogs")
                 if config.dataset == "cogs" else config.data_path)
    if not os.path.isfile(os.path.join(directory, "train.tsv")):
      raise FileNotFoundError(
          f"{config.dataset}: training file {directory}/train.tsv not found.")
    train, evals = None, {}
    for name, role in TSV_FILES.items():
      path = os.path.join(directory, name)
      if not os.path.isfile(path):
        continue
      pairs = tsv_lib.load_tsv(path)
      if role == "train":
        train = pairs
      elif pairs:
        evals[role] = pairs
    if "gen" not in evals:
      notes.append(f"no generalisation set ({directory}/gen.tsv is absent): "
                   "only IID accuracies are reported.")
    description = f"{config.dataset} {directory}"
  evals = {k: v for k, v in evals.items() if v}
  if not train:
    raise ValueError(f"{description}: the training set is empty.")
  if not evals:
    raise ValueError(f"{description}: no evaluation set found.")
  return Seq2SeqData(train, evals, description, notes)


def _subset(pairs: Pairs, limit: int) -> Pairs:
  """A fixed random subset of `limit` pairs (all if limit <= 0)."""
  if limit <= 0 or limit >= len(pairs):
    return list(pairs)
  idx = np.sort(np.random.default_rng(0).choice(len(pairs), limit,
                                                replace=False))
  return [pairs[i] for i in idx]


def target_arities(tgt_vocab: Vocab) -> np.ndarray:
  """Arity of every target vocabulary entry for positions='tree': tokens
  must be annotated 'symbol/arity' (tree.annotate); specials have 0."""
  arities = np.zeros(len(tgt_vocab), np.int32)
  for i, token in enumerate(tgt_vocab.tokens):
    if i < 4:  # PAD, BOS, EOS, UNK.
      continue
    try:
      arities[i] = tree_lib.split_annotation(token)[1]
    except ValueError as e:
      raise ValueError(
          f"positions='tree' needs targets that are trees linearised with "
          f"annotated tokens 'symbol/arity' (tree.annotate, tree.linearize); "
          f"target token {token!r} is not annotated. Use positions "
          f"'absolute' or 'relative' for plain sequences.") from e
  return arities


@dataclasses.dataclass
class EncodedSet:
  """Fixed-shape arrays of one set: src NxS, tgt_in/tgt_out NxT (tgt_out
  ends with EOS, then PAD), optional tree positions NxTxP."""
  src: np.ndarray
  tgt_in: np.ndarray
  tgt_out: np.ndarray
  tree_pos: Optional[np.ndarray] = None

  def __len__(self):
    return self.src.shape[0]


def encode_set(pairs: Pairs, src_vocab: Vocab, tgt_vocab: Vocab, src_len: int,
               tgt_len: int, tree_args: Optional[Dict] = None) -> EncodedSet:
  """Encodes pairs to src (len src_len) and tgt_in/tgt_out (len tgt_len)."""
  src, _ = src_vocab.encode_batch([s for s, _ in pairs], length=src_len)
  full, _ = tgt_vocab.encode_batch([t for _, t in pairs], add_bos=True,
                                   add_eos=True, length=tgt_len + 1)
  tree_pos = None
  if tree_args is not None:
    arities = tree_args["arities"]
    tree_pos = np.stack([
        tree_lib.decoder_positions(
            [int(arities[i]) for i in tgt_vocab.encode(t)],
            tree_args["order"], tree_args["k"], 2, True, length=tgt_len)
        for _, t in pairs]).astype(np.float32)
  return EncodedSet(src, full[:, :-1], full[:, 1:], tree_pos)


class BatchStream:
  """Seeded, resumable stream of training indices.

  Epoch e visits the examples in `default_rng((seed, e)).permutation(N)`
  order, `batch_size` at a time; the incomplete last batch is dropped. The
  position is (epoch, index): `get_state` / `set_state`.
  """

  def __init__(self, num_examples: int, batch_size: int, seed: int):
    if batch_size > num_examples:
      raise ValueError(f"batch size {batch_size} is larger than the training "
                       f"set ({num_examples} examples).")
    self.num_examples, self.batch_size, self.seed = (num_examples, batch_size,
                                                     seed)
    self.epoch, self.index = 0, 0
    self._perm_epoch, self._perm = None, None

  def _permutation(self):
    if self._perm_epoch != self.epoch:
      self._perm = np.random.default_rng(
          [self.seed, self.epoch]).permutation(self.num_examples)
      self._perm_epoch = self.epoch
    return self._perm

  def next_indices(self) -> np.ndarray:
    if self.index + self.batch_size > self.num_examples:
      self.epoch, self.index = self.epoch + 1, 0
    idx = self._permutation()[self.index:self.index + self.batch_size]
    self.index += self.batch_size
    return idx

  def get_state(self) -> Dict[str, int]:
    return {"seed": self.seed, "epoch": self.epoch, "index": self.index,
            "num_examples": self.num_examples,
            "batch_size": self.batch_size}

  def set_state(self, state: Dict[str, int]) -> None:
    for key in ("seed", "num_examples", "batch_size"):
      if state[key] != getattr(self, key):
        raise ValueError(f"cannot resume the batch stream: saved {key}="
                         f"{state[key]}, now {getattr(self, key)}.")
    self.epoch, self.index = int(state["epoch"]), int(state["index"])


# ---------------------------------------------------------------------------
# Model, optimiser, train step.


def make_schedule(lr: float, schedule: str, warmup_steps: int, steps: int):
  """Learning rate as a function of the update count (optax schedule).

  constant  lr after an optional linear warmup;
  cosine    linear warmup, then cosine decay to 0 at `steps`;
  noam      lr * min(s / w, sqrt(w / s)), s = count + 1 (peak lr at s = w).
  """
  _check_choice(schedule, SCHEDULES, "schedule")
  w = warmup_steps
  if schedule == "constant":
    if w == 0:
      return optax.constant_schedule(lr)
    return lambda count: lr * jnp.minimum(1.0, (count + 1.0) / w)
  if schedule == "cosine":
    if w == 0:
      return optax.cosine_decay_schedule(lr, max(steps, 1))
    return optax.warmup_cosine_decay_schedule(0.0, lr, w, max(steps, w + 1),
                                              0.0)
  if w < 1:
    raise ValueError(f"schedule='noam' needs warmup_steps >= 1, got {w}.")
  return lambda count: lr * jnp.minimum((count + 1.0) / w,
                                        jnp.sqrt(w / (count + 1.0)))


def make_optimizer(lr: float, schedule: str, warmup_steps: int, steps: int,
                   clip: float) -> optax.GradientTransformation:
  """Global-norm clipping (if clip > 0) then Adam with the schedule."""
  adam = optax.adam(make_schedule(lr, schedule, warmup_steps, steps))
  if clip > 0:
    return optax.chain(optax.clip_by_global_norm(clip), adam)
  return adam


def loss_and_metrics(model, params, batch, dropout_rng, deterministic=False):
  """Token cross-entropy averaged over the non-PAD targets of the batch
  (`batch['weights']`), and token accuracy."""
  logits_BxTxV = model.apply(
      {"params": params}, batch["src"], batch["src"] != PAD_ID,
      batch["tgt_in"], tgt_tree_pos_BxTxP=batch.get("tgt_tree_pos"),
      deterministic=deterministic, rngs={"dropout": dropout_rng})
  ce_BxT = optax.softmax_cross_entropy_with_integer_labels(
      logits_BxTxV.astype(jnp.float32), batch["tgt_out"])
  w_BxT = batch["weights"]
  total = jnp.maximum(jnp.sum(w_BxT), 1.0)  # NaN weights stay NaN.
  loss = jnp.sum(ce_BxT * w_BxT) / total
  correct_BxT = jnp.argmax(logits_BxTxV, axis=-1) == batch["tgt_out"]
  accuracy = jnp.sum(correct_BxT * w_BxT) / total
  return loss, accuracy


@functools.lru_cache(maxsize=16)
def _compiled_train_step(model, optimizer_args: Tuple, mesh):
  """One jitted, sharded train step per (model, optimiser, mesh); cached so
  that repeated runs in one process reuse the compilation."""
  tx = make_optimizer(*optimizer_args)
  rep, bsh = mesh_lib.replicated(mesh), mesh_lib.batch_sharded(mesh)

  def step(state, batch):
    rng, dropout_rng = jax.random.split(state["rng"])
    grad_fn = jax.value_and_grad(
        lambda p: loss_and_metrics(model, p, batch, dropout_rng), has_aux=True)
    (loss, accuracy), grads = grad_fn(state["params"])
    updates, opt_state = tx.update(grads, state["opt_state"], state["params"])
    new_state = {"params": optax.apply_updates(state["params"], updates),
                 "opt_state": opt_state, "step": state["step"] + 1,
                 "rng": rng}
    metrics = {"loss": loss, "token_accuracy": accuracy,
               "grad_norm": optax.tree.norm(grads)}
    return new_state, metrics

  return jax.jit(step, in_shardings=(rep, bsh), out_shardings=(rep, rep),
                 donate_argnums=0)


def _init_fn(model, tx):
  """init(key, example_batch) -> train state {params, opt_state, step, rng}."""
  def init(key, example):
    init_key, rng = jax.random.split(key)
    params = model.init(
        init_key, example["src"], example["src"] != PAD_ID, example["tgt_in"],
        tgt_tree_pos_BxTxP=example.get("tgt_tree_pos"),
        deterministic=True)["params"]
    return {"params": params, "opt_state": tx.init(params),
            "step": jnp.zeros((), jnp.int32), "rng": rng}
  return init


@functools.lru_cache(maxsize=16)
def _compiled_init(model, optimizer_args: Tuple, mesh):
  return jax.jit(_init_fn(model, make_optimizer(*optimizer_args)),
                 out_shardings=mesh_lib.replicated(mesh))


def build_model(c: Seq2SeqTrainConfig, src_vocab_size: int,
                tgt_vocab_size: int, max_src_len: int, max_tgt_len: int):
  """(model config, unbound model) for `c.model`.

  'transformer': `seq2seq.Seq2SeqTransformer` (positions, scaling,
  universal as configured). 'edge_transformer': the ET encoder-decoder
  (`et_seq2seq.EdgeTransformerSeq2Seq`); `universal` ties its layers (the
  paper's default), `ff` = ffn_factor * d_model, relative positions (eq. 10).
  """
  decoder_layers = c.decoder_layers or c.layers
  if c.model == "edge_transformer":
    config = et_seq2seq.ETSeq2SeqConfig(
        src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size,
        d_model=c.d_model, num_heads=c.heads, ffn_factor=c.ff // c.d_model,
        num_encoder_layers=c.layers, num_decoder_layers=decoder_layers,
        tied=c.universal, dropout_rate=c.dropout, max_src_len=max_src_len,
        max_tgt_len=max_tgt_len, pad_id=PAD_ID)
    return config, et_seq2seq.EdgeTransformerSeq2Seq(config)
  config = seq2seq.Seq2SeqConfig(
      src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size,
      d_model=c.d_model, num_heads=c.heads, d_ff=c.ff,
      num_encoder_layers=c.layers, num_decoder_layers=decoder_layers,
      dropout_rate=c.dropout, positions=c.positions, scaling=c.scaling,
      universal=c.universal, max_src_len=max_src_len, max_tgt_len=max_tgt_len,
      tree_depth=c.tree_depth, tree_order=c.tree_order, pad_id=PAD_ID)
  return config, seq2seq.Seq2SeqTransformer(config)


def count_params(params) -> int:
  return int(sum(np.prod(np.shape(x))
                 for x in jax.tree_util.tree_leaves(params)))


class Experiment:
  """Data, vocabularies, model, optimiser, mesh and jitted step of a config.

  Args:
    config: the run configuration (validated here).
    mesh: a data mesh (default: the first `config.devices` of
      `jax.devices()`, 0 = all).
    vocabs: (src, tgt) vocabularies to use instead of building them from the
      training data (e.g. the ones saved with a run).
  """

  def __init__(self, config: Seq2SeqTrainConfig, mesh=None,
               vocabs: Optional[Tuple[Vocab, Vocab]] = None):
    config.validate()
    self.config = c = config
    if mesh is None:
      devices = jax.devices()
      if c.devices > len(devices):
        raise ValueError(f"devices={c.devices} but only {len(devices)} "
                         f"devices are available.")
      mesh = mesh_lib.make_data_mesh(devices[:c.devices or len(devices)])
    self.mesh = mesh
    self.num_devices = mesh_lib.num_data_shards(mesh)
    mesh_lib.check_divisible(c.batch, self.num_devices, "global batch size")
    self.eval_batch = c.eval_batch or c.batch
    mesh_lib.check_divisible(self.eval_batch, self.num_devices,
                             "evaluation batch size")

    self.data = load_data(c)
    if vocabs is None:
      vocabs = (Vocab.build(s for s, _ in self.data.train),
                Vocab.build(t for _, t in self.data.train))
    self.src_vocab, self.tgt_vocab = vocabs
    self.arities = (target_arities(self.tgt_vocab) if c.positions == "tree"
                    else None)
    tree_args = (None if self.arities is None else
                 {"arities": self.arities, "order": c.tree_order,
                  "k": c.tree_depth})

    eval_pairs = {k: _subset(v, c.max_eval_examples)
                  for k, v in self.data.evals.items()}
    src_len = lambda ps: max(len(s.split()) for s, _ in ps)
    tgt_len = lambda ps: max(len(t.split()) for _, t in ps) + 1  # + EOS.
    self.train_set = encode_set(self.data.train, self.src_vocab,
                                self.tgt_vocab, src_len(self.data.train),
                                tgt_len(self.data.train), tree_args)
    # One source length and one decoding length for every evaluation set:
    # a single compilation of the greedy decoder.
    eval_src_len = max(src_len(p) for p in eval_pairs.values())
    self.decode_len = max(tgt_len(p) for p in eval_pairs.values())
    self.eval_sets = {k: encode_set(p, self.src_vocab, self.tgt_vocab,
                                    eval_src_len, self.decode_len)
                      for k, p in eval_pairs.items()}
    self.model_config, self.model = build_model(
        c, len(self.src_vocab), len(self.tgt_vocab),
        max_src_len=max(self.train_set.src.shape[1], eval_src_len),
        max_tgt_len=max(self.train_set.tgt_in.shape[1], self.decode_len))
    self.optimizer_args = (c.lr, c.schedule, c.warmup_steps, c.steps, c.clip)
    self.tx = make_optimizer(*self.optimizer_args)
    self.train_step = _compiled_train_step(self.model, self.optimizer_args,
                                           self.mesh)

  # -- State. ----------------------------------------------------------------

  def _example(self):
    return self.batch(np.arange(1))

  def init_state(self):
    """A fresh train state, replicated over the mesh."""
    init = _compiled_init(self.model, self.optimizer_args, self.mesh)
    return init(jax.random.PRNGKey(self.config.seed), self._example())

  def abstract_state(self):
    """ShapeDtypeStructs (replicated shardings) of the train state."""
    shapes = jax.eval_shape(_init_fn(self.model, self.tx),
                            jax.random.PRNGKey(self.config.seed),
                            self._example())
    return ckpt_lib.abstract_like(shapes, mesh_lib.replicated(self.mesh))

  def batch_stream(self) -> BatchStream:
    return BatchStream(len(self.train_set), self.config.batch,
                       self.config.seed)

  def batch(self, indices, poison: bool = False) -> Dict[str, np.ndarray]:
    """Host batch of training examples `indices` (weights NaN if poison)."""
    s = self.train_set
    tgt_out = s.tgt_out[indices]
    weights = (tgt_out != PAD_ID).astype(np.float32)
    if poison:
      weights = np.full_like(weights, np.nan)
    out = {"src": s.src[indices], "tgt_in": s.tgt_in[indices],
           "tgt_out": tgt_out, "weights": weights}
    if s.tree_pos is not None:
      out["tgt_tree_pos"] = s.tree_pos[indices]
    return out

  def sharded_batch(self, indices, poison: bool = False):
    return mesh_lib.shard_batch(self.batch(indices, poison), self.mesh)

  # -- Evaluation. -----------------------------------------------------------

  def exact_match(self, params, name: str) -> float:
    """Exact-match accuracy of greedy decoding on evaluation set `name`."""
    s = self.eval_sets[name]
    correct = 0
    for start in range(0, len(s), self.eval_batch):
      idx = np.arange(start, min(start + self.eval_batch, len(s)))
      real = len(idx)
      idx = np.concatenate([idx, np.full(self.eval_batch - real, idx[0])])
      src = mesh_lib.shard_batch(s.src[idx], self.mesh)
      pred = self.model.greedy_decode(
          params, src, self.decode_len, BOS_ID, EOS_ID,
          src_mask_BxS=src != PAD_ID,
          arities=None if self.arities is None else self.arities.tolist())
      if jax.process_count() > 1:  # Gather the other processes' rows.
        pred = multihost_utils.process_allgather(pred, tiled=True)
      pred = np.asarray(pred)[:real]
      correct += int(np.all(pred == s.tgt_out[idx[:real]], axis=1).sum())
    return correct / len(s)

  def evaluate(self, params) -> Dict[str, float]:
    return {name: self.exact_match(params, name) for name in self.eval_sets}

  def selection_set(self) -> Optional[str]:
    """Evaluation set used for model selection (None: the last step)."""
    select = self.config.select_on
    if select == "auto":
      return "gen_val" if "gen_val" in self.eval_sets else None
    if select == "last":
      return None
    if select not in self.eval_sets:
      raise ValueError(f"select_on={select!r} but this data has no {select!r} "
                       f"set; available sets: {sorted(self.eval_sets)}.")
    return select


# ---------------------------------------------------------------------------
# The training loop.


def _save_or_check_vocabs(experiment: Experiment, workdir: str) -> None:
  for name, vocab in (("src", experiment.src_vocab),
                      ("tgt", experiment.tgt_vocab)):
    path = os.path.join(workdir, f"vocab_{name}.json")
    if os.path.exists(path):
      if Vocab.load(path) != vocab:
        raise ValueError(
            f"the {name} vocabulary built from the training data differs from "
            f"the one saved with this run ({path}): the data changed; use a "
            f"new checkpoint_path.")
    else:
      vocab.save(path)


def _check_resumable(config: Seq2SeqTrainConfig, saved: Dict) -> None:
  current = dataclasses.asdict(config)
  changed = [f"{k}: saved {saved.get(k)!r}, now {current[k]!r}"
             for k in RESUME_FIXED if k in saved and saved[k] != current[k]]
  if changed:
    raise ValueError("cannot resume: the configuration changed ("
                     + "; ".join(changed) + "). Use a new checkpoint_path.")


def plot_accuracies(results: Dict, path: str) -> None:
  """PNG of every evaluation set's exact-match accuracy against step."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  labels = {"iid": "IID", "gen": "generalisation", "iid_val": "IID val",
            "gen_val": "generalisation val"}
  history = results["history"]
  fig, ax = plt.subplots(figsize=(6, 4))
  for name in EVAL_SETS:
    points = [(h["step"], h[name]) for h in history if name in h]
    if points:
      ax.plot(*zip(*points), marker=".", label=labels[name])
  c = results["config"]
  ax.set_title(f"{results['data']['description']}: {c['positions']} "
               f"{'universal ' if c['universal'] else ''}{c['model']}")
  ax.set_xlabel("training step")
  ax.set_ylabel("exact-match accuracy")
  ax.set_ylim(-0.02, 1.02)
  ax.grid(alpha=0.3)
  ax.legend()
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def train_and_evaluate(config: Seq2SeqTrainConfig, workdir: str,
                       log: Callable[[str], None] = print) -> Dict:
  """Trains (or resumes) a run in `workdir`; returns and writes the results.

  Writes `<workdir>/checkpoints/{latest,best}`, `<workdir>/vocab_*.json`,
  the results JSON (`config.results_path`, default
  `<workdir>/results.json`) and, beside it, `<stem>_accuracy.png`.

  Raises:
    ValueError: for a bad configuration or data.
    NonFiniteLossError: if a loss or gradient norm is NaN/Inf; the last
      good checkpoint is kept.
  """
  c = config
  experiment = Experiment(c)
  os.makedirs(workdir, exist_ok=True)
  _save_or_check_vocabs(experiment, workdir)
  select = experiment.selection_set()
  ckpts = ckpt_lib.RunCheckpoints(os.path.join(workdir, "checkpoints"))
  stream = experiment.batch_stream()
  restored = ckpts.restore(experiment.abstract_state())
  if restored is None:
    state = experiment.init_state()
    meta = {"step": 0, "stream": stream.get_state(), "losses": [],
            "token_accuracies": [], "history": [], "best": None,
            "wall_time_s": 0.0,
            "config": dataclasses.asdict(c)}
  else:
    state, meta = restored
    _check_resumable(c, meta["config"])
    stream.set_state(meta["stream"])
    meta["config"] = dataclasses.asdict(c)
    log(f"resumed at step {meta['step']} from {ckpts.directory}/latest")
  step = int(meta["step"])
  if int(state["step"]) != step:
    raise ValueError(f"checkpoint inconsistent: state step "
                     f"{int(state['step'])} != recorded step {step}.")
  num_params = count_params(state["params"])
  log(f"{experiment.data.description}: {len(experiment.train_set)} train, "
      + ", ".join(f"{len(v)} {k}" for k, v in experiment.eval_sets.items())
      + f"; {num_params} parameters; {experiment.num_devices} device(s); "
      f"model selection on {select or 'the last step'}")

  checkpoint_every = c.checkpoint_every or c.eval_every
  last_saved = ckpts.latest_step()
  t0 = time.time() - meta["wall_time_s"]
  stop = c.stop_at_step if 0 < c.stop_at_step < c.steps else c.steps
  bar = tqdm.tqdm(total=c.steps, initial=step, disable=not c.progress,
                  desc=f"{c.dataset}/{c.positions}"
                  f"{'/universal' if c.universal else ''}", dynamic_ncols=True)
  try:
    while step < stop:
      indices = stream.next_indices()
      batch = experiment.sharded_batch(indices,
                                       poison=c.nan_at_step == step + 1)
      state, metrics = experiment.train_step(state, batch)
      metrics = jax.device_get(metrics)
      loss, grad_norm = float(metrics["loss"]), float(metrics["grad_norm"])
      if not (math.isfinite(loss) and math.isfinite(grad_norm)):
        kept = (f"the last good checkpoint (step {last_saved}) is kept in "
                f"{ckpts.directory}/latest" if last_saved is not None
                else "no checkpoint had been saved yet")
        raise NonFiniteLossError(
            f"non-finite loss {loss} (gradient norm {grad_norm}) at step "
            f"{step + 1}; training stopped and nothing was saved for this "
            f"step: {kept}.")
      step += 1
      meta["losses"].append(loss)
      meta["token_accuracies"].append(float(metrics["token_accuracy"]))
      bar.update(1)
      is_eval = step % c.eval_every == 0 or step == c.steps
      is_best = False
      if is_eval:
        accuracies = experiment.evaluate(state["params"])
        since = meta["history"][-1]["step"] if meta["history"] else 0
        entry = {"step": step,
                 "loss": float(np.mean(meta["losses"][since:])),
                 "token_accuracy": float(
                     np.mean(meta["token_accuracies"][since:])),
                 **accuracies}
        meta["history"].append(entry)
        score = accuracies[select] if select else None
        is_best = (select is None or meta["best"] is None
                   or score > meta["best"]["score"])
        if is_best:
          meta["best"] = {"step": step, "score": score,
                          "accuracies": accuracies}
        bar.set_postfix(loss=f"{entry['loss']:.3f}",
                        **{k: f"{v:.3f}" for k, v in accuracies.items()})
      if is_eval or step % checkpoint_every == 0 or step == stop:
        meta.update(step=step, stream=stream.get_state(),
                    wall_time_s=time.time() - t0)
        ckpts.save(step, state, meta, best=is_best)
        last_saved = step
  finally:
    bar.close()
    ckpts.close()

  complete = step >= c.steps
  history = meta["history"]
  results = {
      "config": dataclasses.asdict(c),
      "data": {"description": experiment.data.description,
               "train_size": len(experiment.train_set),
               "eval_sizes": {k: len(v)
                              for k, v in experiment.eval_sets.items()},
               "full_eval_sizes": {k: len(v) for k, v in
                                   experiment.data.evals.items()},
               "notes": experiment.data.notes},
      "model_selection": select or "last",
      "num_params": num_params,
      "num_devices": experiment.num_devices,
      "complete": complete,
      "steps": step,
      "final": ({"step": history[-1]["step"],
                 "accuracies": {k: history[-1][k]
                                for k in experiment.eval_sets}}
                if history else None),
      "best": meta["best"],
      "history": history,
      "losses": meta["losses"],
      "wall_time_s": time.time() - t0,
  }
  if not complete:
    log(f"stopped at step {step} of {c.steps} (stop_at_step); rerun on "
        f"{workdir} to resume.")
  results_path = c.results_path or os.path.join(workdir, "results.json")
  os.makedirs(os.path.dirname(os.path.abspath(results_path)), exist_ok=True)
  with open(results_path, "w") as f:
    json.dump(results, f, indent=1)
  if history:
    plot_accuracies(results, os.path.splitext(results_path)[0]
                    + "_accuracy.png")
  return results


def restore_checkpoint(config: Seq2SeqTrainConfig, workdir: str,
                       which: str = "latest"):
  """(state, meta) of a run's newest `which` checkpoint ('latest' or
  'best'), restored with the run's saved vocabularies; None if none."""
  vocabs = tuple(Vocab.load(os.path.join(workdir, f"vocab_{n}.json"))
                 for n in ("src", "tgt"))
  experiment = Experiment(config, vocabs=vocabs)
  with ckpt_lib.RunCheckpoints(os.path.join(workdir, "checkpoints")) as ckpts:
    return ckpts.restore(experiment.abstract_state(), which)
