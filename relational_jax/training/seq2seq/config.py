"""The seq2seq run configuration: one `ConfigDict`, each field written once.

  config.data              what to train and evaluate on (`data.load_data`):
                           dataset, split, cutoff, data_dir, data_path,
                           scan_official_order, max_eval_examples,
                           max_train_examples,
                           source_markers, target_start (data.encode_set),
                           target_format, holdout_val, entity_lexicon
                           (dataset 'tsv': logical forms as trees, a
                           validation set held out of train.tsv, entities
                           anonymised; data.load_data),
                           num_train / num_test (generated sets: for2lam)
  config.model             'transformer' | 'edge_transformer': which of the
                           two model sections builds the model
  config.transformer       `Seq2SeqConfig` fields, handed on unchanged
  config.edge_transformer  `ETSeq2SeqConfig` fields, handed on unchanged (its
                           layer hyperparameters in the nested `et`, an
                           `edge_transformer.ETConfig`: edge width
                           et.num_heads * et.head_dim, et.num_layers
                           encoder layers)
  config.train             learning_rate, schedule, warmup_steps, steps, clip,
                           batch_size, eval_batch_size, eval_every,
                           checkpoint_every, keep_every, seed, select_on, devices,
                           progress, stop_at_step, csordas_batch_size (> 0:
                           every evaluation set also scored as Csordas et
                           al.'s code scores it, `<set>_csordas`)
  config.results_path      '' = <workdir>/results.json

The model sections hold every defaulted field of the model's config
dataclass except the data-derived ones (`DATA_DERIVED`: vocabulary sizes,
maximal lengths, PAD id), which the loop passes to `model_config`.

Defaults: the SCAN length-cutoff setting of Csordas et al. 2021 (Table 4):
relative Universal Transformer, d=128, 8 heads, 3+3 layers, FFN 256,
decoder output tied to its embedding, dropout 0.1 (their appendix B, and
what their code trains: the `trafo_scan` profile's `dropout` 0.5 never
reaches their Transformer), Adam lr 1e-3 constant, batch 256, clip 5, 50k
steps. The Edge
Transformer section has the same sizes (width 128 = 8 heads x 16, tied
layers, FFN 256).
"""

import os
from typing import Optional

from relational_jax.data import for2lam as for2lam_lib
from relational_jax.data import paths as data_paths
from relational_jax.data import scan as scan_lib
from relational_jax.data import semparse as semparse_lib
from relational_jax.layers.shapes import check_choice
from relational_jax.models.et_seq2seq import ETSeq2SeqConfig
from relational_jax.models.seq2seq import Seq2SeqConfig
from relational_jax.training import config as config_lib
from relational_jax.training import engine
from relational_jax.training import optim
from relational_jax.training import task as task_lib
from relational_jax.training import prng
from relational_jax.training import trainer

ConfigDict = config_lib.ConfigDict

DEFAULT_DATA_DIR = data_paths.OFFICIAL_DIR  # scan/, cogs/

DATASETS = ("scan", "cogs", "tsv", "for2lam")
DEFAULT_SPLIT = {
    "scan": "length_cutoff",
    "cogs": "default",
    "tsv": "default",
    "for2lam": "long",
}
# config.model -> the model config dataclass its section instantiates.
MODEL_CONFIGS = {
    "transformer": Seq2SeqConfig,
    "edge_transformer": ETSeq2SeqConfig,
}
MODELS = tuple(MODEL_CONFIGS)
SCHEDULES = ("constant", "cosine", "noam")
# data.source_markers: what the encoder sees around the source tokens;
# data.target_start: the decoder's first input (data.encode_set).
SOURCE_MARKERS = ("none", "eos", "bos_eos")
TARGET_STARTS = ("bos", "eos")
# data.target_format: 'text' (targets are token sequences) or a logical-form
# syntax whose targets are read as trees (`relational_jax.data.semparse`).
TARGET_FORMATS = ("text",) + semparse_lib.FORMATS
SELECT_ON = ("auto", "last", "iid", "iid_val", "gen_val")
# TSV layout (COGS names): file -> evaluation-set role.
TSV_FILES = {
    "train.tsv": "train",
    "test.tsv": "iid",
    "gen.tsv": "gen",
    "dev.tsv": "iid_val",
    "gen_dev.tsv": "gen_val",
}
_EVAL_FILES = [name for name, role in TSV_FILES.items() if role != "train"]


def tsv_directory(d: ConfigDict) -> str:
  """The directory of a TSV dataset's files ('cogs' under data_dir, or
  'tsv''s data_path)."""
  return (
      os.path.join(d.data_dir, "cogs") if d.dataset == "cogs" else d.data_path
  )


