"""Work directories saved by earlier versions: what their records meant then.

`upgrade_saved` rewrites a saved config record (`config.json`) into today's
terms before the resume check compares it with the current config, so a run
saved under an older default still resumes; `upgrade_record` does the same
for a checkpoint's JSON record (the trainer's, `trainer.fit`) as it is
restored.

Records of earlier layouts:

* the graph tasks' own loop (CLUTRR, graph COGS, before the one trainer):
  no step, stream position or losses; the stream position was the step;
* seq2seq's own batch stream (before seq2seq trained on `trainer.EpochStream`
  and `trainer.make_train_step`): the position {seed, epoch, index,
  num_examples, batch_size} of a stream that visited each epoch's
  permutation `default_rng([seed, epoch])` in full batches, dropping the
  short last one. It becomes today's position, the saved step: the resumed
  run continues from the saved state (parameters, optimiser state, step,
  key) with the batch order of the new stream at that step (`EpochStream`:
  epochs of ceil(N / batch) batches, the short last one padded with
  zero-weight rows), which within the first epoch is the old order and
  later is not; its dropout keys follow the new convention
  (fold_in(key, step) of the saved key). So such a run resumes with its
  checkpoints, but not bit for bit as the old code would have continued.

CLRS: `upgrade_clrs` (config paths renamed into the `train` section; the
heads and layer norm that the model sections held, now
`config.processor.nb_heads` / `.use_ln` for every kind),
`CLRS_FLAT_FLAGS` (earlier flag names), and the optimiser-state layout of
CLRS checkpoints saved with dm-clrs's own optimiser (`stock_clrs_optimizer`,
`upgrade_stock_opt_state`, used through `Task.legacy_layouts`).
"""

import copy
import os
from typing import Any, Dict, Mapping, Optional

import jax
import jax.numpy as jnp
import optax

from relational_jax.data import paths as data_paths

# The data directories of earlier versions, beside the repository: the same
# files (pinned by SHA-256, data/paths.py) as the shipped ones.
_OLD_DATA_ROOT = os.path.join("shared", "data")


def _shipped_equivalent(path: str) -> str:
  """The shipped directory an old default data directory held, else `path`."""
  norm = os.path.normpath(path)
  head, sep, tail = norm.rpartition(os.sep + _OLD_DATA_ROOT)
  if not sep or not head:
    return path
  shipped = os.path.join(data_paths.OFFICIAL_DIR, tail.lstrip(os.sep))
  return os.path.normpath(shipped) if os.path.isdir(shipped) else path


def upgrade_saved(saved: Mapping[str, Any]) -> Dict[str, Any]:
  """A copy of a saved config record in today's terms: `data.data_dir` at an
  old default (the `data` directory of the `shared` folder beside the
  repository, or its `cogs` / `clutrr/...` subdirectories) becomes the shipped
  directory holding the same files."""
  out = copy.deepcopy(dict(saved))
  data = out.get("data")
  if isinstance(data, dict) and isinstance(data.get("data_dir"), str):
    data["data_dir"] = _shipped_equivalent(data["data_dir"])
  return out


# The position of seq2seq's former batch stream (its keys, exactly).
_OLD_SEQ2SEQ_STREAM = frozenset(
    ("seed", "epoch", "index", "num_examples", "batch_size")
)


def upgrade_record(meta: Dict, state: Any) -> Dict:
  """A checkpoint's JSON record (`meta`, restored with the training `state`)
  in today's layout: a record of the graph tasks' former loop gains the
  step, stream position, losses and best (from the state's step and the
  history's best validation accuracy); seq2seq's former stream position
  becomes the saved step (the module docstring says what that changes).
  Today's records are returned unchanged."""
  if "stream" not in meta:
    step = int(state["step"])
    scored = [h for h in meta["history"] if "val_accuracy" in h]
    top = max(scored, key=lambda h: h["val_accuracy"], default=None)
    return {
        **meta,
        "step": step,
        "stream": {"step": step},
        "losses": [],
        "best": top and {"step": top["step"], "score": top["val_accuracy"]},
    }
  stream = meta["stream"]
  if isinstance(stream, dict) and set(stream) == _OLD_SEQ2SEQ_STREAM:
    return {**meta, "stream": {"step": int(meta["step"])}}
  return meta


# ---------------------------------------------------------------------------
# CLRS: the names of earlier versions.

