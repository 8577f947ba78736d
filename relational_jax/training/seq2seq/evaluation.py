"""Exact match of greedy decoding (total and per category), and the
model-selection set.

Exact match compares the greedy decoding (EOS included, PAD after it) with
the target row by row. The model is called as `model.greedy_decode(params,
src_BxS, max_len, bos, eos, src_mask_BxS=...)` (plus `arities=` for tree
positions and `src_tree_pos_BxSxP=` for a tree encoder) and returns BxL
int tokens.

Unknown tokens: the vocabularies are built from the training pairs, so an
evaluation token never seen in training encodes to UNK (`Vocab.encode`). A
source UNK is simply an input the model has to cope with; a target row
holding UNK cannot be reproduced and is scored as wrong, even where the
model happens to emit UNK at that position.

Per category: evaluation sets with categories (`Seq2SeqData.categories`,
e.g. the 21 COGS generalisation categories) are also scored per category,
`accuracy_by_category(correct, categories)`; the count-weighted mean of the
per-category accuracies is the set's total exact match.

Csordas et al.'s code scores a row of its evaluation batch's longest
target without its final EOS (`batch_longest_matches`). Training-time
evaluation is strict; with `config.train.csordas_batch_size` > 0 it also
reports every set their way (`<set>_csordas`, from the same decodings),
and `loop.evaluate_checkpoint` (`experiments.seq2seq_evaluate`) scores a
saved checkpoint both ways.

Logical forms (`Seq2SeqData.target_format` other than 'text', e.g. the
semantic-parsing sets of Shiv & Quirk's Table 1): each decoding is turned
back into the file's logical-form syntax (`decoded_logical_form`: a tree
decoder's annotated tokens rebuilt into a tree and written out, a sequence
decoder's tokens as they are) and compared with the form as its file writes
it (`logical_form_scores`): '<set>' is the exact match of the token
sequences, '<set>_tree' Dong & Lapata's tree accuracy (children of and/or
order-free), both after renaming s-expression variables in order of first
appearance as Unimer's evaluation does (`relational_jax.data.semparse`).
A tree decoding that is not one well-formed tree is wrong on both.

Model selection (`config.train.select_on`): 'auto' selects on 'gen_val' when
the data has one and otherwise keeps the LAST evaluated step (not the best
IID step: Csordas et al. 2021 sec. 3.2 show that IID accuracy saturates
early and early stopping on it hurts generalisation). So SCAN length_cutoff
and COGS (whose dev set is IID) select the last step by default;
'iid' or 'iid_val' select on IID accuracy instead, on request.
"""

from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import jax
import numpy as np
from jax.experimental import multihost_utils

from relational_jax.data import semparse
from relational_jax.data.vocab import EOS_ID, PAD_ID, UNK_ID, Vocab
from relational_jax.layers import tree as tree_lib
from relational_jax.parallel import mesh as mesh_lib
from relational_jax.training import trainer
from relational_jax.training.seq2seq.data import EncodedSet


def greedy_rows(
    model,
    params,
    eval_set: EncodedSet,
    decode_len: int,
    batch_size: int,
    mesh,
    arities: Optional[np.ndarray] = None,
) -> np.ndarray:
  """Greedy decodings (int, N x `decode_len`: EOS, then PAD) of `eval_set`,
  in batches of `batch_size` (`trainer.map_rows`)."""
  s = eval_set
  extras = {} if arities is None else {"arities": arities.tolist()}

  def decode(idx):
    src = mesh_lib.shard_batch(s.src[idx], mesh)
    tree = s.tree_extras(idx, strict=False)  # Sources may hold UNK.
    src_tree = {
        f"{k}_BxSxP": mesh_lib.shard_batch(v, mesh)
        for k, v in tree.items()
        if k == "src_tree_pos"
    }
    pred = model.greedy_decode(
        params,
        src,
        decode_len,
        s.start_id,
        EOS_ID,
        src_mask_BxS=src != PAD_ID,
        **extras,
        **src_tree,
    )
    if jax.process_count() > 1:  # Gather the other processes' rows.
      pred = multihost_utils.process_allgather(pred, tiled=True)
    return np.asarray(pred)

  return trainer.map_rows(decode, len(s), batch_size)


def row_matches(pred_NxT: np.ndarray, tgt_NxT: np.ndarray) -> np.ndarray:
  """Per-row exact match (bool, N): the whole row, EOS and the PAD after it
  included; a target row holding UNK is never a match (module docstring)."""
  if pred_NxT.shape != tgt_NxT.shape:
    raise ValueError(
        f"decodings of shape {pred_NxT.shape} must equal the targets' "
        f"{tgt_NxT.shape} (whole rows are compared, EOS and padding "
        "included)."
    )
  return np.all(pred_NxT == tgt_NxT, axis=1) & ~np.any(
      tgt_NxT == UNK_ID, axis=1
  )


def target_lengths(tgt_NxT: np.ndarray) -> np.ndarray:
  """Tokens before each target row's EOS (int, N)."""
  return np.argmax(tgt_NxT == EOS_ID, axis=1)


