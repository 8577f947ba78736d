"""The seq2seq input pipeline: raw pairs and fixed-shape arrays (the batch
stream is the trainer's, `trainer.EpochStream`; `loop.Experiment`).

Data (`load_data(config.data)`; by default the official files shipped in
`relational_jax/data/official`, `relational_jax.data.paths`):
  scan  `relational_jax.data.scan`; splits 'length_cutoff' (default, with
        `cutoff`, Csordas et al. 2021), 'simple', 'length', 'addprim_jump',
        'addprim_turn_left'. 'simple' and 'length' are the official
        `<data_dir>/scan/tasks_{train,test}_{simple,length}.txt` when those
        files exist, and generated from the grammar otherwise (the run's
        notes say which). With `scan_official_order` the length-cutoff IID
        hold-out is drawn from the line order of `<data_dir>/scan/tasks.txt`,
        as Csordas et al. did.
  cogs  `<data_dir>/cogs/{train,dev,test,gen}.tsv` (Kim & Linzen 2020); the
        third column of gen.tsv, the generalisation category, is kept in
        `Seq2SeqData.categories['gen']` (21 categories x 1,000 rows).
  tsv   `<data_path>/{train,dev,test,gen,gen_dev}.tsv`, the COGS layout (a
        third column of gen.tsv / gen_dev.tsv is kept as categories too).
        `target_format` other than 'text' reads every target as a logical
        form in that syntax (`relational_jax.data.semparse`; a malformed one
        stops the run with one line naming file, line and fault): with
        `tree_targets` (the tree decoder) the model's target is the tree's
        annotated linearisation in `target_order`, else the form's tokens;
        the files' forms are kept (`Seq2SeqData.gold`) for scoring and the
        predictions files. `holdout_val` > 0 moves that many rows of
        train.tsv (a fixed draw, `semparse.split_holdout`) to 'iid_val'.
        `entity_lexicon` (a path) anonymises the entities of sentence and
        form as typed markers (`semparse.anonymize`, Dong & Lapata's ATIS
        form); decodings are mapped back (`Seq2SeqData.entities`).
  for2lam  `relational_jax.data.for2lam` (Chen et al. 2018; Shiv & Quirk
        2019 sec. 5.1.1): FOR -> LAMBDA program translation generated from
        the grammars with `train.seed`-independent seed 0; split 'short' or
        'long'; `num_train` / `num_test` programs (default 100,000 / 10,000,
        the paper's sizes); sources are annotated DFS token sequences,
        targets annotated sequences in `target_order` (the decoder's
        traversal, `transformer.tree_order`), both written as
        `transformer.tree_tokens` (`for2lam.TOKENS`: by default the
        authors' LCRS trees with explicit `_NULL/0` leaves). The test set
        is 'iid'.

Per-category scores: for every evaluation set with categories, the loop
reports `<set>_by_category` = {category: exact match} next to the total
(`evaluation.accuracy_by_category`).

Evaluation sets (`EVAL_SETS`; exact match of the greedy decoding):
  'iid'      IID test set: SCAN length_cutoff 'iid', SCAN simple 'test', TSV
             'test.tsv' (COGS 'test' is in-distribution);
  'gen'      generalisation test set: SCAN 'test' of the other splits,
             TSV 'gen.tsv' (the COGS gen set, 21,000 examples);
  'iid_val'  IID validation set: TSV 'dev.tsv' (COGS 'dev' is IID);
  'gen_val'  generalisation validation set: TSV 'gen_dev.tsv'.

A `Seq2SeqData` of your own (whitespace-tokenised (source, target) string
pairs) can replace `load_data`: pass it as `train_and_evaluate(data=...)`.
"""

import dataclasses
import os
from typing import Dict, List, Optional, Tuple

import numpy as np

