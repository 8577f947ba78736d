"""SCAN: generation, interpretation and splits, fully offline.

SCAN (Lake & Baroni, 2018, "Generalization without Systematicity: On the
Compositional Skills of Sequence-to-Sequence Recurrent Networks", ICML) maps
navigation commands such as `"jump around left twice after walk"` to action
sequences such as `"I_WALK I_TURN_LEFT I_JUMP I_TURN_LEFT I_JUMP ..."`.

This module regenerates the complete SCAN universe from its phrase-structure
grammar and interpretation rules, and builds the standard splits from it, so
it needs no files.  The generated set of (command, actions) pairs equals the
official `tasks.txt` (20,910 pairs) exactly, as a set.  Where the released
files are at hand (`split(..., data_dir=...)`), the `simple` and
`length` splits are read from them and the `length_cutoff` hold-out
follows the `tasks.txt` line order.

Grammar (Lake & Baroni 2018, supplementary material)::

    C -> S and S | S after S | S
    S -> V twice | V thrice | V
    V -> D[1] opposite D[2] | D[1] around D[2] | D | U
    D -> U left | U right | turn left | turn right
    U -> walk | look | run | jump

In the paper's notation `D[1] opposite D[2]` shares the verb of `D[1]` and
the direction of `D[2]`, so the phrases actually produced are
`x opposite d` and `x around d` with `x` in {walk, look, run, jump,
turn} and `d` in {left, right}.  Bare `turn` is not a command.  Hence
there are 4 + 5 * 2 * 3 = 34 `V` phrases, 3 * 34 = 102 `S` phrases and
102 + 2 * 102 ** 2 = 20,910 commands.

Interpretation rules::

    [[walk]] = I_WALK   [[look]] = I_LOOK   [[run]] = I_RUN   [[jump]] = I_JUMP
    [[turn left]] = I_TURN_LEFT            [[turn right]] = I_TURN_RIGHT
    [[u left]] = I_TURN_LEFT [[u]]         [[u right]] = I_TURN_RIGHT [[u]]
    [[x opposite d]] = [[turn d]] [[turn d]] [[x]]     ([[turn]] is empty)
    [[x around d]] = ([[turn d]] [[x]]) repeated 4 times
    [[s twice]] = [[s]] [[s]]              [[s thrice]] = [[s]] [[s]] [[s]]
    [[s1 and s2]] = [[s1]] [[s2]]          [[s1 after s2]] = [[s2]] [[s1]]

Splits (see `split`):

* `'simple'` -- the official random 80/20 split (16,728 train / 4,182
  test).  With `data_dir` holding the official `tasks_train_simple.txt`
  and `tasks_test_simple.txt`, `split` returns exactly their pairs.
  Without them it falls back to a *seeded* 80/20 draw of the same sizes from
  the generated universe: the official draw cannot be reproduced, so
  membership then differs from the official files (about 80% of the test
  pairs differ); only the sizes and the distribution match.
* `'length'` -- train: action sequences of length <= 22; test: longer
  (16,990 / 3,920).  The generated split is identical, as sets, to the
  official length split; with `data_dir` holding
  `tasks_train_length.txt` / `tasks_test_length.txt` those files are
  read instead.
* `'addprim_jump'` / `'addprim_turn_left'` -- train: every command that
  does not contain the primitive (`'jump'` / the substring
  `'turn left'`) plus the bare primitive command; test: all other commands
  containing it.  With unique pairs this gives 13,204 / 7,706 (jump) and
  19,702 / 1,208 (turn left).  The official *test* files have exactly these
  sizes.  The official *train* files (14,670 and 21,890 lines) repeat the bare
  primitive until it makes up 10% of the lines (13,203 + 1,467 and
  19,701 + 2,189 lines; 1,467 = 13,203 / 9 and 2,189 = 19,701 / 9);
  pass `oversample_primitive=True` to reproduce those line counts.
* `'length_cutoff'` -- the length resplit of Newman et al. (2020, "The EOS
  Decision and Length Extrapolation") as used by Csordas, Irie & Schmidhuber
  (2021, "The Devil is in the Detail: Simple Tricks Improve Systematic
  Generalization of Transformers", EMNLP).  See `length_cutoff_split`.
  The cutoff defaults to 22, the default of their code (`scan.length_cutoff`
  in `main.py`); their sweep covers 22..40 and the paper's headline number
  is cutoff 26 (the default of our seq2seq run config).  With `data_dir`
  holding the official `tasks.txt`, the IID hold-out is drawn from its line
  order, as they did.

Malformed files raise `DataFormatError` (a `ValueError`) naming the
file and line: see `read_scan_file`.
"""

