"""Tests for the offline SCAN generator and splits (Lake & Baroni, 2018)."""

from pathlib import Path

import numpy as np
import pytest

from relational_jax.data import paths
from relational_jax.data import scan

SCAN_DIR = Path(paths.SCAN_DIR)  # The official files shipped with the package.


def _official(name):
  return scan.read_scan_file(SCAN_DIR / name)


def _lines(pairs):
  return [f"IN: {c} OUT: {a}" for c, a in pairs]


def _check_partition(parts, universe):
  sets = {k: set(v) for k, v in parts.items()}
  for k, v in parts.items():
    assert len(sets[k]) == len(v), f"duplicates in {k}"
  names = list(sets)
  for i, a in enumerate(names):
    for b in names[i + 1 :]:
      assert not sets[a] & sets[b], f"{a} and {b} overlap"
  assert set().union(*sets.values()) == set(universe)


# -- interpretation ----------------------------------------------------------


@pytest.mark.parametrize(
    "command, actions",
    [
        ("walk", "I_WALK"),
        ("turn left", "I_TURN_LEFT"),
        ("jump right", "I_TURN_RIGHT I_JUMP"),
        ("turn opposite right", "I_TURN_RIGHT I_TURN_RIGHT"),
        ("look opposite left", "I_TURN_LEFT I_TURN_LEFT I_LOOK"),
        ("turn around left", " ".join(["I_TURN_LEFT"] * 4)),
        ("run around right", " ".join(["I_TURN_RIGHT I_RUN"] * 4)),
        ("jump twice after walk left", "I_TURN_LEFT I_WALK I_JUMP I_JUMP"),
        ("jump thrice and turn right", "I_JUMP I_JUMP I_JUMP I_TURN_RIGHT"),
    ],
)
def test_interpret(command, actions):
  assert scan.interpret(command) == actions


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "turn",
        "fly",
        "walk left left",
        "walk and",
        "walk and run and look",
        "walk twice twice",
        "walk opposite",
        "turn around",
    ],
)
def test_interpret_rejects_non_commands(bad):
  with pytest.raises(ValueError, match="not a SCAN command"):
    scan.interpret(bad)


# -- generation ----------------------------------------------------------------


def test_generate_size_order_and_uniqueness():
  pairs = scan.generate()
  assert len(pairs) == 20910
  assert pairs == sorted(pairs)
  assert len({c for c, _ in pairs}) == 20910
  assert {a for _, acts in pairs for a in acts.split()} == set(scan.ACTIONS)


def test_generate_equals_official_tasks():
  official = _official("tasks.txt")
  assert len(official) == 20910
  assert set(scan.generate()) == set(official)


# -- file reader ---------------------------------------------------------------


def test_read_scan_file_errors(tmp_path):
  path = tmp_path / "bad.txt"
  path.write_text("IN: walk OUT: I_WALK\n\nIN: run I_RUN\n")
  with pytest.raises(
      ValueError, match=r"bad\.txt, line 3: malformed SCAN line"
  ):
    scan.read_scan_file(path)
  with pytest.raises(FileNotFoundError, match="missing.txt"):
    scan.read_scan_file(tmp_path / "missing.txt")
  path.write_text("IN: walk OUT: I_WALK\n\nIN: run  OUT: I_RUN\n")
  assert scan.read_scan_file(path) == [("walk", "I_WALK"), ("run", "I_RUN")]


def test_read_scan_file_rejects_commands_outside_the_grammar(tmp_path):
  path = tmp_path / "mine.txt"
  path.write_text(
      "IN: walk OUT: I_WALK\nIN: jump twice OUT: I_JUMP I_JUMP\n"
      "IN: fly left OUT: I_TURN_LEFT I_FLY\n"
  )
  with pytest.raises(
      scan.DataFormatError,
      match=r"mine\.txt, line 3: command outside the SCAN "
      r"grammar: not a SCAN command: 'fly left'",
  ) as info:
    scan.read_scan_file(path)
  assert isinstance(info.value, ValueError)
  assert (info.value.path, info.value.lineno) == (str(path), 3)
  # Actions that are not the command's interpretation.
  path.write_text(
      "IN: walk OUT: I_WALK\nIN: walk left OUT: I_WALK I_TURN_LEFT\n"
  )
  with pytest.raises(
      scan.DataFormatError,
      match=r"mine\.txt, line 2: actions of 'walk left' are not "
      r"its SCAN interpretation.*expected 'I_TURN_LEFT I_WALK'",
  ):
    scan.read_scan_file(path)
  # Another grammar in the SCAN format: opt out of the check.
  path.write_text("IN: fly left OUT: I_TURN_LEFT I_FLY\n")
  assert scan.read_scan_file(path, check_grammar=False) == [
      ("fly left", "I_TURN_LEFT I_FLY")
  ]