from relational_jax.data import for2lam as for2lam_lib
from relational_jax.data import scan as scan_lib
from relational_jax.data import semparse as semparse_lib
from relational_jax.data import tsv as tsv_lib
from relational_jax.data.vocab import BOS_ID, EOS_ID, PAD_ID, Vocab
from relational_jax.layers import shapes
from relational_jax.layers import tree as tree_lib
from relational_jax.training.seq2seq import config as config_lib

EVAL_SETS = ("iid", "gen", "iid_val", "gen_val")
EVAL_LABELS = {
    "iid": "IID",
    "gen": "generalisation",
    "iid_val": "IID val",
    "gen_val": "generalisation val",
}
# Evaluation sets whose third TSV column (the category) is kept.
CATEGORY_SETS = ("gen", "gen_val")

Pairs = List[Tuple[str, str]]


@dataclasses.dataclass
class Seq2SeqData:
  """Raw (source, target) string pairs of a run (tokens split on spaces).

  Attributes:
    train: the training pairs.
    evals: evaluation sets by role, a subset of EVAL_SETS (see the module
      docstring); model selection `select_on='auto'` uses 'gen_val'.
    description: one line naming the data (logs, results, plot title).
    notes: remarks recorded in the results JSON.
    categories: optional category of every row of some evaluation sets
      ({set name: [category per pair of evals[set name]]}, e.g. the COGS
      generalisation categories of 'gen'); each such set is also scored per
      category.
    target_format: 'text' (targets are token sequences, scored row by
      row), or the syntax of logical-form targets (`semparse.FORMATS`),
      scored on the logical forms (`evaluation.logical_form_scores`).
    tree_targets: the targets are annotated linearisations of the logical
      forms in `tree_order` (the tree decoder's), not their tokens.
    tree_order: the traversal of tree targets ('dfs' or 'bfs').
    gold: {set name: the logical form of every row as its file writes it}
      (target_format other than 'text').
    files: {set name: the stem of the file it was read from ('test',
      'dev', 'train_holdout' for a hold-out)}: predictions_<stem>.tsv.
    sentences: {set name: every row's sentence as its file writes it}
      (logical forms; the pairs' sources may be anonymised).
    entities: {set name: every row's {marker: entity token}} where the
      entities were anonymised (`semparse.anonymize`), else {}.
  """

  train: Pairs
  evals: Dict[str, Pairs]
  description: str = "user data"
  notes: List[str] = dataclasses.field(default_factory=list)
  categories: Dict[str, List[str]] = dataclasses.field(default_factory=dict)
  target_format: str = "text"
  tree_targets: bool = False
  tree_order: str = "dfs"
  gold: Dict[str, List[str]] = dataclasses.field(default_factory=dict)
  files: Dict[str, str] = dataclasses.field(default_factory=dict)
  sentences: Dict[str, List[str]] = dataclasses.field(default_factory=dict)
  entities: Dict[str, List[Dict[str, str]]] = dataclasses.field(
      default_factory=dict
  )

  def check(self) -> None:
    """Raises ValueError for empty sets, unknown evaluation-set names or
    categories that do not match their set."""
    unknown = sorted(set(self.evals) - set(EVAL_SETS))
    if unknown:
      raise ValueError(
          f"unknown evaluation set(s) {unknown}; valid names are "
          f"{list(EVAL_SETS)}."
      )
    if not self.train:
      raise ValueError(f"{self.description}: the training set is empty.")
    if not any(self.evals.values()):
      raise ValueError(f"{self.description}: no evaluation set found.")
    shapes.check_choice(
        self.target_format, config_lib.TARGET_FORMATS, "target_format"
    )
    if self.target_format != "text":
      for name, pairs in self.evals.items():
        for what, per_set, needed in (
            ("gold logical forms", self.gold, True),
            ("sentences", self.sentences, False),
            ("entity maps", self.entities, False),
        ):
          if (needed or name in per_set) and len(per_set.get(name, ())) != len(
              pairs
          ):
            raise ValueError(
                f"{self.description}: {what} for "
                f"{len(per_set.get(name, ()))} of the {len(pairs)} rows of "
                f"{name!r}."
            )
    for name, cats in self.categories.items():
      if name not in self.evals:
        raise ValueError(
            f"{self.description}: categories given for "
            f"{name!r}, which is not an evaluation set."
        )
      if len(cats) != len(self.evals[name]):
        raise ValueError(
            f"{self.description}: {len(cats)} categories for "
            f"the {len(self.evals[name])} pairs of {name!r}."
        )
      if not all(isinstance(x, str) and x for x in cats):
        raise ValueError(
            f"{self.description}: the categories of {name!r} "
            "must be non-empty strings."
        )


