"""The seq2seq task: `Experiment` (data, vocabularies, model, step) and its
`build` for the engine (`engine.run`: resume check, `trainer.fit`, results
JSON and plot), run by `train_and_evaluate`.

The trainer runs it with its own step and stream, as every other task:
`trainer.make_train_step` of the token cross-entropy (dropout key
fold_in(state['rng'], state['step']), metric 'token_accuracy') and
`trainer.EpochStream` (epoch e visits `default_rng([seed, e])`'s permutation
of the training set; its short last batch is padded to the batch size with
zero-weight rows, which the loss, averaged over the real target tokens,
ignores; the position is the step).

Exact resume: `<workdir>/checkpoints/{latest,best}` (orbax) hold the train
state (params, optimiser state, step, RNG key) and a JSON record with the
stream position (the step), the per-step losses, the evaluation history, the
best score and the config (`to_dict`). A run stopped at step k and
restarted on the same workdir continues the same batches and dropout keys:
its losses and final params equal those of an uninterrupted run. A resumed
run whose config differs in a data, model or optimiser/batch field stops
with the differing paths (`config.resume_conflicts`, checked against
`<workdir>/config.json` before anything is restored). Vocabularies are saved
in `<workdir>/vocab_{src,tgt}.json`.

Several processes (`parallel.distributed`; the mesh spans all their
devices): every process runs the same seeded stream of global indices,
builds the examples of only its rows of each (padded) global batch
(`mesh.process_rows`) and forms the global arrays with
`mesh.shard_process_batch` (`jax.make_array_from_process_local_data`), so 1
process x 2 devices and 2 processes x 1 device train on the same global
batches. Evaluation gathers every process's decodings. Checkpoints are saved
and restored by all processes; `config.json`, the vocabularies, the results
JSON and the PNG are written by process 0.
"""

import dataclasses
import os
from typing import Any, Callable, Dict, Optional, Tuple, Union

import flax.linen as nn
import jax
import numpy as np
import optax

from relational_jax.data import semparse
from relational_jax.data.vocab import PAD_ID, Vocab
from relational_jax.models import et_seq2seq
from relational_jax.models import seq2seq as seq2seq_models
from relational_jax.training import checkpoints as ckpt_lib
from relational_jax.training import config as config_lib
from relational_jax.training import engine
from relational_jax.training import task as task_lib
from relational_jax.training import errors
from relational_jax.training import optim
from relational_jax.parallel import distributed
from relational_jax.parallel import mesh as mesh_lib
from relational_jax.training import reporting
from relational_jax.training import trainer
from relational_jax.training.seq2seq import config as s2s_config
from relational_jax.training.seq2seq import data as data_lib
from relational_jax.training.seq2seq import evaluation
from relational_jax.training.seq2seq import step as step_lib

ConfigDict = config_lib.ConfigDict
# A Flax module, or a factory called with the data-derived sizes
# (src_vocab_size, tgt_vocab_size, max_src_len, max_tgt_len, pad_id) as
# keywords that returns one.
ModelArg = Union[nn.Module, Callable[..., nn.Module]]
# batch_hook(step, host_batch) -> host_batch: `step` is the 1-based number of
# the step the batch trains; the batch is a dict of numpy arrays (src,
# tgt_in, tgt_out, weights[, tgt_tree_pos]).
BatchHook = Callable[[int, Dict[str, np.ndarray]], Dict[str, np.ndarray]]

_MODEL_CLASSES = {
    "transformer": seq2seq_models.Seq2SeqTransformer,
    "edge_transformer": et_seq2seq.EdgeTransformerSeq2Seq,
}


def build_model(
    config: ConfigDict,
    src_vocab_size: int,
    tgt_vocab_size: int,
    max_src_len: int,
    max_tgt_len: int,
    model: ModelArg = None,
):
  """(model config or None, unbound module).

  Built-in (`model=None`): `config.model` selects the section
  ('transformer': `Seq2SeqTransformer`; 'edge_transformer': the ET
  encoder-decoder), instantiated with the data-derived sizes. A module is
  used as given; a factory is called with the sizes as keywords."""
  sizes = dict(
      src_vocab_size=src_vocab_size,
      tgt_vocab_size=tgt_vocab_size,
      max_src_len=max_src_len,
      max_tgt_len=max_tgt_len,
      pad_id=PAD_ID,
  )
  if model is None:
    model_config = s2s_config.model_config(config, **sizes)
    return model_config, _MODEL_CLASSES[config.model](model_config)
  if not isinstance(model, nn.Module):
    model = model(**sizes)
    if not isinstance(model, nn.Module):
      raise TypeError(
          f"the model factory returned {type(model).__name__}, "
          "not a flax.linen.Module."
      )
  for method in ("greedy_decode",):
    if not callable(getattr(model, method, None)):
      raise TypeError(
          f"model {type(model).__name__} has no {method}(params, "
          "src_BxS, max_len, bos, eos, *, src_mask_BxS) method "
          "(the evaluation's greedy decoding)."
      )
  return getattr(model, "config", None), model