def check_data_files(d: ConfigDict) -> None:
  """Raises ValueError naming a file the data section needs that is absent:
  a TSV dataset's train.tsv and at least one evaluation file; SCAN's
  tasks.txt where `scan_official_order` orders the length split by it."""
  if d.dataset in ("cogs", "tsv"):
    directory = tsv_directory(d)
    if not os.path.isfile(os.path.join(directory, "train.tsv")):
      raise ValueError(
          f"{d.dataset}: training file {directory}/train.tsv not found "
          f"(data.{'data_dir' if d.dataset == 'cogs' else 'data_path'})."
      )
    if d.holdout_val and os.path.isfile(os.path.join(directory, "dev.tsv")):
      raise ValueError(
          f"data.holdout_val={d.holdout_val}: {directory}/dev.tsv is the "
          "validation set already; set holdout_val=0."
      )
    if not any(os.path.isfile(os.path.join(directory, f)) for f in _EVAL_FILES):
      raise ValueError(
          f"{d.dataset}: no evaluation file in {directory}: it needs any of "
          f"{_EVAL_FILES}."
      )
  elif (
      d.dataset == "scan"
      and resolved_split(d) == "length_cutoff"
      and d.scan_official_order
  ):
    path = os.path.join(d.data_dir, "scan", "tasks.txt")
    if not os.path.isfile(path):
      raise ValueError(
          "scan_official_order=True needs the official SCAN tasks.txt at "
          f"{path} (set data_dir, or scan_official_order=False for the "
          "sorted order: same sizes, different IID hold-out)."
      )


# Model-config fields that the data fixes (passed by the loop).
DATA_DERIVED = (
    "src_vocab_size",
    "tgt_vocab_size",
    "max_src_len",
    "max_tgt_len",
    "pad_id",
)
# Config paths that may change when a run is resumed (`train.steps` may grow
# under a schedule that does not decay over it: `optim.check_resumed_steps`,
# which the engine runs). Every other
# path of config.data, config.model, the selected model section and
# config.train must stay as saved.
# data.data_dir is fixed too: another directory can hold other data (the
# official SCAN split files, or none).
RESUMABLE_CHANGES = trainer.RESUMABLE_TRAIN_CHANGES + (
    "data.max_eval_examples",
    "train.csordas_batch_size",
)


def default_config() -> ConfigDict:
  """The default run configuration (module docstring)."""
  c = ConfigDict()
  c.data = ConfigDict(
      dict(
          dataset="scan",
          split="",  # '' = the dataset's default split.
          cutoff=26,  # SCAN 'length_cutoff' only (22..40).
          data_dir=DEFAULT_DATA_DIR,  # SCAN tasks.txt, cogs/*.tsv.
          data_path="",  # dataset='tsv': directory of TSV files.
          scan_official_order=True,
          source_markers="bos_eos",  # BOS src EOS, as Csordas et al.'s code;
          target_start="eos",  # their decoder starts from EOS (SOS=EOS).
          max_eval_examples=0,  # > 0: a fixed random subset per set.
          max_train_examples=0,  # > 0: a fixed random subset (smoke runs).
          num_train=100_000,  # for2lam: generated training programs
          num_test=10_000,  # and test programs (Shiv & Quirk 5.1).
          # dataset='tsv': 'text', or the targets' logical-form syntax
          # (TARGET_FORMATS), read as trees: the tree decoder
          # (transformer.positions='tree') trains on their annotated
          # linearisation, a sequence decoder on their tokens; both scored
          # on the logical forms (exact match and tree match,
          # evaluation.logical_form_scores).
          target_format="text",
          # dataset='tsv': > 0 holds out this many rows of train.tsv (a fixed
          # draw, semparse.split_holdout) as the IID validation set
          # 'iid_val' of a directory without dev.tsv.
          holdout_val=0,
          # dataset='tsv' with logical forms: '' or a lexicon of
          # `phrase :- NP : value:type` lines (ATIS: semparse/atis/
          # lexicon.txt) through which entities become typed markers (ci0)
          # in sentence and form, as Dong & Lapata's ATIS
          # (semparse.anonymize); predictions are mapped back and scored
          # against the file's forms.
          entity_lexicon="",
      )
  )
  c.model = "transformer"
  # Csordas et al. 2021, Table 4 (SCAN).
  t = c.transformer = config_lib.section(Seq2SeqConfig, exclude=DATA_DERIVED)
  t.d_model, t.num_heads, t.ffn_dim = 128, 8, 256
  t.num_encoder_layers = t.num_decoder_layers = 3
  t.dropout_rate = 0.1
  t.positions, t.scaling, t.tied = "relative", "ped", True
  t.tie_embeddings = True  # Their `transformer.tied_embedding` default.
  e = c.edge_transformer = config_lib.section(
      ETSeq2SeqConfig, exclude=DATA_DERIVED
  )
  e.et.num_heads, e.et.head_dim, e.et.ffn_dim = 8, 16, 256  # Width 128.
  e.et.num_layers = e.num_decoder_layers = 3
  e.et.dropout_rate = 0.1
  e.et.tied = True
  c.train = ConfigDict(
      dict(
          learning_rate=1e-3,
          schedule="constant",  # One of SCHEDULES.
          warmup_steps=0,  # Linear warmup; noam needs > 0.
          warmup="count_plus_one",  # Csordas et al.'s convention.
          optimizer="adam",
          weight_decay=0.0,
          steps=50000,
          clip=5.0,  # Global-norm clipping; 0: off.
          batch_size=256,  # Global batch (split over devices).
          eval_batch_size=0,  # 0: = batch_size.
          eval_every=1000,
          checkpoint_every=0,  # 0: = eval_every.
          keep_every=0,  # > 0: also keep the latest steps that are multiples.
          seed=0,
          dropout_prng="threefry",  # One of prng.DROPOUT_PRNGS; 'counter_hash'
          # draws the same masks' distribution ~6x
          # cheaper on CPU (training/prng.py).
          select_on="auto",  # One of SELECT_ON.
          devices=0,  # 0: all devices (jax.devices()).
          progress=True,
          tensorboard=False,  # Also TensorBoard events (metrics.jsonl always).
          stop_at_step=0,  # > 0: stop (checkpointed) at this step, as
          # if preempted; rerun to resume.
          csordas_batch_size=0,  # > 0: also `<set>_csordas`, each set
          # scored as Csordas et al.'s code does, in batches of this many
          # rows (evaluation.batch_longest_matches; their test_batch_size,
          # 2048 for SCAN). 0: strict scoring only.
      )
  )
  c.results_path = ""
  return c