def test_read_scan_file_rejects_an_empty_file(tmp_path):
  path = tmp_path / "empty.txt"
  path.write_text("")
  with pytest.raises(scan.DataFormatError, match=r"empty\.txt: empty file"):
    scan.read_scan_file(path)
  path.write_text("\n  \n")
  with pytest.raises(
      ValueError, match=r"empty\.txt: empty file: none of its 2 line"
  ):
    scan.read_scan_file(path)


# -- splits --------------------------------------------------------------------


def test_simple_split():
  parts = scan.split("simple")
  assert (len(parts["train"]), len(parts["test"])) == (16728, 4182)
  _check_partition(parts, scan.generate())
  assert scan.split("simple") == parts  # deterministic
  assert scan.split("simple", seed=1) != parts
  # Same sizes as the official (unreproducible) random draw.
  official_train = _official("tasks_train_simple.txt")
  official_test = _official("tasks_test_simple.txt")
  assert (len(official_train), len(official_test)) == (16728, 4182)
  assert set(official_train) | set(official_test) == set(scan.generate())


def test_length_split_equals_official():
  parts = scan.split("length")
  assert (len(parts["train"]), len(parts["test"])) == (16990, 3920)
  _check_partition(parts, scan.generate())
  assert max(len(a.split()) for _, a in parts["train"]) == 22
  # The official length files (not shipped), line for line once sorted.
  for part in ("train", "test"):
    assert (
        paths.sorted_lines_sha256(_lines(parts[part]))
        == paths.SCAN_LENGTH_SORTED_SHA256[part]
    )


def _length_files(directory):
  """The official length split's files, rebuilt from the generator (equal
  to the released files once sorted: test_length_split_equals_official), in
  a shuffled line order."""
  rng = np.random.default_rng(0)
  for part, pairs in scan.split("length").items():
    lines = _lines(pairs)
    rng.shuffle(lines)
    (directory / f"tasks_{part}_length.txt").write_text("\n".join(lines) + "\n")
  return directory


@pytest.mark.parametrize("name", ["simple", "length"])
def test_split_reads_the_official_files_when_given(tmp_path, name):
  scan_dir = SCAN_DIR if name == "simple" else _length_files(tmp_path)
  assert scan.official_files(name, scan_dir) is not None
  parts = scan.split(name, data_dir=scan_dir)
  for part in ("train", "test"):
    official = scan.read_scan_file(scan_dir / f"tasks_{part}_{name}.txt")
    assert len(parts[part]) == len(official)  # Same count ...
    assert set(parts[part]) == set(official)  # ... and the same pairs.
    assert parts[part] == sorted(official)
  # Without data_dir (or without the files): the generator, same sizes.
  generated = scan.split(name)
  assert {k: len(v) for k, v in generated.items()} == {
      k: len(v) for k, v in parts.items()
  }
  assert scan.official_files(name, None) is None
  assert scan.split(name, data_dir=scan_dir / "missing") == generated


def test_official_simple_split_differs_from_the_generated_draw():
  scan_dir = SCAN_DIR
  official = scan.split("simple", data_dir=scan_dir)
  generated = scan.split("simple")
  assert set(official["test"]) != set(generated["test"])
  with pytest.raises(
      ValueError, match="seed=1 applies to the generated 'simple' split"
  ):
    scan.split("simple", seed=1, data_dir=scan_dir)


def test_split_reports_malformed_official_files(tmp_path):
  (tmp_path / "tasks_train_simple.txt").write_text("IN: walk OUT: I_WALK\n")
  (tmp_path / "tasks_test_simple.txt").write_text("IN: walk walk OUT: I_WALK\n")
  with pytest.raises(
      scan.DataFormatError,
      match=r"tasks_test_simple\.txt, line 1: command outside",
  ):
    scan.split("simple", data_dir=tmp_path)