# Config paths renamed since earlier versions (old path -> today's): when
# CLRS took the `train` section every task has, and when the model sections'
# heads and layer norm became the one `processor` field of every kind
# (`processors.factory.ARGUMENT_FIELDS`; in a saved record the section the
# run read wins, `upgrade_clrs`). Read by `clrs.config.get_config` and the
# `--config.<old path>` flags (`cli.define_config_flag(renamed=)`).
CLRS_RENAMED_PATHS = {
    "protocol.train_steps": "train.steps",
    "protocol.batch_size": "train.batch_size",
    "protocol.eval_batch_size": "train.eval_batch_size",
    "protocol.eval_every": "train.eval_every",
    "protocol.progress": "train.progress",
    "protocol.tensorboard": "train.tensorboard",
    "model.learning_rate": "train.learning_rate",
    "model.grad_clip_max_norm": "train.clip",
    "rt.num_heads": "processor.nb_heads",
    "et.num_heads": "processor.nb_heads",
    "floyd.num_heads": "processor.nb_heads",
    "rt.use_ln": "processor.use_ln",
}

# Flat flag names of earlier versions (CLRS run.py names) -> config paths; a
# name with several paths sets the one its processor kind reads. (The renamed
# paths' `--config.<old path>` flags: `cli.define_config_flag(renamed=)`.)
CLRS_FLAT_FLAGS = {
    "algorithms": "algorithms",
    "processor_type": "processor_type",
    "seeds": "seeds",
    "hint_mode": "hint_mode",
    "train_lengths": "protocol.train_lengths",
    "test_lengths": "protocol.test_lengths",
    "batch_size": "train.batch_size",
    "eval_batch_size": "train.eval_batch_size",
    "train_steps": "train.steps",
    "eval_every": "train.eval_every",
    "max_eval_samples": "protocol.max_eval_samples",
    "progress": "train.progress",
    "hidden_size": "model.hidden_dim",
    "learning_rate": "train.learning_rate",
    "grad_clip_max_norm": "train.clip",
    "dropout_prob": "model.dropout_prob",
    "hint_teacher_forcing": "model.hint_teacher_forcing",
    "hint_repred_mode": "model.hint_repred_mode",
    "use_lstm": "model.use_lstm",
    "nb_msg_passing_steps": "model.nb_msg_passing_steps",
    "encoder_init": "model.encoder_init",
    "carry_state": "model.carry_state",
    "ptr_from_edges": "model.ptr_from_edges",
    "use_ln": "processor.use_ln",
    "nb_triplet_fts": "processor.nb_triplet_fts",
    "nb_heads": "processor.nb_heads",
    "graph_vec": "processor.graph_vec",
    "node_readout": "processor.node_readout",
    "num_layers": ("rt.num_layers", "et.num_layers", "floyd.num_layers"),
    "head_size": ("rt.head_dim", "et.head_dim", "floyd.head_dim"),
    "node_hidden_size": "rt.node_ffn_dim",
    "edge_hidden_size1": "rt.edge_msg_dim",
    "edge_hidden_size2": "rt.edge_ffn_dim",
    "edge_size": "rt.edge_dim",
    "tied_layers": ("rt.tied", "et.tied"),
    "ablation": "et.ablation",
    "chunk_size": ("rt.chunk_size", "et.chunk_size", "floyd.chunk_size"),
    "triangular_heads": "rt.triangular_heads",
    "results_path": "results_path",
}


def upgrade_clrs(saved: Mapping[str, Any]) -> Dict[str, Any]:
  """A copy of a nested CLRS config record in today's terms.

  The model sections' num_heads and use_ln (held there by earlier
  versions; `processors.factory.ARGUMENT_FIELDS`) leave every section;
  those of the section the run's processor_type read
  (`processors.PROCESSORS[kind].section`) become processor.nb_heads and
  processor.use_ln, over the record's own (the run read the section's). Then
  the other `CLRS_RENAMED_PATHS` move (a record that has both spellings keeps
  today's). Last, the processor fields the run's kind never read
  (`clrs.config.unread_processor_fields`: use_ln for et and floyd, the RT
  kinds' node_readout, nb_triplet_fts for ours, our options and the
  factory arguments they never read for dm-clrs's kinds) take their
  defaults, and so do the fields of the kind's model section that it
  withholds (`ProcessorSpec.withheld`: e.g. edge_msg_dim for
  'rt_no_edge_update'; dropped where today's section lacks them, as floyd's
  zero_padded_pairs): earlier versions saved any value there and ignored
  it, today's refuse one that differs.
  """
  import processors  # pylint: disable=g-import-not-at-top  # (imports dm-clrs)
  from relational_jax.training.clrs import config as clrs_config  # pylint: disable=g-import-not-at-top

  out = copy.deepcopy(dict(saved))
  spec = processors.PROCESSORS.get(out.get("processor_type"))
  for name in processors.factory.sections():
    section = out.get(name)
    if not isinstance(section, dict):
      continue
    for field, argument in processors.factory.ARGUMENT_FIELDS.items():
      if field not in section:
        continue
      value = section.pop(field)
      if spec is not None and name == spec.section:
        out.setdefault("processor", {})[argument] = value
  for old, new in CLRS_RENAMED_PATHS.items():
    old_section, old_name = old.split(".")
    section = out.get(old_section)
    if not isinstance(section, dict) or old_name not in section:
      continue
    value = section.pop(old_name)
    new_section, new_name = new.split(".")
    out.setdefault(new_section, {}).setdefault(new_name, value)
  unread = clrs_config.unread_processor_fields(out.get("processor_type"))
  defaults = clrs_config.default_config()
  for name in set(unread) & set(out.get("processor", {})):
    out["processor"][name] = defaults.processor[name]
  # Model-section fields the kind withholds (never read): their defaults,
  # or gone where today's section has none.
  section = out.get(spec.section) if spec is not None else None
  if isinstance(section, dict):
    for name in set(spec.withheld) & set(section):
      if name in defaults[spec.section]:
        section[name] = defaults[spec.section][name]
      else:
        del section[name]
  return out