def resolved_split(data_config: ConfigDict) -> str:
  return data_config.split or DEFAULT_SPLIT.get(data_config.dataset, "")


def model_config(
    config: ConfigDict,
    src_vocab_size: int = 1,
    tgt_vocab_size: int = 1,
    max_src_len: int = 1,
    max_tgt_len: int = 1,
    pad_id: int = 0,
):
  """The model config dataclass of `config.model`, built from its section
  with the data-derived sizes (placeholders of 1 for validation)."""
  check_choice(config.model, MODELS, "model")
  return config_lib.instantiate(
      MODEL_CONFIGS[config.model],
      config[config.model],
      src_vocab_size=src_vocab_size,
      tgt_vocab_size=tgt_vocab_size,
      max_src_len=max_src_len,
      max_tgt_len=max_tgt_len,
      pad_id=pad_id,
  )


def validate(
    config: ConfigDict, *, data: bool = True, model: bool = True
) -> None:
  """Raises ValueError naming the bad value (and the valid choices).

  `data=False` / `model=False` skip the data and model sections (when the
  caller brings its own data or model)."""
  d, t = config.data, config.train
  if data:
    check_choice(d.dataset, DATASETS, "dataset")
    check_choice(d.source_markers, SOURCE_MARKERS, "data.source_markers")
    check_choice(d.target_start, TARGET_STARTS, "data.target_start")
    if d.source_markers != "none" and (
        model
        and config.model == "transformer"
        and config.transformer.tree_encoder
    ):
      raise ValueError(
          f"data.source_markers={d.source_markers!r} adds BOS/EOS to the "
          "source, which has no tree position: tree_encoder=True needs "
          "data.source_markers='none'."
      )
    split = resolved_split(d)
    if d.dataset == "scan":
      check_choice(split, scan_lib.SPLITS, "SCAN split")
      if split == "length_cutoff" and not (
          scan_lib.CUTOFF_MIN <= d.cutoff <= scan_lib.CUTOFF_MAX
      ):
        raise ValueError(
            f"invalid SCAN length cutoff {d.cutoff!r}; valid cutoffs are "
            f"{scan_lib.CUTOFF_MIN}..{scan_lib.CUTOFF_MAX}."
        )
    elif d.dataset == "for2lam":
      check_choice(split, for2lam_lib.SIZES, "for2lam split")
      for name in ("num_train", "num_test"):
        if d[name] < 1:
          raise ValueError(f"data.{name} must be >= 1, got {d[name]}.")
    else:
      check_choice(split, ("default",), f"{d.dataset} split")
    check_choice(d.target_format, TARGET_FORMATS, "data.target_format")
    if d.entity_lexicon and d.target_format == "text":
      raise ValueError(
          f"data.entity_lexicon={d.entity_lexicon!r} anonymises the entities "
          "of logical forms: it needs data.target_format 'sexpr' or "
          "'prolog', got 'text'."
      )
    if d.entity_lexicon and not os.path.isfile(d.entity_lexicon):
      raise ValueError(f"data.entity_lexicon: no file {d.entity_lexicon!r}.")
    if d.holdout_val < 0:
      raise ValueError(
          f"data.holdout_val must be >= 0 (0: none), got {d.holdout_val}."
      )
    if d.dataset == "tsv" and not d.data_path:
      raise ValueError(
          "dataset='tsv' needs data_path, a directory with "
          f"train.tsv and any of {_EVAL_FILES}."
      )
    _check_unread_data_fields(d, split)
    check_data_files(d)
  if model:
    model_config(config)  # The model config's own checks.
    config_lib.check_unselected_sections(
        config, default_config(), MODELS, config.model
    )
    _check_relations_unused(config)
  check_choice(t.schedule, SCHEDULES, "train.schedule")
  trainer.validate_train_section(t, SELECT_ON)
  optim.validate(t)
  check_choice(t.dropout_prng, prng.DROPOUT_PRNGS, "train.dropout_prng")
  if t.csordas_batch_size < 0:
    raise ValueError(
        "train.csordas_batch_size must be >= 0 (0: off), got "
        f"{t.csordas_batch_size}."
    )
  for name in ("max_eval_examples", "max_train_examples"):
    if d[name] < 0:
      raise ValueError(f"data.{name} must be >= 0 (0: all), got {d[name]}.")
  if t.schedule == "noam" and t.warmup_steps < 1:
    raise ValueError(
        "schedule='noam' needs warmup_steps >= 1 (e.g. 4000), "
        f"got {t.warmup_steps}."
    )


