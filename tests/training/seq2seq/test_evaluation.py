"""relational_jax.training.seq2seq.evaluation: per-row exact match, the UNK
rule and per-category accuracies (a table-lookup model, no training)."""

import jax
import numpy as np
import pytest

from relational_jax.data.vocab import UNK_ID, Vocab
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