def _uses_tree_positions(config: ConfigDict, user_model: bool) -> bool:
  return (
      not user_model
      and config.model == "transformer"
      and config.transformer.positions == "tree"
  )


class Experiment:
  """Data, vocabularies, model, optimiser, mesh and jitted step of a config.

  Args:
    config: the run configuration (`default_config()` layout; validated
      here).
    mesh: a data mesh (default: the first `config.train.devices` of
      `jax.devices()`, 0 = all).
    vocabs: (src, tgt) vocabularies to use instead of building them from the
      training data (e.g. the ones saved with a run).
    model, data, optimizer: see `train_and_evaluate`.
  """

  def __init__(
      self,
      config: ConfigDict,
      mesh=None,
      vocabs: Optional[Tuple[Vocab, Vocab]] = None,
      *,
      model: ModelArg = None,
      data: Optional[data_lib.Seq2SeqData] = None,
      optimizer: Optional[optax.GradientTransformation] = None,
  ):
    s2s_config.validate(config, data=data is None, model=model is None)
    self.config = c = config
    t = c.train
    if mesh is None:
      mesh = mesh_lib.mesh_of_first(t.devices)
    self.mesh = mesh
    self.num_devices = mesh_lib.num_data_shards(mesh)
    mesh_lib.check_divisible(
        t.batch_size, self.num_devices, "global batch size"
    )
    self.eval_batch = t.eval_batch_size or t.batch_size
    mesh_lib.check_divisible(
        self.eval_batch, self.num_devices, "evaluation batch size"
    )

    if data is None:
      data = data_lib.load_data(
          c.data,
          c.transformer.tree_order,
          c.transformer.tree_tokens,
          tree_targets=_uses_tree_positions(c, model is not None),
      )
    else:
      data.check()
    if c.data.max_train_examples:  # The vocabularies are built from these.
      data = dataclasses.replace(
          data, train=data_lib.subset(data.train, c.data.max_train_examples)
      )
    self.data = data
    if vocabs is None:
      vocabs = (
          Vocab.build(s for s, _ in self.data.train),
          Vocab.build(t for _, t in self.data.train),
      )
    self.src_vocab, self.tgt_vocab = vocabs
    self.arities = (
        data_lib.target_arities(self.tgt_vocab)
        if _uses_tree_positions(c, model is not None)
        else None
    )
    tree_args = (
        None
        if self.arities is None
        else {
            "arities": self.arities,
            "order": c.transformer.tree_order,
            "k": c.transformer.tree_depth,
            "alignment": c.transformer.tree_alignment,
            "tokens": c.transformer.tree_tokens,
            "src_arities": (
                data_lib.target_arities(self.src_vocab, "source")
                if c.transformer.tree_encoder
                else None
            ),
        }
    )

    eval_pairs, self.eval_categories, self.eval_gold = {}, {}, {}
    # The chosen rows' sentences as their files write them (the sources may
    # be anonymised) and their anonymised entities, where there are any.
    self.eval_sources, self.eval_entities = {}, {}
    for k, v in self.data.evals.items():
      if not v:
        continue
      idx = data_lib.subset_indices(len(v), c.data.max_eval_examples)
      eval_pairs[k] = [v[i] for i in idx]
      if k in self.data.categories:  # The categories of the chosen rows.
        self.eval_categories[k] = [self.data.categories[k][i] for i in idx]
      if k in self.data.gold:  # The chosen rows' logical forms.
        self.eval_gold[k] = [self.data.gold[k][i] for i in idx]
      sentences = self.data.sentences.get(k, [s for s, _ in v])
      self.eval_sources[k] = [sentences[i] for i in idx]
      if k in self.data.entities:
        self.eval_entities[k] = [self.data.entities[k][i] for i in idx]
    markers = c.data.source_markers
    src_len = lambda ps: (
        max(len(s.split()) for s, _ in ps)
        + data_lib.num_source_markers(markers)
    )
    tgt_len = lambda ps: max(len(t.split()) for _, t in ps) + 1  # + EOS.
    self.train_set = data_lib.encode_set(
        self.data.train,
        self.src_vocab,
        self.tgt_vocab,
        src_len(self.data.train),
        tgt_len(self.data.train),
        tree_args,
        markers,
        c.data.target_start,
    )
    # One source length and one decoding length for every evaluation set:
    # a single compilation of the greedy decoder.
    eval_src_len = max(src_len(p) for p in eval_pairs.values())
    self.decode_len = max(tgt_len(p) for p in eval_pairs.values())
    self.eval_sets = {
        k: data_lib.encode_set(
            p,
            self.src_vocab,
            self.tgt_vocab,
            eval_src_len,
            self.decode_len,
            tree_args,
            markers,
            c.data.target_start,
        )
        for k, p in eval_pairs.items()
    }
    self.user_model = model is not None
    self.model_config, self.model = build_model(
        c,
        len(self.src_vocab),
        len(self.tgt_vocab),
        max_src_len=max(self.train_set.src.shape[1], eval_src_len),
        max_tgt_len=max(self.train_set.tgt_in.shape[1], self.decode_len),
        model=model,
    )
    self.model_description = (
        type(self.model).__name__
        if self.user_model
        else s2s_config.describe_model(c)
    )
    # The built-in optimiser is keyed by its arguments, so that runs in one
    # process share the compiled step.
    self.optimizer = (
        step_lib.optimizer_args(t) if optimizer is None else optimizer
    )
    self.tx = step_lib.as_transformation(self.optimizer)
    self.train_step = step_lib.compiled_train_step(
        self.model, self.optimizer, self.mesh, t.dropout_prng
    )

  # -- State. ----------------------------------------------------------------

  def _example(self):
    return self.batch(np.arange(1))

  def init_state(self):
    """A fresh train state, replicated over the mesh."""
    init = step_lib.compiled_init(self.model, self.optimizer, self.mesh)
    return init(jax.random.PRNGKey(self.config.train.seed), self._example())

  def abstract_state(self):
    """ShapeDtypeStructs (replicated shardings) of the train state."""
    shapes = jax.eval_shape(
        step_lib.init_fn(self.model, self.tx),
        jax.random.PRNGKey(self.config.train.seed),
        self._example(),
    )
    return ckpt_lib.abstract_like(shapes, mesh_lib.replicated(self.mesh))

  def batch_stream(self) -> trainer.EpochStream:
    """The training stream (`trainer.EpochStream` of `train.batch_size`
    and `train.seed`) of this process's rows (`process_batch`)."""
    t = self.config.train
    return trainer.EpochStream(
        len(self.train_set), t.batch_size, t.seed, self.process_batch
    )

  def batch(self, indices) -> Dict[str, np.ndarray]:
    """Host batch of training examples `indices`."""
    s = self.train_set
    tgt_out = s.tgt_out[indices]
    out = {
        "src": s.src[indices],
        "tgt_in": s.tgt_in[indices],
        "tgt_out": tgt_out,
        "weights": (tgt_out != PAD_ID).astype(np.float32),
    }
    out.update(s.tree_extras(indices))  # Tree positions, if any.
    return out

  def process_batch(self, indices) -> Dict[str, np.ndarray]:
    """This process's rows (`mesh.process_rows`) of the global batch of
    training examples `indices` (the same on every process), padded to
    `train.batch_size` with zero-weight copies of its first example."""
    size = self.config.train.batch_size
    padded, real = trainer.pad_indices(indices, size)
    rows = mesh_lib.process_rows(size, self.mesh)
    out = self.batch(padded[rows])
    out["weights"] = out["weights"] * real[rows, None]
    return out

  def sharded_batch(self, indices):
    """The global batch of training examples `indices` (the same on every
    process; padded as `process_batch`) on the mesh; this process builds
    only its rows."""
    return mesh_lib.shard_process_batch(
        self.process_batch(indices), self.mesh, self.config.train.batch_size
    )

  # -- Evaluation. -----------------------------------------------------------

  def greedy_rows(self, params, name: str) -> np.ndarray:
    """Greedy decodings (int, N x decode_len) of evaluation set `name`."""
    return evaluation.greedy_rows(
        self.model,
        params,
        self.eval_sets[name],
        self.decode_len,
        self.eval_batch,
        self.mesh,
        self.arities,
    )

  def exact_match_rows(self, params, name: str) -> np.ndarray:
    """Per-row exact match (bool) of greedy decoding on evaluation set
    `name`."""
    return evaluation.row_matches(
        self.greedy_rows(params, name), self.eval_sets[name].tgt_out
    )

  def exact_match(self, params, name: str) -> float:
    """Exact-match accuracy of greedy decoding on evaluation set `name`."""
    return float(np.mean(self.exact_match_rows(params, name)))

  def logical_forms(self, pred_NxT: np.ndarray, name: str) -> Tuple[list, list]:
    """(logical forms, well formed) of the decodings `pred_NxT` of
    evaluation set `name` (`evaluation.decoded_logical_form`), anonymised
    entities mapped back (`semparse.deanonymize`)."""
    d = self.data
    out = [
        evaluation.decoded_logical_form(
            evaluation.decoded_tokens(row, self.tgt_vocab),
            d.target_format,
            d.tree_targets,
            d.tree_order,
        )
        for row in pred_NxT
    ]
    texts = [text for text, _ in out]
    if name in self.eval_entities:
      texts = [
          semparse.deanonymize(t, e)
          for t, e in zip(texts, self.eval_entities[name])
      ]
    return texts, [ok for _, ok in out]

  def predictions(self, params) -> Dict[str, list]:
    """{set: [(source, gold logical form as in its file, predicted logical
    form)] per row, in file order} of every evaluation set
    (target_format other than 'text')."""
    out = {}
    for name in self.eval_sets:
      predicted, _ = self.logical_forms(self.greedy_rows(params, name), name)
      out[name] = list(
          zip(self.eval_sources[name], self.eval_gold[name], predicted)
      )
    return out

  def evaluate_with_categories(
      self, params
  ) -> Tuple[Dict[str, float], Dict[str, Dict[str, float]]]:
    """(accuracies, by_category): exact match of every evaluation set
    (with train.csordas_batch_size > 0 also `<set>_csordas`, Csordas et
    al.'s scoring of the same decodings, `evaluation.batch_longest_matches`),
    and {'<set>_by_category': {category: exact match}} for every set with
    categories (e.g. 'gen_by_category' for COGS)."""
    accuracies, by_category = {}, {}
    csordas_batch = self.config.train.csordas_batch_size
    for name, s in self.eval_sets.items():
      pred_NxT = self.greedy_rows(params, name)
      rows = evaluation.row_matches(pred_NxT, s.tgt_out)
      if self.data.target_format != "text":  # Scored on the logical forms.
        predicted, ok = self.logical_forms(pred_NxT, name)
        scores = evaluation.logical_form_scores(
            predicted, self.eval_gold[name], self.data.target_format, ok
        )
        rows = scores["exact"]
        accuracies[f"{name}_tree"] = float(np.mean(scores["tree"]))
      accuracies[name] = float(np.mean(rows))
      if csordas_batch:
        accuracies[f"{name}_csordas"] = float(
            np.mean(
                evaluation.batch_longest_matches(
                    pred_NxT, s.tgt_out, csordas_batch
                )
            )
        )
      if name in self.eval_categories:
        by_category[f"{name}_by_category"] = evaluation.accuracy_by_category(
            rows, self.eval_categories[name]
        )
    return accuracies, by_category

  def evaluate(self, params) -> Dict[str, float]:
    return self.evaluate_with_categories(params)[0]

  def selection_set(self) -> Optional[str]:
    """Evaluation set used for model selection (None: the last step)."""
    return evaluation.selection_set(self.config.train.select_on, self.eval_sets)


