"""Tests for the TSV (COGS-style) loaders."""

from pathlib import Path

import pytest

from relational_jax.data import TsvExample, load_cogs, load_tsv
from relational_jax.data import paths
from relational_jax.data.tsv import DataFormatError

COGS_DIR = Path(paths.COGS_DIR)  # The official files shipped with the package.


def _cogs_dir():
  return COGS_DIR


def test_load_two_and_three_columns(tmp_path):
  two = tmp_path / "two.tsv"
  two.write_text("a b\tA B\n\nc\tC\n")
  assert load_tsv(two) == [("a b", "A B"), ("c", "C")]
  assert load_tsv(two, with_type=True) == [
      TsvExample("a b", "A B", None),
      TsvExample("c", "C", None),
  ]

  three = tmp_path / "three.tsv"
  three.write_text("a\tA\tx\nb\tB\ty\r\nc\tC\tx\n")
  assert load_tsv(three) == [("a", "A"), ("b", "B"), ("c", "C")]
  assert load_tsv(three, split="x") == [("a", "A"), ("c", "C")]
  rows = load_tsv(three, split="y", with_type=True)
  assert rows == [TsvExample("b", "B", "y")] and rows[0].type == "y"
  with pytest.raises(ValueError, match="2 columns"):
    load_tsv(two, split="x")


def test_missing_column(tmp_path):
  path = tmp_path / "bad.tsv"
  path.write_text("a\tA\tx\nb\tB\tx\nc\tC\n")
  with pytest.raises(
      ValueError, match=r"bad\.tsv, line 3: found 2 column\(s\), expected 3"
  ):
    load_tsv(path)
  path.write_text("a\tA\nonly-source\n")
  with pytest.raises(
      ValueError, match=r"bad\.tsv, line 2: found 1 column\(s\), expected 2"
  ):
    load_tsv(path)
  path.write_text("only-source\n")
  with pytest.raises(
      ValueError, match=r"line 1: found 1 column\(s\), expected 2 or 3"
  ):
    load_tsv(path)
  path.write_text("a\tA\n")
  with pytest.raises(
      ValueError, match=r"line 1: found 2 column\(s\), expected 3"
  ):
    load_tsv(path, expected_columns=3)


def test_line_without_a_tab(tmp_path):
  path = tmp_path / "notab.tsv"
  path.write_text("a b\tA B\nc d C D\n")
  with pytest.raises(
      DataFormatError,
      match=r"notab\.tsv, line 2: found 1 column\(s\), expected 2 "
      r".*\(the line has no tab\): 'c d C D'",
  ) as info:
    load_tsv(path)
  assert isinstance(info.value, ValueError)
  assert (info.value.path, info.value.lineno) == (str(path), 2)


def test_empty_file_and_empty_fields(tmp_path):
  path = tmp_path / "empty.tsv"
  path.write_text("")
  with pytest.raises(
      DataFormatError, match=r"empty\.tsv: empty file: none of its 0 line"
  ):
    load_tsv(path)
  path.write_text("\n\n")
  with pytest.raises(
      ValueError, match=r"empty\.tsv: empty file: none of its 2 line"
  ):
    load_tsv(path)
  path.write_text("a\tA\n\tB\n")
  with pytest.raises(
      DataFormatError, match=r"empty\.tsv, line 2: empty source"
  ):
    load_tsv(path)
  path.write_text("a\tA\nb\t \n")
  with pytest.raises(
      DataFormatError, match=r"empty\.tsv, line 2: empty target"
  ):
    load_tsv(path)
  (tmp_path / "dev.tsv").write_text("")
  with pytest.raises(DataFormatError, match=r"dev\.tsv: empty file"):
    load_cogs(tmp_path, "dev")


def test_missing_file(tmp_path):
  with pytest.raises(FileNotFoundError, match="nope.tsv"):
    load_tsv(tmp_path / "nope.tsv")
  with pytest.raises(
      FileNotFoundError, match="'gen' is not available.*gen.tsv"
  ):
    load_cogs(tmp_path, "gen")
  with pytest.raises(FileNotFoundError, match="dev.tsv"):
    load_cogs(tmp_path, "dev")
  with pytest.raises(
      ValueError, match="unknown COGS split 'valid'.*train, dev, test, gen"
  ):
    load_cogs(tmp_path, "valid")


def test_load_cogs_real_files(tmp_path):
  cogs = _cogs_dir()
  train = load_cogs(cogs, "train")
  assert len(train) == 24155
  assert train[0] == (
      "A rose was helped by a dog .",
      (
          "rose ( x _ 1 ) AND help . theme ( x _ 3 , x _ 1 ) AND help . agent "
          "( x _ 3 , x _ 6 ) AND dog ( x _ 6 )"
      ),
  )
  assert len(load_cogs(cogs, "dev")) == 3000
  test = load_cogs(cogs, "test", with_type=True)
  assert len(test) == 3000 and all(r.type == "in_distribution" for r in test)
  gen = load_cogs(cogs, "gen", with_type=True)
  assert len(gen) == 21000 and len({r.type for r in gen}) == 21
  (tmp_path / "dev.tsv").write_bytes((cogs / "dev.tsv").read_bytes())
  with pytest.raises(FileNotFoundError, match="'gen' is not available"):
    load_cogs(tmp_path, "gen")