def load_data(
    data_config,
    target_order: str = "dfs",
    tree_tokens: str = "lcrs_null",
    tree_targets: bool = False,
) -> Seq2SeqData:
  """Training pairs and evaluation sets of `config.data` (module docstring);
  `target_order` is the target traversal of generated trees (for2lam) and
  of logical forms read as trees; `tree_tokens` how generated trees are
  written (`for2lam.TOKENS`); `tree_targets`: logical forms are the model's
  targets as annotated linearisations (the tree decoder's; 'arity' tokens
  only)."""
  c = data_config
  split = config_lib.resolved_split(c)
  config_lib.check_data_files(c)
  notes = []
  categories = {}
  if c.dataset == "for2lam":
    sets = for2lam_lib.generate_sets(
        split,
        c.num_train,
        c.num_test,
        seed=0,
        target_order=target_order,
        tokens=tree_tokens,
    )
    lo, hi = for2lam_lib.LENGTHS[split]
    data = Seq2SeqData(
        sets["train"],
        {"iid": sets["test"]},
        f"For2Lam {split} ({lo}-{hi} FOR nodes), target {target_order}, "
        f"tokens {tree_tokens}",
        [
            f"generated: {c.num_train} train / {c.num_test} test distinct "
            "programs, seed 0 (relational_jax.data.for2lam)."
        ],
    )
    data.check()
    return data
  if c.dataset == "scan":
    scan_dir = os.path.join(c.data_dir, "scan")
    order, data_dir = None, None
    if split == "length_cutoff" and c.scan_official_order:
      order = scan_lib.read_scan_file(os.path.join(scan_dir, "tasks.txt"))
      notes.append("IID hold-out drawn from the tasks.txt line order.")
    elif split in ("simple", "length"):
      data_dir = scan_dir
      files = scan_lib.official_files(split, scan_dir)
      if files is not None:
        notes.append(
            f"SCAN {split}: the official files "
            f"{files['train']} and {files['test']}."
        )
      else:
        names = " / ".join(scan_lib.OFFICIAL_FILES[split].values())
        notes.append(
            f"SCAN {split}: generated from the grammar ({names} not found in "
            f"{scan_dir})"
            + (
                "; a seeded 80/20 draw whose membership differs from the "
                "official split."
                if split == "simple"
                else "; equal, as sets, to the official split."
            )
        )
    parts = scan_lib.split(split, c.cutoff, order=order, data_dir=data_dir)
    if split == "length_cutoff":
      evals = {"iid": parts["iid"], "gen": parts["test"]}
      description = f"SCAN length_cutoff={c.cutoff}"
    elif split == "simple":
      evals = {"iid": parts["test"]}
      description = "SCAN simple"
    else:
      evals = {"gen": parts["test"]}
      description = f"SCAN {split}"
    train = parts["train"]
  else:
    directory = config_lib.tsv_directory(c)
    fmt = c.target_format if c.dataset == "tsv" else "text"
    if fmt != "text":
      if tree_targets and tree_tokens != "arity":
        raise ValueError(
            f"transformer.tree_tokens={tree_tokens!r}: logical forms "
            f"(data.target_format={c.target_format!r}) are tree targets in "
            "'arity' tokens only; set transformer.tree_tokens='arity'."
        )
      return _load_logical_forms(c, directory, target_order, tree_targets)
    train, evals = None, {}
    for name, role in config_lib.TSV_FILES.items():
      path = os.path.join(directory, name)
      if not os.path.isfile(path):
        continue
      rows = tsv_lib.load_tsv(path, with_type=True)
      pairs = [(r.source, r.target) for r in rows]
      if role == "train":
        train = pairs
      elif pairs:
        evals[role] = pairs
        if role in CATEGORY_SETS and rows[0].type is not None:
          categories[role] = [r.type for r in rows]
    if c.dataset == "tsv" and c.holdout_val:
      kept, held = semparse_lib.split_holdout(len(train), c.holdout_val)
      evals["iid_val"] = [train[i] for i in held]
      train = [train[i] for i in kept]
      notes.append(_holdout_note(c.holdout_val, directory))
    if "gen" not in evals:
      notes.append(
          f"no generalisation set ({directory}/gen.tsv is absent): "
          "only IID accuracies are reported."
      )
    description = f"{c.dataset} {directory}"
  evals = {k: v for k, v in evals.items() if v}
  data = Seq2SeqData(train, evals, description, notes, categories)
  data.check()
  return data