# ---------------------------------------------------------------------------
# The training loop.


def _save_or_check_vocabs(experiment: Experiment, workdir: str) -> None:
  for name, vocab in (
      ("src", experiment.src_vocab),
      ("tgt", experiment.tgt_vocab),
  ):
    path = os.path.join(workdir, f"vocab_{name}.json")
    if os.path.exists(path):
      if Vocab.load(path) != vocab:
        raise ValueError(
            f"the {name} vocabulary built from the training data differs from "
            f"the one saved with this run ({path}): the data changed; use a "
            "new work directory (--workdir)."
        )
    elif distributed.is_primary():
      vocab.save(path)


results_path = s2s_config.results_path
# The training seed (`experiments.reproduce --seeds` sets it per run).
SEED_PATH = "train.seed"
default_config = s2s_config.default_config
RESUMABLE_CHANGES = s2s_config.RESUMABLE_CHANGES


def validate(
    config: ConfigDict,
    *,
    model: ModelArg = None,
    data: Optional[data_lib.Seq2SeqData] = None,
    optimizer: Optional[optax.GradientTransformation] = None,
    batch_hook: Optional[BatchHook] = None,
) -> None:
  """Raises ValueError naming the bad value; with the caller's own `data`
  or `model` their sections are not checked (the loop still reads
  `data.source_markers`, `data.target_start`, the `max_*_examples` and,
  for generated trees, `transformer.tree_order` and `tree_tokens`), and
  the built-in optimiser's fields must keep their defaults with the
  caller's own `optimizer` (which replaces it)."""
  del batch_hook  # It leaves the config as it is.
  s2s_config.validate(config, data=data is None, model=model is None)
  if optimizer is not None:
    defaults = s2s_config.default_config().train
    unread = [
        f"train.{name}"
        for name in optim.Settings._fields
        if name != "steps" and config.train[name] != defaults[name]
    ]
    if unread:
      raise ValueError(
          f"{unread} configure the built-in optimiser, which the optimizer "
          "argument replaces: leave them at their defaults (set the rate, "
          "schedule and clipping in your optax transformation)."
      )