def _check_relations_unused(config: ConfigDict) -> None:
  """The seq2seq loop feeds no source relations and trains no edge labels:
  a model that needs either is refused, naming the field."""
  if config.model != "transformer":
    return
  t = config.transformer
  for name, unused in (
      ("relation_aware", t.relation_aware),
      ("num_edge_labels", t.num_edge_labels > 0),
  ):
    if unused:
      raise ValueError(
          f"transformer.{name}={t[name]!r}: the seq2seq loop passes no "
          "source relations (src_relations_BxSxS) and trains no edge-label "
          "loss, so it would train another model; leave it at its default "
          "here, or call the model (`models.seq2seq`) from your own loop."
      )


# Data fields read by some datasets (and splits) only: {field: (datasets,
# the splits that read it or None for all)}.
_DATA_FIELD_READERS = {
    "cutoff": (("scan",), ("length_cutoff",)),
    "scan_official_order": (("scan",), None),
    "num_train": (("for2lam",), None),
    "num_test": (("for2lam",), None),
    "data_path": (("tsv",), None),
    "target_format": (("tsv",), None),
    "holdout_val": (("tsv",), None),
    "entity_lexicon": (("tsv",), None),
}


def _check_unread_data_fields(d: ConfigDict, split: str) -> None:
  """Raises ValueError where a data field that `d.dataset` (and `split`)
  never reads differs from its default."""
  defaults = default_config().data
  for name, (datasets, splits) in _DATA_FIELD_READERS.items():
    reads = d.dataset in datasets and (splits is None or split in splits)
    if not reads and d[name] != defaults[name]:
      where = f"dataset {datasets[0]!r}" + (
          f" with split {splits[0]!r}" if splits else ""
      )
      raise ValueError(
          f"data.{name}={d[name]!r} is read by {where} only, not by "
          f"dataset={d.dataset!r} split={split!r}; leave it at its default "
          f"{defaults[name]!r}."
      )


def resume_conflicts(saved: dict, config: ConfigDict) -> dict:
  """{path: (saved, now)} of the fields that forbid resuming a run saved
  with config record `saved` under `config` (`config.resume_conflicts`:
  see RESUMABLE_CHANGES; the model section that `config.model` does not
  select is ignored)."""
  return config_lib.selected_resume_conflicts(
      saved, config, RESUMABLE_CHANGES, MODELS
  )


def describe_model(config: ConfigDict) -> str:
  """'relative universal transformer', 'tied edge_transformer', ..."""
  if config.model == "transformer":
    t = config.transformer
    return f"{t.positions} {'universal ' if t.tied else ''}transformer"
  return f"{'tied ' if config.edge_transformer.et.tied else ''}edge_transformer"


results_path = task_lib.results_path


def get_config(overrides: Optional[dict] = None) -> ConfigDict:
  """The default config with dotted-path `overrides` (unknown paths raise)."""
  return config_lib.override(default_config(), overrides or {})
