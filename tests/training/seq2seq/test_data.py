"""relational_jax.training.seq2seq.data: TSV loading and the batch stream."""

import numpy as np
import pytest

from relational_jax.training import seq2seq
from tests.training.seq2seq.common import tiny


def test_tsv_data_and_a_missing_column(tmp_path):
  good = tmp_path / "good"
  good.mkdir()
  (good / "train.tsv").write_text("a b\tA B\nb\tB\n")
  (good / "test.tsv").write_text("a\tA\n")
  (good / "gen.tsv").write_text("b a b\tB A B\n")
  data = seq2seq.load_data(tiny({"data.dataset": "tsv", "data.split": "",
                                 "data.data_path": str(good)}).data)
  assert data.train == [("a b", "A B"), ("b", "B")]
  assert data.evals == {"iid": [("a", "A")], "gen": [("b a b", "B A B")]}

  bad = tmp_path / "bad"
  bad.mkdir()
  (bad / "train.tsv").write_text("a b\tA B\nb B\n")
  with pytest.raises(ValueError, match=r"train.tsv, line 2: found 1 column\(s\), expected 2"):
    seq2seq.train_and_evaluate(
        tiny({"data.dataset": "tsv", "data.split": "",
              "data.data_path": str(bad)}), str(tmp_path / "run"))


def test_user_data_is_checked():
  with pytest.raises(ValueError, match=r"unknown evaluation set\(s\) \['test'\]; valid names are \['iid', 'gen', 'iid_val', 'gen_val'\]"):
    seq2seq.Seq2SeqData([("a", "A")], {"test": [("a", "A")]}).check()
  with pytest.raises(ValueError, match="user data: the training set is empty"):
    seq2seq.Seq2SeqData([], {"iid": [("a", "A")]}).check()


def test_batch_stream_is_resumable():
  a = seq2seq.BatchStream(10, 4, seed=1)
  first = [a.next_indices() for _ in range(3)]  # 2 per epoch: crosses epochs.
  assert a.get_state()["epoch"] == 1
  b = seq2seq.BatchStream(10, 4, seed=1)
  b.next_indices()
  c = seq2seq.BatchStream(10, 4, seed=1)
  c.set_state(b.get_state())
  np.testing.assert_array_equal(c.next_indices(), first[1])
  np.testing.assert_array_equal(c.next_indices(), first[2])
  with pytest.raises(ValueError, match="batch size 11 is larger than the training set"):
    seq2seq.BatchStream(10, 11, seed=1)