def resume_conflicts(saved: Dict, config: ConfigDict, **options) -> Dict:
  """{path: (saved, now)} that forbid resuming (`config.resume_conflicts`:
  the model section that `config.model` does not select may change too; a
  field added since the run was saved counts as its default). The engine's
  resume check of this task."""
  del options  # The same fields are compared with the caller's own parts.
  return s2s_config.resume_conflicts(saved, config)


def headline(results: Dict[str, Any]) -> Dict[str, float]:
  """Exact match of every evaluation set at the selected model (the last
  one's without a selection)."""
  selected = results["selection"] or results["final"] or {"accuracies": {}}
  return dict(selected["accuracies"])


def plot_accuracies(results: Dict, path: str) -> None:
  """PNG of every evaluation set's exact-match accuracy against step (and
  of Csordas et al.'s scoring, where the run has it)."""
  history = results["history"]
  series = []
  for name in data_lib.EVAL_SETS:
    for key, label in (
        (name, data_lib.EVAL_LABELS[name]),
        (f"{name}_csordas", f"{data_lib.EVAL_LABELS[name]}, their scoring"),
        (f"{name}_tree", f"{data_lib.EVAL_LABELS[name]}, tree match"),
    ):
      points = [(h["step"], h[key]) for h in history if key in h]
      if points:
        steps, accuracies = zip(*points)
        series.append((label, steps, accuracies))
  reporting.plot_curves(
      series,
      path,
      xlabel="training step",
      ylabel="exact-match accuracy",
      title=f"{results['data']['description']}: {results['model']}",
  )