from __future__ import annotations

import functools
import os
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from relational_jax.data.tsv import DataFormatError

__all__ = [
    "PRIMITIVES",
    "DIRECTIONS",
    "ACTIONS",
    "SPLITS",
    "CUTOFF_MIN",
    "CUTOFF_MAX",
    "DEFAULT_CUTOFF",
    "OFFICIAL_FILES",
    "SIMPLE_SEED",
    "CUTOFF_SEED",
    "LENGTH_SPLIT_MAX_LEN",
    "DataFormatError",
    "interpret",
    "generate",
    "read_scan_file",
    "official_files",
    "split",
    "length_cutoff_split",
]

Pair = Tuple[str, str]

#: Verbs of the SCAN grammar (non-terminal `U`) and their actions.
PRIMITIVES: Dict[str, str] = {
    "walk": "I_WALK",
    "look": "I_LOOK",
    "run": "I_RUN",
    "jump": "I_JUMP",
}
#: Directions and the corresponding turn actions.
DIRECTIONS: Dict[str, str] = {"left": "I_TURN_LEFT", "right": "I_TURN_RIGHT"}
#: The full SCAN output vocabulary.
ACTIONS: Tuple[str, ...] = tuple(PRIMITIVES.values()) + tuple(
    DIRECTIONS.values()
)

_REPEATS = {"twice": 2, "thrice": 3}
_CONJUNCTIONS = ("and", "after")

#: Valid names for `split`.
SPLITS: Tuple[str, ...] = (
    "simple",
    "length",
    "addprim_jump",
    "addprim_turn_left",
    "length_cutoff",
)
#: Valid output-length cutoffs for the `'length_cutoff'` split (inclusive).
CUTOFF_MIN, CUTOFF_MAX = 22, 40
#: Cutoff used when none is given: the default of Csordas et al.'s code
#: (`-scan.length_cutoff` in their `main.py`).  Their paper's headline
#: results use 26 (`split('length_cutoff', 26)`).
DEFAULT_CUTOFF = 22
#: Official file names read by `split` when `data_dir` holds them:
#: split name -> {part: file name}.  `'order'` is not a part: the
#: `length_cutoff` IID hold-out is drawn from the line order of tasks.txt.
OFFICIAL_FILES: Dict[str, Dict[str, str]] = {
    "simple": {
        "train": "tasks_train_simple.txt",
        "test": "tasks_test_simple.txt",
    },
    "length": {
        "train": "tasks_train_length.txt",
        "test": "tasks_test_length.txt",
    },
    "length_cutoff": {"order": "tasks.txt"},
}
#: Seed of the reproducible 80/20 `'simple'` split.
SIMPLE_SEED = 0
#: Seed used by Csordas et al. (2021) for the IID hold-out of the resplit.
CUTOFF_SEED = 1234
#: Longest action sequence in the train part of the official length split.
LENGTH_SPLIT_MAX_LEN = 22
#: Fraction of the `length_cutoff` pool used for training (Csordas et al.).
_CUTOFF_TRAIN_PROPORTION = 0.9
#: Fraction of the universe in the train part of the `'simple'` split.
_SIMPLE_TRAIN_FRACTION = 0.8


# --------------------------------------------------------------------------
# Interpretation
# --------------------------------------------------------------------------