@pytest.mark.parametrize(
    "name, primitive, n_train, n_test, n_train_official",
    [
        ("addprim_jump", "jump", 13204, 7706, 14670),
        ("addprim_turn_left", "turn left", 19702, 1208, 21890),
    ],
)
def test_addprim_splits(name, primitive, n_train, n_test, n_train_official):
  parts = scan.split(name)
  assert (len(parts["train"]), len(parts["test"])) == (n_train, n_test)
  _check_partition(parts, scan.generate())
  prim = (primitive, scan.interpret(primitive))
  assert prim in parts["train"]
  assert all(primitive not in c for c, _ in parts["train"] if c != primitive)
  assert all(primitive in c for c, _ in parts["test"])
  # Official train files repeat the primitive to 10% of the lines.
  over = scan.split(name, oversample_primitive=True)
  assert len(over["train"]) == n_train_official
  assert over["test"] == parts["test"]
  assert set(over["train"]) == set(parts["train"])
  assert over["train"].count(prim) == n_train_official // 10


def test_length_cutoff_26():
  parts = scan.split("length_cutoff", cutoff=26)
  assert set(parts) == {"train", "iid", "test"}
  sizes = {k: len(v) for k, v in parts.items()}
  assert sizes == {"train": 16458, "iid": 1828, "test": 2624}
  _check_partition(parts, scan.generate())
  assert max(len(a.split()) for _, a in parts["train"] + parts["iid"]) <= 26
  assert min(len(a.split()) for _, a in parts["test"]) > 26
  assert scan.split("length_cutoff", 26) == parts  # deterministic


def test_length_cutoff_with_official_order():
  order = _official("tasks.txt")
  parts = scan.split("length_cutoff", cutoff=26, order=order)
  assert {k: len(v) for k, v in parts.items()} == {
      "train": 16458,
      "iid": 1828,
      "test": 2624,
  }
  _check_partition(parts, order)
  with pytest.raises(ValueError, match="permutation"):
    scan.split("length_cutoff", cutoff=26, order=order[:-1])


def test_length_cutoff_iid_is_the_authors_choice_draw():
  """Csordas et al. draw the IID hold-out with RandomState(1234).choice(n, k,
  replace=False) over the pairs within the cutoff; ours equals that draw."""
  pool = [p for p in scan.generate() if len(p[1].split()) <= 26]
  parts = scan.split("length_cutoff", 26)
  idx = np.random.RandomState(1234).choice(
      len(pool), len(parts["iid"]), replace=False
  )
  assert len(pool) == 18286 and len(parts["iid"]) == 1828
  assert parts["iid"] == sorted(pool[i] for i in idx)


def test_length_cutoff_default_is_the_authors_22():
  # Csordas et al.'s main.py: -scan.length_cutoff default 22.
  assert scan.DEFAULT_CUTOFF == 22
  parts = scan.split("length_cutoff")
  assert parts == scan.split("length_cutoff", 22) == scan.length_cutoff_split()
  assert {k: len(v) for k, v in parts.items()} == {
      "train": 15292,
      "iid": 1698,
      "test": 3920,
  }
  # At 22 the pool is the official length split's train set.
  length = scan.split("length")
  assert set(parts["train"]) | set(parts["iid"]) == set(length["train"])
  assert set(parts["test"]) == set(length["test"])


def test_length_cutoff_follows_tasks_txt_order_when_given():
  scan_dir = SCAN_DIR
  assert scan.official_files("length_cutoff", scan_dir) is not None
  order = scan.read_scan_file(scan_dir / "tasks.txt")
  parts = scan.split("length_cutoff", 26, data_dir=scan_dir)
  assert parts == scan.split("length_cutoff", 26, order=order)
  assert parts["iid"] != scan.split("length_cutoff", 26)["iid"]


@pytest.mark.parametrize("cutoff", [21, 41, 26.0, "26"])
def test_length_cutoff_invalid(cutoff):
  with pytest.raises(ValueError, match=r"22\.\.40") as info:
    scan.split("length_cutoff", cutoff=cutoff)
  assert repr(cutoff) in str(info.value)


def test_unknown_split():
  with pytest.raises(
      ValueError, match="unknown SCAN split 'mcd1'.*simple.*length_cutoff"
  ):
    scan.split("mcd1")
