"""Exact match of greedy decoding, and the model-selection set.

Exact match compares the greedy decoding (EOS included, PAD after it) with
the target row by row. The model is called as `model.greedy_decode(params,
src_BxS, max_len, bos, eos, src_mask_BxS=...)` (plus `arities=` for tree
positions) and returns BxL int tokens.

Model selection (`config.train.select_on`): 'auto' selects on 'gen_val' when
the data has one and otherwise keeps the LAST evaluated step (not the best
IID step: Csordas et al. 2021 sec. 3.2 show that IID accuracy saturates
early and early stopping on it hurts generalisation). So SCAN length_cutoff
and COGS (whose dev set is IID) select the last step by default;
'iid' or 'iid_val' select on IID accuracy instead, on request.
"""

from typing import Dict, Iterable, Optional

import jax
import numpy as np
from jax.experimental import multihost_utils

from relational_jax.data.vocab import BOS_ID, EOS_ID, PAD_ID
from relational_jax.training import mesh as mesh_lib
from relational_jax.training.seq2seq.data import EncodedSet


def exact_match(model, params, eval_set: EncodedSet, decode_len: int,
                batch_size: int, mesh,
                arities: Optional[np.ndarray] = None) -> float:
  """Exact-match accuracy of greedy decoding on `eval_set`, in batches of
  `batch_size` (the last one padded with repeats of its first row)."""
  s = eval_set
  extras = {} if arities is None else {"arities": arities.tolist()}
  correct = 0
  for start in range(0, len(s), batch_size):
    idx = np.arange(start, min(start + batch_size, len(s)))
    real = len(idx)
    idx = np.concatenate([idx, np.full(batch_size - real, idx[0])])
    src = mesh_lib.shard_batch(s.src[idx], mesh)
    pred = model.greedy_decode(params, src, decode_len, BOS_ID, EOS_ID,
                               src_mask_BxS=src != PAD_ID, **extras)
    if jax.process_count() > 1:  # Gather the other processes' rows.
      pred = multihost_utils.process_allgather(pred, tiled=True)
    pred = np.asarray(pred)[:real]
    correct += int(np.all(pred == s.tgt_out[idx[:real]], axis=1).sum())
  return correct / len(s)


def selection_set(select_on: str, eval_sets: Iterable[str]) -> Optional[str]:
  """Evaluation set used for model selection (None: the last step)."""
  eval_sets = sorted(eval_sets)
  if select_on == "auto":
    return "gen_val" if "gen_val" in eval_sets else None
  if select_on == "last":
    return None
  if select_on not in eval_sets:
    raise ValueError(f"select_on={select_on!r} but this data has no "
                     f"{select_on!r} set; available sets: {eval_sets}.")
  return select_on


def score_is_better(score: Optional[float], best: Optional[Dict]) -> bool:
  """Whether a step with `score` (None: select the last step) replaces the
  `best` record."""
  return score is None or best is None or score > best["score"]