def _interpret_v(words: Sequence[str], command: str) -> List[str]:
  """Interpret a `V` phrase (a list of 1 to 3 words)."""

  def bad() -> ValueError:
    return ValueError(
        f"not a SCAN command: {command!r} (cannot parse phrase "
        f"{' '.join(words)!r})"
    )

  if not words or words[0] not in PRIMITIVES and words[0] != "turn":
    raise bad()
  verb = words[0]
  verb_actions = [PRIMITIVES[verb]] if verb in PRIMITIVES else []
  if len(words) == 1:
    if verb == "turn":  # bare "turn" is not generated by the grammar
      raise bad()
    return verb_actions
  if words[-1] not in DIRECTIONS:
    raise bad()
  turn = DIRECTIONS[words[-1]]
  if len(words) == 2:  # "u left" / "turn left"
    return [turn] + verb_actions
  if len(words) == 3 and words[1] == "opposite":
    return [turn, turn] + verb_actions
  if len(words) == 3 and words[1] == "around":
    return ([turn] + verb_actions) * 4
  raise bad()


def _interpret_s(words: Sequence[str], command: str) -> List[str]:
  """Interpret an `S` phrase (`V` optionally followed by a repeat)."""
  if words and words[-1] in _REPEATS:
    return _interpret_v(words[:-1], command) * _REPEATS[words[-1]]
  return _interpret_v(words, command)


def interpret(command: str) -> str:
  """Interpret a SCAN command into its space-separated action sequence.

  Implements the interpretation function of Lake & Baroni (2018).

  Args:
    command: a SCAN command, e.g. `"jump around left twice after walk"`.

  Returns:
    The action sequence, e.g. `"I_WALK I_TURN_LEFT I_JUMP ..."`.

  Raises:
    ValueError: if `command` is not generated by the SCAN grammar.
  """
  words = command.split()
  conj = [i for i, w in enumerate(words) if w in _CONJUNCTIONS]
  if len(conj) > 1:
    raise ValueError(
        f"not a SCAN command: {command!r} (at most one 'and'/'after')"
    )
  if not conj:
    return " ".join(_interpret_s(words, command))
  i = conj[0]
  left = _interpret_s(words[:i], command)
  right = _interpret_s(words[i + 1 :], command)
  actions = left + right if words[i] == "and" else right + left
  return " ".join(actions)


# --------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------


def _v_phrases() -> List[str]:
  phrases = list(PRIMITIVES)
  for x in list(PRIMITIVES) + ["turn"]:
    for d in DIRECTIONS:
      phrases.append(f"{x} {d}")
      phrases.append(f"{x} opposite {d}")
      phrases.append(f"{x} around {d}")
  return phrases


def _s_phrases() -> List[str]:
  return [
      f"{v}{suffix}"
      for v in _v_phrases()
      for suffix in ("", " twice", " thrice")
  ]


@functools.lru_cache(maxsize=1)
def _generate_cached() -> Tuple[Pair, ...]:
  s_phrases = _s_phrases()
  commands = list(s_phrases)
  for s1 in s_phrases:
    for s2 in s_phrases:
      commands.append(f"{s1} and {s2}")
      commands.append(f"{s1} after {s2}")
  pairs = sorted((c, interpret(c)) for c in commands)
  return tuple(pairs)


def generate() -> List[Pair]:
  """All 20,910 SCAN (command, actions) pairs, sorted by command.

  Commands are enumerated from the grammar of Lake & Baroni (2018) and
  interpreted with `interpret`.  The result equals the official
  `tasks.txt` as a set.  The list is a fresh copy (safe to mutate).
  """
  return list(_generate_cached())


# --------------------------------------------------------------------------
# Reading the official files
# --------------------------------------------------------------------------