def _holdout_note(size: int, directory: str) -> str:
  return (
      f"iid_val: {size} rows of {directory}/train.tsv held out "
      "(semparse.split_holdout, numpy default_rng(0)); trained on the rest."
  )


def _load_logical_forms(
    c, directory: str, target_order: str, tree_targets: bool
) -> Seq2SeqData:
  """`load_data` of a TSV directory whose targets are logical forms in
  `c.target_format` (module docstring)."""
  fmt = c.target_format
  target = lambda tree, text: (
      semparse_lib.tree_tokens(tree, target_order)
      if tree_targets
      else " ".join(semparse_lib.tokenize(text))
  )
  lexicon = (
      semparse_lib.read_lexicon(c.entity_lexicon) if c.entity_lexicon else None
  )
  sets, notes = {}, []  # role -> (pairs, gold, sentences, entities)
  files = {}
  for name, role in config_lib.TSV_FILES.items():
    path = os.path.join(directory, name)
    if not os.path.isfile(path):
      continue
    forms = semparse_lib.load_logical_forms(path, fmt)
    rows = []
    for source, tree, text in zip(forms.sources, forms.trees, forms.targets):
      entities = {}
      if lexicon is not None:
        source, form, entities = semparse_lib.anonymize(source, text, lexicon)
        tree = semparse_lib.parse(form, fmt)
      else:
        form = text
      rows.append(((source, target(tree, form)), entities))
    sets[role] = (
        [r[0] for r in rows],
        forms.targets,
        forms.sources,
        [r[1] for r in rows],
    )
    if role != "train":
      files[role] = os.path.splitext(name)[0]
  if c.holdout_val:
    kept, held = semparse_lib.split_holdout(
        len(sets["train"][0]), c.holdout_val
    )
    sets["iid_val"] = tuple([part[i] for i in held] for part in sets["train"])
    sets["train"] = tuple([part[i] for i in kept] for part in sets["train"])
    files["iid_val"] = "train_holdout"
    notes.append(_holdout_note(c.holdout_val, directory))
  if lexicon is not None:
    written_out = sum(
        1
        for role, (pairs, *_) in sets.items()
        for _, t in pairs
        for token in t.split()
        if ":_" in token and not token.startswith("_")
    )
    notes.append(
        f"entities anonymised through {c.entity_lexicon} "
        "(semparse.anonymize; the gold form's entities, test rows too); "
        f"{written_out} entity tokens of all sets left written out (no "
        "lexicon phrase in the sentence); predictions mapped back and scored "
        "against the files' forms."
    )
  evals = {r: v for r, v in sets.items() if r != "train"}
  train = sets["train"][0]
  notes.append(
      f"targets: {fmt} logical forms as "
      + (
          f"annotated {target_order} tree linearisations (tree decoder)"
          if tree_targets
          else "token sequences"
      )
      + "; scored on the logical forms: exact match of the tokens and tree "
      "match (order-free and/or), "
      + (
          "variables renamed in order of first appearance "
          "(semparse.rename_variables)."
          if fmt == "sexpr"
          else "variables as written."
      )
  )
  data = Seq2SeqData(
      train,
      {r: v[0] for r, v in evals.items()},
      f"tsv {directory} ({fmt} trees"
      + (", entities anonymised)" if lexicon is not None else ")"),
      notes,
      target_format=fmt,
      tree_targets=tree_targets,
      tree_order=target_order,
      gold={r: v[1] for r, v in evals.items()},
      files=files,
      sentences={r: v[2] for r, v in evals.items()},
      entities=(
          {r: v[3] for r, v in evals.items()} if lexicon is not None else {}
      ),
  )
  data.check()
  return data