class _Task:
  """The seq2seq `trainer.Trainee`: the experiment's state, step and exact-match
  evaluation; the stream's batches are this process's rows of each global
  batch (`Experiment.batch_stream`), sharded here after the batch hook."""

  def __init__(
      self,
      experiment: Experiment,
      select: Optional[str],
      batch_hook: Optional[BatchHook],
  ):
    self.experiment, self.select, self.batch_hook = (
        experiment,
        select,
        batch_hook,
    )
    self.stream = experiment.batch_stream()
    self.selection = select or "last"  # What the score measures.

  def init_state(self):
    return self.experiment.init_state()

  def abstract_state(self):
    return self.experiment.abstract_state()

  def train_step(self, state, rows, step):
    if self.batch_hook is not None:
      rows = self.batch_hook(step + 1, rows)
    exp = self.experiment
    batch = mesh_lib.shard_process_batch(
        rows, exp.mesh, exp.config.train.batch_size
    )
    return exp.train_step(state, batch, step)

  def evaluate(self, state, step):
    del step
    accuracies, by_category = self.experiment.evaluate_with_categories(
        state["params"]
    )
    score = accuracies[self.select] if self.select else None
    return {**accuracies, **by_category}, score


def train_and_evaluate(
    config: ConfigDict,
    workdir: str,
    *,
    model: ModelArg = None,
    data: Optional[data_lib.Seq2SeqData] = None,
    optimizer: Optional[optax.GradientTransformation] = None,
    log: Callable[[str], None] = print,
    batch_hook: Optional[BatchHook] = None,
) -> Dict:
  """Trains (or resumes) a run in `workdir`; returns and writes the results.

  Args:
    config: a `default_config()`-shaped ConfigDict. With `data` the data
      section is unused except `data.max_eval_examples`,
      `data.max_train_examples`, `data.source_markers` and
      `data.target_start`; with `model` the model sections are unused
      (but for `transformer.tree_order` and `tree_tokens` where the data
      makes trees).
    workdir: checkpoints, vocabularies and (by default) results; rerun on
      the same workdir to resume.
    model: None (build `config.model` from its section), a Flax module, or
      a factory called as `factory(src_vocab_size=, tgt_vocab_size=,
      max_src_len=, max_tgt_len=, pad_id=)` (sizes of the vocabularies the
      loop builds from the training pairs, PAD 0 / BOS 1 / EOS 2 / UNK 3)
      returning a module. The loop relies on:
        * `model.init(key, src_BxS, src_mask_BxS, tgt_in_BxT,
          deterministic=True)` and `model.apply({'params': p}, src_BxS,
          src_mask_BxS, tgt_in_BxT, deterministic=False,
          rngs={'dropout': key})` -> next-token logits BxTxV (teacher
          forcing: tgt_in is the start token (`data.target_start`: EOS by
          default, or BOS) then y_0 .. y_{T-2}, the target y_0 .. EOS);
        * `model.greedy_decode(params, src_BxS, max_len, bos, eos, *,
          src_mask_BxS)` on the unbound module -> BxL int tokens (L =
          max_len, BOS excluded) ending at the first EOS, PAD after it.
      The module must be hashable (Flax modules with hashable fields are):
      it keys the jit caches.
    data: a `Seq2SeqData` (whitespace-tokenised pairs; evaluation sets named
      as `data.EVAL_SETS`) instead of `load_data(config.data)`.
    optimizer: an optax GradientTransformation instead of the built-in Adam
      + schedule + clipping of `config.train` (whose optimiser fields must
      then keep their defaults: `validate`).
    log: receives the progress lines.
    batch_hook: testing hook, `batch_hook(step, host_batch) -> host_batch`
      applied to every training batch before it is sharded (`step` is the
      1-based number of the step it trains; with several processes, each
      one's hook sees its rows of the global batch).

  Writes `<workdir>/checkpoints/{latest,best}`, `<workdir>/vocab_*.json`,
  `<workdir>/config.json` (the config, `to_dict`),
  the results JSON (`config.results_path`, default
  `<workdir>/results.json`, written atomically) and, beside it,
  `<stem>_accuracy.png`. Results: exact match of every evaluation set per
  evaluated step (`history[i][set]`), in `final["accuracies"]` and
  `selection["accuracies"]`; for a set with categories (`data.categories`;
  COGS 'gen': its 21 generalisation categories) also `{set}_by_category` =
  {category: exact match} in every history entry, `final` and `selection`, over
  the rows evaluated (with `data.max_eval_examples`, the categories of the
  chosen rows; their counts in `data.category_sizes`).

  Logical-form targets (`data.target_format` other than 'text'): every
  set is scored on the logical forms (`<set>` exact match, `<set>_tree`
  tree match; `evaluation` module docstring), and the selected state
  (`train.select_on`) decodes every evaluation set into
  `predictions_<file stem>.tsv` beside the results JSON (sentence, gold
  form as in its file, predicted form; one line per row in file order;
  `write_predictions`), listed under `predictions`.

  The engine (`engine.run`) does all but `build`; a planned stop
  (`train.stop_at_step`) returns {'stopped_at': step}.

  Raises:
    ValueError: for a bad configuration or data, or a resumed run whose
      config changed.
    NonFiniteLossError: if a loss or gradient norm is NaN/Inf; the last
      good checkpoint is kept.
  """
  return TASK.train_and_evaluate(
      config,
      workdir,
      log,
      model=model,
      data=data,
      optimizer=optimizer,
      batch_hook=batch_hook,
  )


