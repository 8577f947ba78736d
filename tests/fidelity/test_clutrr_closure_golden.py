"""Our CLUTRR closure equals CLUTRR's own (goldens/clutrr_closure.json,
written from their code by scripts/make_clutrr_closure_golden.py)."""

import json
import pathlib

import pytest

from relational_jax.data import clutrr_generator

GOLDEN = pathlib.Path(__file__).parent / "goldens" / "clutrr_closure.json"


def cases():
  return json.loads(GOLDEN.read_text())["trees"]


def test_golden_is_from_a_pinned_commit():
  golden = json.loads(GOLDEN.read_text())
  assert len(golden["reference"]["commit"]) == 40
  sizes = [len(case["tree"]["genders"]) for case in golden["trees"]]
  assert 42 in sizes and min(sizes) < 42  # The authors' trees and others.


@pytest.mark.parametrize("case", cases(), ids=lambda c: f"seed{c['seed']}")
def test_clutrr_closure_equals_clutrrs_code(case):
  t = case["tree"]
  tree = clutrr_generator.FamilyTree(
      tuple(t["genders"]),
      tuple(tuple(p) for p in t["parents"]),
      tuple(t["partner"]),
  )
  ours = [
      [a, b, r] for (a, b), r in clutrr_generator.clutrr_closure(tree).items()
  ]
  assert ours == case["closure"]  # Every pair, label and insertion order.