def subset_indices(num: int, limit: int) -> np.ndarray:
  """Sorted indices of a fixed random subset of `limit` of `num` rows (all
  if limit <= 0 or limit >= num)."""
  if limit <= 0 or limit >= num:
    return np.arange(num)
  return np.sort(np.random.default_rng(0).choice(num, limit, replace=False))


def subset(pairs: Pairs, limit: int) -> Pairs:
  """A fixed random subset of `limit` pairs (all if limit <= 0): the rows
  `subset_indices(len(pairs), limit)`."""
  return [pairs[i] for i in subset_indices(len(pairs), limit)]


def target_arities(tgt_vocab: Vocab, side: str = "target") -> np.ndarray:
  """Arity of every vocabulary entry for positions='tree' (`side`: which
  sequences, in messages): tokens must be annotated 'symbol/arity'
  (tree.annotate); specials have 0."""
  arities = np.zeros(len(tgt_vocab), np.int32)
  for i, token in enumerate(tgt_vocab.tokens):
    if i < 4:  # PAD, BOS, EOS, UNK.
      continue
    try:
      arities[i] = tree_lib.split_annotation(token)[1]
    except ValueError as e:
      raise ValueError(
          f"positions='tree' needs {side}s that are trees linearised with "
          "annotated tokens 'symbol/arity' (tree.annotate, tree.linearize); "
          f"{side} token {token!r} is not annotated. Use positions "
          "'absolute' or 'relative' for plain sequences, or read logical "
          "forms as trees (data.target_format, dataset 'tsv')."
      ) from e
  return arities


@dataclasses.dataclass
class EncodedSet:
  """Fixed-shape arrays of one set: src NxS, tgt_in/tgt_out NxT (tgt_out
  ends with EOS, then PAD; tgt_in starts with `start_id`, the token greedy
  decoding starts from). With `tree_args` (positions='tree'), the tree
  positions of a batch are computed when asked for (`tree_extras`): stored
  for every example they would take N x T x 2k floats."""

  src: np.ndarray
  tgt_in: np.ndarray
  tgt_out: np.ndarray
  tree_args: Optional[Dict] = None
  start_id: int = BOS_ID

  def __len__(self):
    return self.src.shape[0]

  def tree_extras(self, indices, strict: bool = True) -> Dict[str, np.ndarray]:
    """{'tgt_tree_pos': BxTxP decoder-input positions (tree.decoder_positions
    alignment `tree_args['alignment']`), and with `tree_args['src_arities']`
    'src_tree_pos': BxSxP source-node positions (DFS, tree.node_positions)}
    for rows `indices`; {} without tree_args. strict: a sequence that is not
    one tree of depth <= k raises (training data); not strict for model
    inputs that may hold unknown tokens (evaluation sources)."""
    a = self.tree_args
    if a is None:
      return {}
    k = a["k"]
    lcrs = a.get("tokens", "arity") != "lcrs_null"
    out = {}
    tgt_BxTxP = np.zeros(self.tgt_out[indices].shape + (2 * k,), np.float32)
    for row, i in enumerate(np.asarray(indices).reshape(-1)):
      tokens = self.tgt_out[i]
      num = (
          int(np.argmax(tokens == EOS_ID)) if EOS_ID in tokens else len(tokens)
      )
      nodes_NxP = tree_lib.node_positions(
          a["arities"][tokens[:num]],
          a["order"],
          k,
          what=f"target row {i}",
          strict=strict,
          lcrs=lcrs,
      )
      if a["alignment"] == "next":
        tgt_BxTxP[row, :num] = nodes_NxP
      else:  # 'output': start token zero, input t at node t - 1.
        width = min(num, tgt_BxTxP.shape[1] - 1)
        tgt_BxTxP[row, 1 : 1 + width] = nodes_NxP[:width]
    out["tgt_tree_pos"] = tgt_BxTxP
    if a.get("src_arities") is not None:
      src_BxSxP = np.zeros(self.src[indices].shape + (2 * k,), np.float32)
      for row, i in enumerate(np.asarray(indices).reshape(-1)):
        tokens = self.src[i]
        num = int(np.sum(tokens != PAD_ID))
        src_BxSxP[row, :num] = tree_lib.node_positions(
            a["src_arities"][tokens[:num]],
            "dfs",
            k,
            what=f"source row {i}",
            strict=strict,
            lcrs=lcrs,
        )
      out["src_tree_pos"] = src_BxSxP
    return out