def batch_longest_matches(
    pred_NxT: np.ndarray, tgt_NxT: np.ndarray, batch_size: int
) -> np.ndarray:
  """Per-row exact match as Csordas et al.'s code scores it (bool, N).

  Their evaluation decodes a batch greedily for as many steps as its
  longest target has tokens, EOS not counted (`run_greedy(max_len=
  out_len.max())`), and a row is right when its tokens match and its
  decoded length, the steps before the first EOS or all of them, equals
  the target's (`SequenceTestState.compare_direct`). So the rows of a
  batch's longest target length are right without emitting EOS after
  their last token; every other row is scored as `row_matches`. Batches
  are consecutive runs of `batch_size` rows in set order, as their
  unshuffled evaluation loader (their SCAN profile: 2048 rows)."""
  ok_N = row_matches(pred_NxT, tgt_NxT)
  len_N = target_lengths(tgt_NxT)
  for start in range(0, len(tgt_NxT), batch_size):
    rows = np.arange(start, min(start + batch_size, len(tgt_NxT)))
    longest = len_N[rows].max()
    rows = rows[len_N[rows] == longest]
    ok_N[rows] = np.all(
        pred_NxT[rows, :longest] == tgt_NxT[rows, :longest], axis=1
    ) & ~np.any(tgt_NxT[rows] == UNK_ID, axis=1)
  return ok_N


def exact_match_rows(
    model,
    params,
    eval_set: EncodedSet,
    decode_len: int,
    batch_size: int,
    mesh,
    arities: Optional[np.ndarray] = None,
) -> np.ndarray:
  """Per-row exact match (bool, N) of greedy decoding on `eval_set`
  (`greedy_rows`, `row_matches`)."""
  if decode_len != eval_set.tgt_out.shape[1]:
    raise ValueError(
        f"decode_len={decode_len} must equal the target width "
        f"{eval_set.tgt_out.shape[1]} of the evaluation set (whole rows are "
        "compared, EOS and padding included)."
    )
  pred_NxT = greedy_rows(
      model, params, eval_set, decode_len, batch_size, mesh, arities
  )
  return row_matches(pred_NxT, eval_set.tgt_out)


def exact_match(
    model,
    params,
    eval_set: EncodedSet,
    decode_len: int,
    batch_size: int,
    mesh,
    arities: Optional[np.ndarray] = None,
) -> float:
  """Exact-match accuracy of greedy decoding on `eval_set` (the mean of
  `exact_match_rows`)."""
  return float(
      np.mean(
          exact_match_rows(
              model, params, eval_set, decode_len, batch_size, mesh, arities
          )
      )
  )


def accuracy_by_category(
    correct: Sequence[bool], categories: Sequence[str]
) -> Dict[str, float]:
  """{category: exact match of its rows}, categories sorted by name.

  Args:
    correct: per-row exact match (`exact_match_rows`).
    categories: the category of each row (same length).
  """
  correct = np.asarray(correct, bool)
  if len(categories) != len(correct):
    raise ValueError(f"{len(categories)} categories for {len(correct)} rows.")
  cats = np.asarray(categories, dtype=object)
  return {
      str(k): float(np.mean(correct[cats == k]))
      for k in sorted(set(categories))
  }


def selection_set(select_on: str, eval_sets: Iterable[str]) -> Optional[str]:
  """Evaluation set used for model selection (None: the last step)."""
  eval_sets = sorted(eval_sets)
  if select_on == "auto":
    return "gen_val" if "gen_val" in eval_sets else None
  if select_on == "last":
    return None
  if select_on not in eval_sets:
    raise ValueError(
        f"select_on={select_on!r} but this data has no "
        f"{select_on!r} set; available sets: {eval_sets}."
    )
  return select_on


def decoded_tokens(pred_T: np.ndarray, vocab: Vocab) -> List[str]:
  """The tokens of one greedy decoding, up to its first EOS. Unlike
  `Vocab.decode_tokens` it keeps a decoded BOS: a wrong token, not one to
  drop before scoring."""
  out = []
  for t in np.asarray(pred_T).tolist():
    if t in (EOS_ID, PAD_ID):
      break
    out.append(vocab.id_to_token(int(t)))
  return out


def decoded_logical_form(
    tokens: Sequence[str], fmt: str, tree_targets: bool, order: str = "dfs"
) -> Tuple[str, bool]:
  """(logical form in syntax `fmt`, well formed) of a decoding's `tokens`:
  a tree decoder's annotated tokens ('symbol/arity', `tree_targets`)
  rebuilt into a tree (`tree.tree_from_annotated` in `order`) and written
  out (`semparse.to_string`); a sequence decoder's tokens joined. A tree
  decoding that is not one tree (or a Prolog operator with the wrong
  number of children) gives its tokens joined and False."""
  if not tree_targets:
    return " ".join(tokens), True
  try:
    tree = tree_lib.tree_from_annotated(list(tokens), order)
    return semparse.to_string(tree, fmt), True
  except ValueError:
    return " ".join(tokens), False


def logical_form_scores(
    predicted: Sequence[str],
    gold: Sequence[str],
    fmt: str,
    well_formed: Optional[Sequence[bool]] = None,
) -> Dict[str, np.ndarray]:
  """{'exact': bool N, 'tree': bool N}: per row, `semparse.exact_match`
  (token sequences, s-expression variables renamed in order of first
  appearance) and `semparse.tree_match` (Dong & Lapata's tree accuracy) of
  the predicted against the gold logical forms; a row not `well_formed`
  is wrong on both."""
  if len(predicted) != len(gold):
    raise ValueError(
        f"{len(predicted)} predictions for {len(gold)} gold logical forms."
    )
  ok = (
      np.ones(len(gold), bool)
      if well_formed is None
      else np.asarray(well_formed, bool)
  )
  exact = np.array(
      [semparse.exact_match(p, g, fmt) for p, g in zip(predicted, gold)], bool
  )
  tree = np.array(
      [semparse.tree_match(p, g, fmt) for p, g in zip(predicted, gold)], bool
  )
  return {"exact": exact & ok, "tree": tree & ok}
