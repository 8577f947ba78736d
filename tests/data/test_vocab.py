"""Tests for the whitespace tokeniser / vocabulary."""

import json

import numpy as np
import pytest

from relational_jax.data import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Vocab


@pytest.fixture
def vocab():
  return Vocab.build(["jump twice", "walk left after jump", ["look", "twice"]])


def test_ids_are_deterministic(vocab):
  assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
  assert vocab.tokens == [
      "<pad>",
      "<bos>",
      "<eos>",
      "<unk>",
      "after",
      "jump",
      "left",
      "look",
      "twice",
      "walk",
  ]
  assert Vocab.build(["walk left after jump", "look twice jump"]) == vocab
  assert len(vocab) == 10 and "jump" in vocab and "run" not in vocab


def test_encode_decode_round_trip(vocab):
  ids = vocab.encode("walk left after jump twice")
  assert ids == [9, 6, 4, 5, 8]
  assert vocab.decode(ids) == "walk left after jump twice"
  full = vocab.encode("jump twice", add_bos=True, add_eos=True)
  assert full == [BOS_ID, 5, 8, EOS_ID]
  assert vocab.decode(full) == "jump twice"
  assert vocab.decode(full, skip_special=False) == "<bos> jump twice <eos>"
  assert vocab.decode([5, EOS_ID, 8]) == "jump"  # stops at EOS
  assert vocab.decode([5, EOS_ID, 8], stop_at_eos=False) == "jump twice"
  assert vocab.decode(np.array([5, 8, 0, 0], dtype=np.int32)) == "jump twice"


def test_unknown_tokens(vocab):
  assert vocab.encode("run twice") == [UNK_ID, 8]
  assert vocab.decode(vocab.encode("run twice")) == "<unk> twice"
  with pytest.raises(ValueError, match="out of range"):
    vocab.decode([99])


def test_unknown_tokens_at_evaluation_map_to_unk(vocab):
  # Tokens of an evaluation set that the training data never had.
  assert "run" not in vocab and vocab.token_to_id("run") == UNK_ID
  assert vocab.encode(["fly", "twice"], add_bos=True, add_eos=True) == [
      BOS_ID,
      UNK_ID,
      8,
      EOS_ID,
  ]
  ids, lengths = vocab.encode_batch(["run around twice", "jump"], add_eos=True)
  np.testing.assert_array_equal(
      ids, [[UNK_ID, UNK_ID, 8, EOS_ID], [5, EOS_ID, 0, 0]]
  )
  assert vocab.decode_batch(ids) == ["<unk> <unk> twice", "jump"]
  assert "UNK" in Vocab.encode.__doc__ and "UNK" in Vocab.__doc__


def test_batch(vocab):
  ids, lengths = vocab.encode_batch(["jump", "walk left twice"], add_eos=True)
  assert ids.dtype == np.int32 and lengths.dtype == np.int32
  np.testing.assert_array_equal(ids, [[5, EOS_ID, 0, 0], [9, 6, 8, EOS_ID]])
  np.testing.assert_array_equal(lengths, [2, 4])
  assert vocab.decode_batch(ids) == ["jump", "walk left twice"]
  assert vocab.decode_batch(ids, lengths) == ["jump", "walk left twice"]
  padded, _ = vocab.encode_batch(["jump"], length=6)
  assert padded.shape == (1, 6)
  with pytest.raises(ValueError, match="longer than length=2"):
    vocab.encode_batch(["walk left twice"], length=2)
  empty, empty_len = vocab.encode_batch([])
  assert empty.shape == (0, 0) and empty_len.shape == (0,)


def test_save_load(vocab, tmp_path):
  path = tmp_path / "vocab.json"
  vocab.save(path)
  loaded = Vocab.load(path)
  assert loaded == vocab and loaded.tokens == vocab.tokens
  assert loaded.encode("walk twice") == vocab.encode("walk twice")
  data = json.loads(path.read_text())
  data["tokens"] = ["b", "a"]
  path.write_text(json.dumps(data))
  with pytest.raises(ValueError, match="sorted"):
    Vocab.load(path)
  path.write_text("{not json")
  with pytest.raises(ValueError, match="invalid JSON"):
    Vocab.load(path)
  with pytest.raises(FileNotFoundError, match="missing.json"):
    Vocab.load(tmp_path / "missing.json")