def read_scan_file(
    path: "str | os.PathLike[str]", *, check_grammar: bool = True
) -> List[Pair]:
  """Parse a file in the official SCAN format, keeping the file order.

  Each non-empty line must look like `IN: <command> OUT: <actions>`.  By
  default every command must be generated by the SCAN grammar and its
  action sequence must equal `interpret` of it, so that a
  user-supplied SCAN-style file with a typo fails on the offending line
  instead of training on it.

  Args:
    path: path of e.g. `tasks.txt` or `tasks_train_length.txt`.
    check_grammar: check every command against the grammar and its
      actions against the interpretation (pass `False` for SCAN-format
      files of another grammar).

  Returns:
    A list of (command, actions) pairs, one per non-empty line (duplicates,
    as in the official add-primitive train files, are kept).

  Raises:
    FileNotFoundError: if `path` does not exist.
    DataFormatError: (a `ValueError`) on a malformed line, a command
      outside the SCAN grammar, actions that are not the command's
      interpretation (the message names file and line), or an empty file.
  """
  path = os.fspath(path)
  if not os.path.isfile(path):
    raise FileNotFoundError(f"SCAN file not found: {path}")
  pairs: List[Pair] = []
  lineno = 0
  with open(path, encoding="utf-8") as f:
    for lineno, line in enumerate(f, start=1):
      line = line.strip()
      if not line:
        continue
      if not line.startswith("IN:") or line.count(" OUT:") != 1:
        raise DataFormatError(
            path,
            lineno,
            "malformed SCAN line (expected 'IN: <command> OUT: "
            f"<actions>'): {line[:80]!r}",
        )
      command, actions = line[len("IN:") :].split(" OUT:")
      command, actions = " ".join(command.split()), " ".join(actions.split())
      if not command or not actions:
        raise DataFormatError(
            path,
            lineno,
            "malformed SCAN line (empty command or action sequence): "
            f"{line[:80]!r}",
        )
      if check_grammar:
        try:
          expected = interpret(command)
        except ValueError as e:
          raise DataFormatError(
              path, lineno, f"command outside the SCAN grammar: {e}"
          ) from None
        if actions != expected:
          raise DataFormatError(
              path,
              lineno,
              f"actions of {command!r} are not its SCAN "
              f"interpretation: got {actions[:80]!r}, expected "
              f"{expected[:80]!r}",
          )
      pairs.append((command, actions))
  if not pairs:
    raise DataFormatError(
        path,
        None,
        f"empty file: none of its {lineno} line(s) holds a SCAN pair "
        "('IN: <command> OUT: <actions>')",
    )
  return pairs


# --------------------------------------------------------------------------
# Splits
# --------------------------------------------------------------------------


def _n_actions(pair: Pair) -> int:
  return len(pair[1].split())


def _simple_split(seed: int) -> Dict[str, List[Pair]]:
  pairs = generate()
  n_train = int(round(_SIMPLE_TRAIN_FRACTION * len(pairs)))
  perm = np.random.RandomState(seed).permutation(len(pairs))
  train = sorted(pairs[i] for i in perm[:n_train])
  test = sorted(pairs[i] for i in perm[n_train:])
  return {"train": train, "test": test}


def _length_split() -> Dict[str, List[Pair]]:
  pairs = generate()
  return {
      "train": [p for p in pairs if _n_actions(p) <= LENGTH_SPLIT_MAX_LEN],
      "test": [p for p in pairs if _n_actions(p) > LENGTH_SPLIT_MAX_LEN],
  }


def _addprim_split(primitive: str, oversample: bool) -> Dict[str, List[Pair]]:
  pairs = generate()
  words = primitive.split()

  def contains(command: str) -> bool:
    cw = command.split()
    return any(cw[i : i + len(words)] == words for i in range(len(cw)))

  others = [p for p in pairs if not contains(p[0])]
  prim = (primitive, interpret(primitive))
  test = [p for p in pairs if contains(p[0]) and p[0] != primitive]
  # Official train files: the primitive is 10% of the lines, i.e. it is
  # repeated len(others) / 9 times (13,203 / 9 = 1,467; 19,701 / 9 = 2,189).
  repeats = max(1, round(len(others) / 9)) if oversample else 1
  train = sorted(others + [prim] * repeats)
  return {"train": train, "test": test}