def build(
    config: ConfigDict,
    mesh,
    workdir: str,
    log: Callable[[str], None],
    *,
    model: ModelArg = None,
    data: Optional[data_lib.Seq2SeqData] = None,
    optimizer: Optional[optax.GradientTransformation] = None,
    batch_hook: Optional[BatchHook] = None,
) -> task_lib.Built:
  """The trainer's task of `config` on `mesh` and its results (`engine`):
  the final and selected numbers are those of the evaluation history, so
  the engine restores no state (`Built.record_only`). Saves the
  vocabularies in `workdir`, or checks them against the saved ones."""
  experiment = Experiment(
      config, mesh, model=model, data=data, optimizer=optimizer
  )
  select = experiment.selection_set()  # Before anything is written.
  _save_or_check_vocabs(experiment, workdir)
  log(
      f"{experiment.data.description}: {len(experiment.train_set)} train, "
      + ", ".join(f"{len(v)} {k}" for k, v in experiment.eval_sets.items())
      + f"; {experiment.model_description}; "
      f"{experiment.num_devices} device(s); model selection on "
      f"{select or 'the last step'}"
  )
  return task_lib.Built(
      task=_Task(experiment, select, batch_hook),
      description=f"{config.data.dataset}/{experiment.model_description}",
      header=_header(experiment, select),
      final=lambda params, done, selected: _final(
          experiment,
          done,
          params,
          os.path.dirname(
              os.path.abspath(task_lib.results_path(config, workdir))
          ),
      ),
      summary=_summary,
      plot=_plot,
      # Logical forms: the selected state writes the predictions files.
      record_only=experiment.data.target_format == "text",
  )


def _header(experiment: Experiment, select: Optional[str]) -> Dict:
  return {
      "model": experiment.model_description,
      "data": {
          "description": experiment.data.description,
          "train_size": len(experiment.train_set),
          "eval_sizes": {k: len(v) for k, v in experiment.eval_sets.items()},
          "full_eval_sizes": {
              k: len(v) for k, v in experiment.data.evals.items() if v
          },
          "category_sizes": {
              k: {cat: cats.count(cat) for cat in sorted(set(cats))}
              for k, cats in experiment.eval_categories.items()
          },
          "notes": experiment.data.notes,
      },
      "model_selection": select or "last",
      "num_devices": experiment.num_devices,
  }