def stock_clrs_optimizer(train) -> Optional[optax.GradientTransformation]:
  """The optimiser dm-clrs's `BaselineModel` builds for the settings of
  `train` (Adam at a constant rate, clipped when clip > 0), whose state
  layout CLRS checkpoints of earlier versions hold; None for settings it
  cannot express (a schedule, a warmup, AdamW)."""
  if (
      train.optimizer != "adam"
      or train.schedule != "constant"
      or train.warmup_steps
  ):
    return None
  if train.clip:
    return optax.chain(
        optax.clip_by_global_norm(train.clip),
        optax.scale_by_adam(),
        optax.scale(-train.learning_rate),
    )
  return optax.adam(train.learning_rate)


_OPT_STATES = (optax.ScaleByAdamState, optax.ScaleByScheduleState)


def upgrade_stock_opt_state(old: Any, fresh: Any) -> Any:
  """`fresh` (today's optimiser state, from `init`) holding the Adam moments
  and count of `old` (a `stock_clrs_optimizer` state); a schedule's count
  is Adam's (both count the updates)."""
  is_state = lambda x: isinstance(x, _OPT_STATES)
  adam = [
      x
      for x in jax.tree_util.tree_leaves(old, is_leaf=is_state)
      if isinstance(x, optax.ScaleByAdamState)
  ]
  if len(adam) != 1:
    raise ValueError(f"expected one Adam state in {old!r}.")

  def swap(x):
    if isinstance(x, optax.ScaleByAdamState):
      return adam[0]
    if isinstance(x, optax.ScaleByScheduleState):  # A buffer of its own.
      return x._replace(count=jnp.copy(adam[0].count))
    return x

  return jax.tree_util.tree_map(swap, fresh, is_leaf=is_state)


# ---------------------------------------------------------------------------
# seq2seq: the flat flag names of earlier versions (experiments.seq2seq_train)
# -> config paths, applied in this order (so `decoder_layers` overrides what
# `layers` set; `seq2seq.config.apply_flag_aliases`).

SEQ2SEQ_FLAT_FLAGS = {
    "dataset": "data.dataset",
    "split": "data.split",
    "cutoff": "data.cutoff",
    "data_dir": "data.data_dir",
    "data_path": "data.data_path",
    "scan_official_order": "data.scan_official_order",
    "max_eval_examples": "data.max_eval_examples",
    "model": "model",
    "positions": "transformer.positions",
    "scaling": "transformer.scaling",
    "universal": ("transformer.tied", "edge_transformer.et.tied"),
    "layers": (
        "transformer.num_encoder_layers",
        "transformer.num_decoder_layers",
        "edge_transformer.et.num_layers",
        "edge_transformer.num_decoder_layers",
    ),
    "decoder_layers": (
        "transformer.num_decoder_layers",
        "edge_transformer.num_decoder_layers",
    ),
    # Also the Edge Transformer's edge width: see apply_flag_aliases.
    "d_model": "transformer.d_model",
    "heads": ("transformer.num_heads", "edge_transformer.et.num_heads"),
    "ff": ("transformer.ffn_dim", "edge_transformer.et.ffn_dim"),
    "dropout": ("transformer.dropout_rate", "edge_transformer.et.dropout_rate"),
    "tree_depth": "transformer.tree_depth",
    "tree_order": "transformer.tree_order",
    "lr": "train.learning_rate",
    "schedule": "train.schedule",
    "warmup_steps": "train.warmup_steps",
    "batch": "train.batch_size",
    "eval_batch": "train.eval_batch_size",
    "steps": "train.steps",
    "eval_every": "train.eval_every",
    "checkpoint_every": "train.checkpoint_every",
    "clip": "train.clip",
    "seed": "train.seed",
    "select_on": "train.select_on",
    "devices": "train.devices",
    "stop_at_step": "train.stop_at_step",
    "progress": "train.progress",
    "results_path": "results_path",
}
