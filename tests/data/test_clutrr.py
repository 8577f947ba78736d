"""Tests for the CLUTRR loader (relational_jax.data.clutrr)."""

import ast
import collections
import csv

import numpy as np
import pytest

from relational_jax.data import clutrr
from relational_jax.data import clutrr_generator

OFFICIAL = "clutrr/gen_train23_test2to10"

# The gendered relation names of CLUTRR's files, and its 21 classes in order.
MALE = {
    "son",
    "father",
    "husband",
    "brother",
    "grandson",
    "grandfather",
    "nephew",
    "uncle",
    "son-in-law",
    "father-in-law",
}
FEMALE = {
    "daughter",
    "mother",
    "wife",
    "sister",
    "granddaughter",
    "grandmother",
    "niece",
    "aunt",
    "daughter-in-law",
    "mother-in-law",
}
CLASSES = [
    "aunt",
    "son-in-law",
    "grandfather",
    "brother",
    "sister",
    "father",
    "mother",
    "grandmother",
    "uncle",
    "daughter-in-law",
    "grandson",
    "granddaughter",
    "father-in-law",
    "mother-in-law",
    "nephew",
    "son",
    "daughter",
    "niece",
    "husband",
    "wife",
    "sister-in-law",
]


def raw_rows(path):
  with open(path, newline="", encoding="utf-8-sig") as f:
    return list(csv.DictReader(f))


# ---------------------------------------------------------------------------
# The official files.


@pytest.mark.parametrize(
    "name,total", [("validation.csv", 2020), ("test.csv", 1146)]
)
def test_official_files_load(official_data, name, total):
  path = official_data / OFFICIAL / name
  raw = raw_rows(path)
  examples = clutrr.load_clutrr(path)
  assert len(raw) == len(examples) == total
  expected = collections.Counter(
      int(r["task_name"].rsplit(".", 1)[1]) for r in raw
  )
  assert collections.Counter(ex.k for ex in examples) == expected
  assert set(expected) == (
      {2, 3} if name == "validation.csv" else set(range(2, 11))
  )
  for r, ex in zip(raw, examples):
    assert (
        0 <= ex.target < 21
        and CLASSES[ex.target] == r["target_text"] == ex.target_text
    )
    assert int(r["target"]) == ex.target
    assert len(ex.edges) == ex.k and ex.num_nodes == len(
        r["genders"].split(",")
    )
    assert list(ex.edge_types) == ast.literal_eval(r["edge_types"])
    for (_, b), t in zip(ex.edges, ex.edge_types):  # names are gendered by b
      assert ex.genders[b] == ("male" if t in MALE else "female")


def test_to_arrays():
  ex = clutrr.examples_from_rows([{
      "story_edges": "[(0, 1), (1, 2), (2, 1), (1, 3)]",
      "edge_types": "['husband', 'daughter', 'father', 'neice']",
      "query_edge": "(0, 3)",
      "genders": "A:female,B:male,C:female,D:female",
      "target": "20",
      "target_text": "sister-in-law",
      "task_name": "task_1.4",
  }])[0]
  assert (
      ex.edge_types == ("husband", "daughter", "father", "niece")
      and ex.num_nodes == 4
  )
  small = clutrr.examples_from_rows(
      clutrr_generator.generate_rows(2, 1, seed=0)
  )[0]
  arrays = clutrr.to_arrays([ex, small], num_nodes=6)
  assert (
      arrays["edge_labels"].shape == (2, 6, 6)
      and arrays["edge_labels"].dtype == np.int32
  )
  expected = np.full((6, 6), clutrr.NO_EDGE)
  expected[0, 1], expected[1, 2], expected[2, 1], expected[1, 3] = 18, 16, 5, 17
  np.testing.assert_array_equal(arrays["edge_labels"][0], expected)
  assert (arrays["edge_labels"][1] != clutrr.NO_EDGE).sum() == 2
  np.testing.assert_array_equal(arrays["query"], [[0, 3], [0, 2]])
  np.testing.assert_array_equal(arrays["targets"], [20, small.target])
  np.testing.assert_array_equal(arrays["node_mask"].sum(1), [4, 3])
  np.testing.assert_array_equal(arrays["k"], [4, 2])
  assert clutrr.to_arrays([ex])["edge_labels"].shape == (1, 4, 4)
  with pytest.raises(ValueError, match="num_nodes=3"):
    clutrr.to_arrays([ex], num_nodes=3)