def _final(
    experiment: Experiment,
    done: trainer.RunRecord,
    params=None,
    results_dir: Optional[str] = None,
) -> Dict:
  """'final': the last evaluation's numbers; 'selection': those of the
  model selection (select_on; the last evaluation without one). With
  `params` (the selected state's; logical-form targets), also writes
  `predictions_<file stem>.tsv` in `results_dir` for every evaluation set
  (`write_predictions`) and lists them under 'predictions'."""
  files = {}
  if params is not None:
    files = write_predictions(experiment, params, results_dir)

  def accuracies_of(step, entry):
    return {
        "step": step,
        "accuracies": (
            {k: entry[k] for k in experiment.eval_sets}
            | {  # Csordas et al.'s scoring or the tree match, where the
                # evaluation had them.
                f"{k}{suffix}": entry[f"{k}{suffix}"]
                for k in experiment.eval_sets
                for suffix in ("_csordas", "_tree")
                if f"{k}{suffix}" in entry
            }
        ),
        **{
            f"{k}_by_category": entry[f"{k}_by_category"]
            for k in experiment.eval_categories
            if f"{k}_by_category" in entry
        },
    }

  history = done.history
  return {
      **({"predictions": files} if files else {}),
      "final": (
          accuracies_of(history[-1]["step"], history[-1]) if history else None
      ),
      "selection": (
          dict(
              accuracies_of(done.best["step"], done.best["entry"]),
              score=done.best["score"],
          )
          if done.best
          else None
      ),
  }


def write_predictions(
    experiment: Experiment, params, directory: str
) -> Dict[str, str]:
  """Writes `<directory>/predictions_<stem>.tsv` for every evaluation set
  (stem: its file's, `Seq2SeqData.files`, e.g. 'test'): one line per row in
  file order, `sentence<TAB>gold logical form as in the file<TAB>predicted
  logical form` (`Experiment.predictions`; process 0 writes). Returns {set:
  file name}."""
  names = {}
  for name, rows in experiment.predictions(params).items():
    stem = experiment.data.files.get(name, name)
    names[name] = f"predictions_{stem}.tsv"
    if distributed.is_primary():
      os.makedirs(directory, exist_ok=True)
      path = os.path.join(directory, names[name])
      with open(path + ".tmp", "w", encoding="utf-8") as f:
        for row in rows:
          f.write("\t".join(row) + "\n")
      os.replace(path + ".tmp", path)
  return names


def _summary(results: Dict) -> str:
  final = results["final"]
  if not final:
    return f"trained {results['steps']} steps, no evaluation"
  return f"exact match at step {final['step']}: " + ", ".join(
      f"{k} {v:.4f}" for k, v in final["accuracies"].items()
  )


def _plot(results: Dict, path: str) -> None:
  if results["history"]:
    plot_accuracies(results, os.path.splitext(path)[0] + "_accuracy.png")


def restore_checkpoint(
    config: ConfigDict,
    workdir: str,
    which: str = "latest",
    *,
    model: ModelArg = None,
    data: Optional[data_lib.Seq2SeqData] = None,
    optimizer: Optional[optax.GradientTransformation] = None,
) -> Optional[Tuple[Any, Dict]]:
  """(state, meta) of a run's newest `which` checkpoint ('latest' or
  'best'), restored with the run's saved vocabularies; None if none. Pass
  the `model`, `data` and `optimizer` the run was trained with."""
  experiment = _saved_experiment(config, workdir, model, data, optimizer)
  return trainer.restore(
      experiment.abstract_state(), trainer.checkpoint_dir(workdir), which
  )


def _saved_experiment(config, workdir, model, data, optimizer) -> Experiment:
  vocabs = tuple(
      Vocab.load(os.path.join(workdir, f"vocab_{n}.json"))
      for n in ("src", "tgt")
  )
  return Experiment(
      config, vocabs=vocabs, model=model, data=data, optimizer=optimizer
  )


def load_config(workdir: str) -> ConfigDict:
  """A run's `<workdir>/config.json` (`errors.OtherFormatError` if it is not
  in this version's format)."""
  path = os.path.join(workdir, "config.json")
  if not os.path.isfile(path):
    raise FileNotFoundError(
        f"{path} not found: {workdir!r} is not a seq2seq work directory."
    )
  saved = reporting.read_json(path)
  try:
    config_lib.check_same_fields(
        saved, config_lib.to_dict(s2s_config.default_config())
    )
  except errors.OtherFormatError as e:
    raise errors.OtherFormatError(
        f"{path}: " + str(e).replace("<workdir>", workdir)
    ) from None
  return config_lib.from_dict(saved)


