"""relational_jax.training.seq2seq.evaluation: per-row exact match, the UNK
rule and per-category accuracies (a table-lookup model, no training)."""

import jax
import numpy as np
import pytest

from relational_jax.data.vocab import EOS_ID, UNK_ID, Vocab
from relational_jax.parallel import mesh as mesh_lib
from relational_jax.training import seq2seq
from relational_jax.training.seq2seq import evaluation


class LookupModel:
  """greedy_decode answers from a {source ids: output ids} table."""

  def __init__(self, table):
    self.table = table

  def greedy_decode(
      self, params, src_BxS, max_len, bos, eos, *, src_mask_BxS=None
  ):
    out = np.zeros((src_BxS.shape[0], max_len), np.int32)
    for b, row in enumerate(np.asarray(src_BxS)):
      ids = self.table[tuple(int(t) for t in row if t)] + [eos]
      out[b, : len(ids)] = ids[:max_len]
    return out


def test_exact_match_rows_unknown_target_and_categories():
  train = [("a", "A"), ("b", "B"), ("a b", "A B")]
  src_vocab = Vocab.build(s for s, _ in train)
  tgt_vocab = Vocab.build(t for _, t in train)
  # 'c' and 'C' are unseen in training: they encode to UNK.
  evals = [("a", "A"), ("b", "B"), ("a b", "B A"), ("c", "C"), ("b a", "B A")]
  categories = ["x", "x", "y", "y", "y"]
  eval_set = seq2seq.encode_set(evals, src_vocab, tgt_vocab, 2, 3)
  assert eval_set.src[3, 0] == UNK_ID and eval_set.tgt_out[3, 0] == UNK_ID
  ids = lambda vocab, text: vocab.encode(text)
  table = {
      tuple(ids(src_vocab, "a")): ids(tgt_vocab, "A"),
      tuple(ids(src_vocab, "b")): ids(tgt_vocab, "B"),
      tuple(ids(src_vocab, "a b")): ids(tgt_vocab, "A B"),  # Wrong.
      # The model emits UNK for an unseen target token: still wrong.
      (UNK_ID,): [UNK_ID],
      tuple(ids(src_vocab, "b a")): ids(tgt_vocab, "B A"),
  }
  mesh = mesh_lib.make_data_mesh(jax.devices()[:1])
  rows = evaluation.exact_match_rows(
      LookupModel(table), None, eval_set, 3, 2, mesh
  )
  np.testing.assert_array_equal(rows, [True, True, False, False, True])
  assert evaluation.exact_match(
      LookupModel(table), None, eval_set, 3, 2, mesh
  ) == pytest.approx(0.6)
  by_category = evaluation.accuracy_by_category(rows, categories)
  assert by_category == {"x": 1.0, "y": pytest.approx(1 / 3)}
  counts = {"x": 2, "y": 3}
  assert sum(
      by_category[k] * n for k, n in counts.items()
  ) / 5 == pytest.approx(rows.mean())
  with pytest.raises(ValueError, match="4 categories for 5 rows"):
    evaluation.accuracy_by_category(rows, categories[:4])
  for width in (1, 2):  # 1 would broadcast, 2 fail on shapes: both named.
    with pytest.raises(ValueError, match=rf"decode_len={width} must equal"):
      evaluation.exact_match_rows(
          LookupModel(table), None, eval_set, width, 2, mesh
      )


def _authors_scoring(pred_NxT, tgt_NxT, batch_size):
  """Csordas et al.'s scoring, step by step: per batch, `max_len` decoding
  steps (the longest target, EOS not counted), the decoded length as their
  `run_greedy` counts it, then `compare_direct`."""
  ok = []
  for start in range(0, len(tgt_NxT), batch_size):
    pred, tgt = (
        pred_NxT[start : start + batch_size],
        tgt_NxT[start : start + batch_size],
    )
    ref_len = [list(row).index(EOS_ID) for row in tgt]
    max_len = max(ref_len)
    for p, t, n in zip(pred, tgt, ref_len):
      running, out_len = True, 0
      for i in range(max_len):
        running = running and p[i] != EOS_ID
        if running:
          out_len = i + 1
      tokens_ok = all(p[i] == t[i] for i in range(min(n, max_len)))
      ok.append(tokens_ok and out_len == n and UNK_ID not in t)
  return np.array(ok)


def test_batch_longest_matches_equals_the_authors_scoring():
  rng = np.random.default_rng(0)
  n, width = 37, 9
  tgt = np.zeros((n, width), np.int32)
  for row, length in enumerate(rng.integers(1, width, n)):
    tgt[row, :length] = rng.integers(4, 6, length)
    tgt[row, length] = EOS_ID
  # Predictions (PAD after EOS, as greedy decoding's): the target, then a
  # few kinds of damage (a wrong token, EOS late, early or missing).
  pred = tgt.copy()
  for row in range(n):
    length = list(tgt[row]).index(EOS_ID)
    kind = row % 5
    if kind == 1:
      pred[row, rng.integers(0, length)] ^= 1
    elif kind == 2 and length + 1 < width:
      pred[row, length], pred[row, length + 1] = 4, EOS_ID
    elif kind == 3 and length > 1:
      pred[row, length - 1], pred[row, length] = EOS_ID, 0
    elif kind == 4:  # No EOS: the pattern goes on (as SCAN's errors).
      pred[row, length:] = pred[row, length - 1]
  tgt[5, 0] = UNK_ID
  for batch_size in (1, 4, 8, n):
    np.testing.assert_array_equal(
        evaluation.batch_longest_matches(pred, tgt, batch_size),
        _authors_scoring(pred, tgt, batch_size),
    )
  strict = evaluation.row_matches(pred, tgt)
  loose = evaluation.batch_longest_matches(pred, tgt, n)
  assert np.all(strict <= loose) and np.any(loose & ~strict)
  longest = (
      evaluation.target_lengths(tgt) == evaluation.target_lengths(tgt).max()
  )
  assert not np.any(loose[~longest] != strict[~longest])


def test_batch_longest_matches_forgives_only_the_final_eos():
  eos, pad = EOS_ID, 0
  tgt = np.array([[4, 5, 4, eos], [4, 5, eos, pad], [5, 5, 5, eos]])
  pred = np.array([[4, 5, 4, 4], [4, 5, 5, eos], [5, eos, pad, pad]])
  np.testing.assert_array_equal(evaluation.row_matches(pred, tgt), [0, 0, 0])
  # Row 0 is of the longest length and right but for its missing EOS; row 1
  # (shorter) must end with EOS; row 2 stops early.
  np.testing.assert_array_equal(
      evaluation.batch_longest_matches(pred, tgt, 3), [1, 0, 0]
  )
  # In batches of one, every row is its batch's longest: row 1's two
  # tokens are right.
  np.testing.assert_array_equal(
      evaluation.batch_longest_matches(pred, tgt, 1), [1, 1, 0]
  )
  with pytest.raises(ValueError, match="must equal the targets"):
    evaluation.row_matches(pred[:, :3], tgt)