def num_source_markers(source_markers: str) -> int:
  """Tokens `source_markers` adds to every source (see `encode_set`)."""
  return {"none": 0, "eos": 1, "bos_eos": 2}[source_markers]


def encode_set(
    pairs: Pairs,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    src_len: int,
    tgt_len: int,
    tree_args: Optional[Dict] = None,
    source_markers: str = "none",
    target_start: str = "bos",
) -> EncodedSet:
  """Encodes pairs to src (len src_len) and tgt_in/tgt_out (len tgt_len).

  source_markers: 'none' encodes the bare source; 'eos' appends EOS;
  'bos_eos' also prepends BOS, as Csordas et al.'s code feeds its encoder
  (their interface appends EOS, their TransformerEncDecModel prepends an
  encoder SOS). src_len counts the markers.
  target_start: the decoder's first input, 'bos' or 'eos' (Csordas et
  al.'s code: one SOS/EOS token, so the start is the EOS token).

  tree_args (positions='tree'): {'arities': per target token, 'order',
  'k', 'alignment' (tree.ALIGNMENTS; default 'output'), 'tokens'
  (tree.TREE_TOKENS; default 'arity': arities of general trees, positions
  in their LCRS binarisation; 'lcrs_null': arities of the binary trees
  themselves, tree.linearize_lcrs_null), optional 'src_arities': per
  source token (tree_encoder)}; see
  `EncodedSet.tree_extras`."""
  shapes.check_choice(
      source_markers, config_lib.SOURCE_MARKERS, "source_markers"
  )
  shapes.check_choice(target_start, config_lib.TARGET_STARTS, "target_start")
  if (
      source_markers != "none"
      and (tree_args or {}).get("src_arities") is not None
  ):
    raise ValueError(
        f"source_markers={source_markers!r} has no tree "
        "position: a tree encoder needs source_markers='none'."
    )
  src, _ = src_vocab.encode_batch(
      [s for s, _ in pairs],
      length=src_len,
      add_bos=source_markers == "bos_eos",
      add_eos=source_markers != "none",
  )
  full, _ = tgt_vocab.encode_batch(
      [t for _, t in pairs], add_bos=True, add_eos=True, length=tgt_len + 1
  )
  if tree_args is not None:
    tree_args = dict(tree_args)
    tree_args.setdefault("alignment", "output")
    shapes.check_choice(
        tree_args["alignment"], tree_lib.ALIGNMENTS, "tree alignment"
    )
  start_id = BOS_ID if target_start == "bos" else EOS_ID
  tgt_in = full[:, :-1].copy()
  tgt_in[:, 0] = start_id
  return EncodedSet(src, tgt_in, full[:, 1:], tree_args, start_id)