def evaluate_checkpoint(
    workdir: str,
    which: str = "latest",
    *,
    step: Optional[int] = None,
    csordas_batch_size: int = 2048,
    max_wrong: int = 50,
    model: ModelArg = None,
    data: Optional[data_lib.Seq2SeqData] = None,
    optimizer: Optional[optax.GradientTransformation] = None,
) -> Dict:
  """Scores a saved run's newest `which` checkpoint (or its step `step`,
  e.g. one `train.keep_every` kept) on every evaluation set, strictly and as
  Csordas et al.'s code does (`evaluation` module docstring), and says which
  rows are wrong. Pass the `model`, `data` and `optimizer` the run was
  trained with.

  Returns {'workdir', 'checkpoint', 'step', 'csordas_batch_size', 'sets':
  {name: {'size', 'exact_match' (strict, as in training), 'exact_match_csordas'
  (`batch_longest_matches` in batches of `csordas_batch_size`),
  'by_target_length': {tokens before EOS: {'rows', 'wrong',
  'wrong_csordas'}}, 'wrong': the first `max_wrong` strictly wrong rows
  ({'row', 'source', 'target', 'prediction'}, as text)}}}; with
  logical-form targets also 'logical_form_exact_match' and 'tree_match'
  (the training's `<set>` and `<set>_tree`).
  """
  if csordas_batch_size < 1:
    raise ValueError(
        f"csordas_batch_size must be >= 1, got {csordas_batch_size}."
    )
  config = load_config(workdir)
  experiment = _saved_experiment(config, workdir, model, data, optimizer)
  restored = trainer.restore(
      experiment.abstract_state(),
      trainer.checkpoint_dir(workdir),
      which,
      step=step,
  )
  if restored is None:
    raise errors.UserError(
        f"No {which} checkpoint in {trainer.checkpoint_dir(workdir)}: the"
        " run has not been saved yet."
    )
  state, meta = restored
  text = lambda vocab, ids: " ".join(
      vocab.id_to_token(int(t)) for t in ids if t != PAD_ID
  )
  sets = {}
  for name, s in experiment.eval_sets.items():
    pred_NxT = experiment.greedy_rows(state["params"], name)
    ok_N = evaluation.row_matches(pred_NxT, s.tgt_out)
    ok_c_N = evaluation.batch_longest_matches(
        pred_NxT, s.tgt_out, csordas_batch_size
    )
    len_N = evaluation.target_lengths(s.tgt_out)
    sets[name] = {
        "size": len(s),
        "exact_match": float(np.mean(ok_N)),
        "exact_match_csordas": float(np.mean(ok_c_N)),
        "by_target_length": {
            str(n): {
                "rows": int(np.sum(len_N == n)),
                "wrong": int(np.sum(~ok_N[len_N == n])),
                "wrong_csordas": int(np.sum(~ok_c_N[len_N == n])),
            }
            for n in sorted(set(len_N.tolist()))
        },
        "wrong": [
            {
                "row": int(i),
                "source": text(experiment.src_vocab, s.src[i]),
                "target": text(experiment.tgt_vocab, s.tgt_out[i]),
                "prediction": text(experiment.tgt_vocab, pred_NxT[i]),
            }
            for i in np.flatnonzero(~ok_N)[:max_wrong]
        ],
    }
    if experiment.data.target_format != "text":  # As training scores them.
      predicted, well_formed = experiment.logical_forms(pred_NxT, name)
      scores = evaluation.logical_form_scores(
          predicted,
          experiment.eval_gold[name],
          experiment.data.target_format,
          well_formed,
      )
      sets[name]["logical_form_exact_match"] = float(np.mean(scores["exact"]))
      sets[name]["tree_match"] = float(np.mean(scores["tree"]))
  return {
      "workdir": workdir,
      "checkpoint": which,
      "step": int(meta["step"]),
      "csordas_batch_size": csordas_batch_size,
      "sets": sets,
  }


class Seq2Seq(task_lib.Task):
  """Seq2seq (SCAN, COGS, For2Lam, TSV), task 'seq2seq' (this module's
  functions; run options: the caller's model, data, optimizer and batch
  hook, `train_and_evaluate`)."""

  RESUMABLE_CHANGES = RESUMABLE_CHANGES
  SEED_PATH = SEED_PATH

  def default_config(self):
    return default_config()

  def validate(self, config, **options):
    validate(config, **options)

  def resume_conflicts(self, saved, config, **options):
    return resume_conflicts(saved, config, **options)

  def build(self, config, mesh, workdir, log, **options):
    return build(config, mesh, workdir, log, **options)

  def headline(self, results):
    return headline(results)

  def train_and_evaluate(self, config, workdir, log=print, **options):
    return engine.run(self, config, workdir, log, **options)


TASK = Seq2Seq()