def length_cutoff_split(
    cutoff: Optional[int] = DEFAULT_CUTOFF,
    *,
    seed: int = CUTOFF_SEED,
    order: Optional[Iterable[Pair]] = None,
) -> Dict[str, List[Pair]]:
  """SCAN length resplit with an in-distribution hold-out.

  Newman et al. (2020) re-split SCAN at output-length cutoffs 22..40; the
  variant of Csordas, Irie & Schmidhuber (2021) additionally holds out 10%
  of the short examples as an IID test set.  The procedure (which mirrors
  theirs) is:

  1. Take the universe of pairs in a fixed order: the sorted order of
     `generate`, or `order` if given.  Csordas et al. used the line
     order of the official `tasks.txt`; pass
     `order=read_scan_file('.../tasks.txt')` to reproduce their exact
     membership.  The sizes do not depend on the order.
  2. The pool is every pair whose action sequence has at most `cutoff`
     actions (kept in that order); all longer pairs form `'test'`.
  3. `n_iid = int(len(pool) * (1 - 0.9))` -- the same float expression as
     Csordas et al., i.e. 10% rounded down, except that exact multiples of
     ten lose one more (e.g. 16,990 -> 1,698 for cutoffs 22 and 23).
  4. The IID indices are `RandomState(seed).permutation(len(pool))[:n_iid]`,
     which equals the legacy `RandomState(seed).choice(len(pool), n_iid,
     replace=False)` call of Csordas et al.; the rest of the pool is
     `'train'`.

  For `cutoff=26` this gives 16,458 train, 1,828 iid and 2,624 test pairs;
  for the default `cutoff=22`, 15,292 train, 1,698 iid and 3,920 test
  (train + iid is then the official length split's train set).

  Args:
    cutoff: maximal output length of the training pool, in 22..40;
      `None` means `DEFAULT_CUTOFF` (22, the default of Csordas et
      al.'s code).
    seed: seed of the IID hold-out (1234 as in Csordas et al.).
    order: optional ordering of the 20,910 pairs (must be a permutation of
      `generate`).

  Returns:
    `{'train': ..., 'iid': ..., 'test': ...}`, each list sorted.

  Raises:
    ValueError: if `cutoff` is not an integer in 22..40, or `order` is
      not a permutation of the SCAN universe.
  """
  if cutoff is None:
    cutoff = DEFAULT_CUTOFF
  if (
      isinstance(cutoff, bool)
      or not isinstance(cutoff, (int, np.integer))
      or not CUTOFF_MIN <= cutoff <= CUTOFF_MAX
  ):
    raise ValueError(
        f"invalid SCAN length cutoff {cutoff!r}: 'length_cutoff' needs an "
        f"integer cutoff in the range {CUTOFF_MIN}..{CUTOFF_MAX} (inclusive)"
    )
  if order is None:
    universe = generate()
  else:
    universe = [(str(c), str(a)) for c, a in order]
    if len(universe) != len(set(universe)) or set(universe) != set(
        _generate_cached()
    ):
      raise ValueError(
          "`order` must be a permutation of the 20,910 SCAN pairs "
          "(e.g. read_scan_file('tasks.txt'))"
      )
  pool = [p for p in universe if _n_actions(p) <= cutoff]
  test = sorted(p for p in universe if _n_actions(p) > cutoff)
  n_iid = int(len(pool) * (1 - _CUTOFF_TRAIN_PROPORTION))
  iid_idx = set(
      np.random.RandomState(seed).permutation(len(pool))[:n_iid].tolist()
  )
  iid = sorted(p for i, p in enumerate(pool) if i in iid_idx)
  train = sorted(p for i, p in enumerate(pool) if i not in iid_idx)
  return {"train": train, "iid": iid, "test": test}


