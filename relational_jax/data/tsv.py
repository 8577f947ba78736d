"""Loaders for tab-separated seq2seq data sets (COGS, PCFG, CFQ exports).

Each line holds `source<TAB>target` and optionally a third column with the
split or generalisation type, as in COGS (Kim & Linzen, 2020, "COGS: A
Compositional Generalization Challenge Based on Semantic Interpretation",
EMNLP), whose files look like::

    A rose was helped by a dog .<TAB>rose ( x _ 1 ) AND ...<TAB>in_distribution
"""

from __future__ import annotations

import os
from typing import List, NamedTuple, Optional, Tuple, Union

__all__ = [
    "DataFormatError",
    "TsvExample",
    "load_tsv",
    "load_cogs",
    "COGS_SPLITS",
]

PathLike = Union[str, "os.PathLike[str]"]


class DataFormatError(ValueError):
  """A malformed data file (TSV or SCAN); a `ValueError`.

  The message starts with `"<path>, line <n>: "` (or `"<path>: "` when
  no single line is at fault, e.g. an empty file).

  Attributes:
    path: the file.
    lineno: the 1-based line number, or `None`.
  """

  def __init__(self, path: str, lineno: Optional[int], message: str):
    self.path, self.lineno = path, lineno
    where = f"{path}, line {lineno}" if lineno is not None else path
    super().__init__(f"{where}: {message}")


#: Splits understood by `load_cogs`; each is read from `{split}.tsv`.
COGS_SPLITS: Tuple[str, ...] = ("train", "dev", "test", "gen")


class TsvExample(NamedTuple):
  """One TSV row: source, target and the optional third column."""

  source: str
  target: str
  type: Optional[str] = None


def load_tsv(
    path: PathLike,
    split: Optional[str] = None,
    *,
    with_type: bool = False,
    expected_columns: Optional[int] = None,
) -> Union[List[Tuple[str, str]], List[TsvExample]]:
  """Load a `source<TAB>target[<TAB>type]` file.

  Empty lines are skipped; leading/trailing whitespace of each field is
  removed.  All non-empty lines must have the same number of columns (2 or
  3, or exactly `expected_columns` when given), and a file must hold at
  least one non-empty line.

  Args:
    path: the TSV file.
    split: if given, keep only rows whose third column equals `split`
      (e.g. `'in_distribution'` or a COGS generalisation type); the file
      must then have 3 columns.
    with_type: return `TsvExample` triples (third column, or
      `None` for 2-column files) instead of (source, target) pairs.
    expected_columns: require exactly this many columns (2 or 3).

  Returns:
    A list of (source, target) pairs, or of `TsvExample` when
    `with_type` is true, in file order.

  Raises:
    FileNotFoundError: if `path` does not exist (the message names it).
    DataFormatError: (a `ValueError`) on a line with a wrong number of
      columns, e.g. a line without a tab (the message names the file, the
      line number, and the number of columns found vs expected), on an
      empty source or target field, or on an empty file (no non-empty
      line).
    ValueError: if `split` is given for a 2-column file.
  """
  path = os.fspath(path)
  if expected_columns is not None and expected_columns not in (2, 3):
    raise ValueError(
        f"expected_columns must be 2 or 3, got {expected_columns!r}"
    )
  if not os.path.isfile(path):
    raise FileNotFoundError(f"TSV file not found: {path}")

  n_columns = expected_columns  # fixed by the first non-empty line if None
  first_line = None
  rows: List[TsvExample] = []
  lineno = 0
  with open(path, encoding="utf-8") as f:
    for lineno, line in enumerate(f, start=1):
      line = line.rstrip("\r\n")
      if not line.strip():
        continue
      fields = [x.strip() for x in line.split("\t")]
      found = len(fields)
      hint = " (the line has no tab)" if found == 1 else ""
      if n_columns is None:
        if found not in (2, 3):
          raise DataFormatError(
              path,
              lineno,
              f"found {found} column(s), expected 2 or 3 (source, "
              f"target[, type]), tab-separated{hint}: {line[:80]!r}",
          )
        n_columns, first_line = found, lineno
      elif found != n_columns:
        origin = (
            f"as in line {first_line}"
            if first_line is not None
            else "as requested by expected_columns"
        )
        raise DataFormatError(
            path,
            lineno,
            f"found {found} column(s), expected {n_columns} ({origin}; "
            f"columns: source, target[, type]){hint}: {line[:80]!r}",
        )
      if not fields[0] or not fields[1]:
        raise DataFormatError(
            path,
            lineno,
            f"empty {'source' if not fields[0] else 'target'} "
            f"(column {1 if not fields[0] else 2}): {line[:80]!r}",
        )
      rows.append(
          TsvExample(*fields) if found == 3 else TsvExample(*fields, None)
      )
  if not rows:
    raise DataFormatError(
        path,
        None,
        f"empty file: none of its {lineno} line(s) holds data (expected "
        "'source<TAB>target[<TAB>type]' lines)",
    )

  if split is not None:
    if rows and n_columns != 3:
      raise ValueError(
          f"{path}: cannot select split {split!r}, the file has "
          f"{n_columns} columns (the split is read from a third column)"
      )
    rows = [r for r in rows if r.type == split]
  if with_type:
    return rows
  return [(r.source, r.target) for r in rows]


def load_cogs(
    data_dir: PathLike,
    split: str,
    *,
    with_type: bool = False,
) -> Union[List[Tuple[str, str]], List[TsvExample]]:
  """Load a COGS split (Kim & Linzen, 2020) from `{data_dir}/{split}.tsv`.

  Args:
    data_dir: directory containing the COGS `*.tsv` files.
    split: one of `'train'`, `'dev'`, `'test'`, `'gen'`.
    with_type: also return the third column (generalisation type); see
      `load_tsv`.

  Raises:
    ValueError: for an unknown split name.
    FileNotFoundError: if the split's file is missing; for `'gen'` the
      message says that the generalisation set is not available.
    DataFormatError: a malformed or empty file (see `load_tsv`).
  """
  if split not in COGS_SPLITS:
    raise ValueError(
        f"unknown COGS split {split!r}; valid splits are:"
        f" {', '.join(COGS_SPLITS)}"
    )
  path = os.path.join(os.fspath(data_dir), f"{split}.tsv")
  if not os.path.isfile(path):
    if split == "gen":
      raise FileNotFoundError(
          f"COGS generalisation split 'gen' is not available: {path} does "
          "not exist (gen.tsv is not part of this data directory)"
      )
    raise FileNotFoundError(
        f"COGS split {split!r} not found: {path} does not exist"
    )
  return load_tsv(path, with_type=with_type)