# ---------------------------------------------------------------------------
# Bad input.

_GOOD = [
    "0",
    "x",
    "s",
    "('A', 'C')",
    "2",
    "grandfather",
    "s",
    "[]",
    "sister-grandfather",
    "task_1.2",
    "[(0, 1), (1, 2)]",
    "['sister', 'grandfather']",
    "(0, 2)",
    "A:female,B:female,C:male",
    "validation",
]


def _write(tmp_path, *bad_rows):
  path = tmp_path / "bad.csv"
  with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(clutrr.COLUMNS)
    w.writerow(_GOOD)
    for row in bad_rows:
      w.writerow(row)
  return path


def _with(**changes):
  row = dict(zip(clutrr.COLUMNS, _GOOD))
  row.update(changes)
  return [row[c] for c in clutrr.COLUMNS]


@pytest.mark.parametrize(
    "changes,message",
    [
        (
            dict(edge_types="['sister', 'cousin']"),
            r"row 2: unknown relation 'cousin'",
        ),
        (
            dict(target="grandpa", target_text=""),
            r"row 2: unknown relation 'grandpa' in target",
        ),
        (
            dict(
                task_name="task_1.1",
                story_edges="[(0, 2)]",
                edge_types="['grandfather']",
            ),
            r"row 2: k = 1 .*k >= 2",
        ),
        (
            dict(story_edges="[(0, 1), (1,"),
            r"row 2: column 'story_edges' is not a Python literal",
        ),
        (
            dict(story_edges="[(0, 1), (1, 'b')]"),
            r"row 2: column 'story_edges': expected a pair",
        ),
        (
            dict(edge_types="['sister']"),
            r"row 2: 2 story_edges but 1 edge_types",
        ),
        (
            dict(target="3"),
            r"row 2: target 3 is 'brother' but target_text is 'grandfather'",
        ),
        (
            dict(target="21", target_text=""),
            r"row 2: target 21 is not a class index",
        ),
        (
            dict(task_name="task_1.3"),
            r"row 2: task_name 'task_1.3' says k = 3 facts, story has 2",
        ),
        (dict(task_name="one"), r"row 2: task_name 'one' is not of the form"),
        (
            dict(genders="A:female,B:female"),
            r"row 2: node ids \[0, 1, 2\] do not fit the 2 genders",
        ),
        (
            dict(genders="A:female,B,C:male"),
            r"row 2: column 'genders': bad entry 'B'",
        ),
    ],
)
def test_bad_rows(tmp_path, changes, message):
  path = _write(tmp_path, _with(**changes))
  with pytest.raises(clutrr.ClutrrFormatError, match=r"bad\.csv, " + message):
    clutrr.load_clutrr(path)


def test_malformed_csv_rows(tmp_path):
  with pytest.raises(
      ValueError,
      match=r"bad\.csv, row 2: missing or empty column\(s\) story_edges",
  ):
    clutrr.load_clutrr(_write(tmp_path, _GOOD[:10]))
  with pytest.raises(
      ValueError, match=r"bad\.csv, row 2: more fields than header columns"
  ):
    clutrr.load_clutrr(_write(tmp_path, _GOOD + ["extra"]))
  path = tmp_path / "nohead.csv"
  path.write_text("a,b\n1,2\n")
  with pytest.raises(
      ValueError, match=r"nohead\.csv: header lacks column\(s\) story_edges"
  ):
    clutrr.load_clutrr(path)
  assert len(clutrr.load_clutrr(_write(tmp_path))) == 1