def official_files(
    name: str, data_dir: "Optional[str | os.PathLike[str]]"
) -> Optional[Dict[str, str]]:
  """Paths of the official files that `split` reads for `name`.

  Args:
    name: a split name (`SPLITS`).
    data_dir: a directory that may hold the official SCAN files
      (`OFFICIAL_FILES`), or `None`.

  Returns:
    `{part: path}` when `data_dir` is given and holds every file of
    `OFFICIAL_FILES` for `name`; `None` otherwise (no official
    files for that split, or some missing): `split` then generates.
  """
  if data_dir is None or name not in OFFICIAL_FILES:
    return None
  paths = {
      part: os.path.join(os.fspath(data_dir), fname)
      for part, fname in OFFICIAL_FILES[name].items()
  }
  if not all(os.path.isfile(p) for p in paths.values()):
    return None
  return paths


def split(
    name: str,
    cutoff: Optional[int] = None,
    *,
    seed: Optional[int] = None,
    oversample_primitive: bool = False,
    order: Optional[Iterable[Pair]] = None,
    data_dir: "Optional[str | os.PathLike[str]]" = None,
) -> Dict[str, List[Pair]]:
  """Build a SCAN split, from the official files when given, else generated.

  With `data_dir` (a directory such as `relational_jax.data.paths.SCAN_DIR`)
  holding the split's official files (`official_files`), they are used:

  * `'simple'` / `'length'`: the pairs of `tasks_{train,test}_*.txt`,
    exactly (every line, duplicates kept; sorted);
  * `'length_cutoff'`: the IID hold-out is drawn from the line order of
    `tasks.txt` (unless `order` is given), as Csordas et al. did.

  Otherwise (no `data_dir`, or a file missing) the split is built from the
  generated universe; see the module docstring for how the generated
  `'simple'` split differs from the official one.  The add-primitive
  splits are always generated.

  Args:
    name: one of `'simple'`, `'length'`, `'addprim_jump'`,
      `'addprim_turn_left'`, `'length_cutoff'`.
    cutoff: output-length cutoff (22..40) for `'length_cutoff'`; `None`
      means `DEFAULT_CUTOFF` = 22, the default of Csordas et al.'s
      code (their headline results use 26).  Ignored by the other splits.
    seed: random seed for the generated `'simple'` split (default
      `SIMPLE_SEED`; an error when the official simple files are
      used) and for `'length_cutoff'` (default `CUTOFF_SEED` =
      1234); unused by the deterministic splits.
    oversample_primitive: for the `addprim_*` splits, repeat the bare
      primitive in train so that it makes up 10% of the lines, reproducing
      the official train-file line counts (14,670 and 21,890).  By default
      train holds unique pairs (13,204 and 19,702).
    order: for `'length_cutoff'` only; see `length_cutoff_split`.
    data_dir: directory of the official SCAN files (optional).

  Returns:
    A dict from part name (`'train'`, `'test'` and, for
    `'length_cutoff'`, `'iid'`) to a sorted list of
    (command, actions) string pairs.

  Raises:
    ValueError: for an unknown split name, an invalid cutoff, or a `seed`
      for the official simple split.
    DataFormatError: a malformed official file (see `read_scan_file`).
  """
  if name not in SPLITS:
    raise ValueError(
        f"unknown SCAN split {name!r}; valid names are: {', '.join(SPLITS)}"
    )
  files = official_files(name, data_dir)
  if name in ("simple", "length") and files is not None:
    if name == "simple" and seed is not None:
      raise ValueError(
          f"seed={seed!r} applies to the generated 'simple' split, but "
          f"the official files in {os.fspath(data_dir)} are used (pass "
          "data_dir=None for a seeded draw)"
      )
    return {part: sorted(read_scan_file(path)) for part, path in files.items()}
  if name == "simple":
    return _simple_split(SIMPLE_SEED if seed is None else seed)
  if name == "length":
    return _length_split()
  if name == "addprim_jump":
    return _addprim_split("jump", oversample_primitive)
  if name == "addprim_turn_left":
    return _addprim_split("turn left", oversample_primitive)
  # name == "length_cutoff"
  if order is None and files is not None:
    order = read_scan_file(files["order"])
  return length_cutoff_split(
      cutoff, seed=CUTOFF_SEED if seed is None else seed, order=order
  )
