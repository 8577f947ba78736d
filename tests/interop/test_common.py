"""relational_jax.interop.common, and what the package imports."""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from relational_jax.interop import flatten
from relational_jax.interop import select
from relational_jax.interop import to_authors


def test_flatten_joins_nested_names():
  nested = {"rt/linear": {"w": np.ones((2, 3)), "b": np.zeros(3)}, "x": 1.0}
  flat = flatten(nested, "/")
  assert set(flat) == {"rt/linear/w", "rt/linear/b", "x"}
  assert flat["rt/linear/w"].shape == (2, 3)
  with pytest.raises(ValueError, match="'a/b' appears twice"):
    flatten({"a": {"b": 1}, "a/b": 2}, "/")


def test_select_strips_the_prefix():
  params = {"encoder.layers.0.w": 1, "word_emb.weight": 2}
  assert set(select(params, "encoder.", ".")) == {"layers.0.w"}
  with pytest.raises(ValueError, match="no parameter name starts with"):
    select(params, "decoder.", ".")


def test_to_authors_inverts_slices_and_rejects_other_trees():
  def convert(p):
    w = p["lin.weight"]  # (out, in) -> two kernels of the halves
    return {"a": w.T[:, :2], "b": w.T[:, 2:], "zero": np.zeros(3)}

  theirs = {"lin.weight": np.arange(12.0).reshape(4, 3)}
  ours = convert(theirs)
  back = to_authors(convert, theirs, ours)
  np.testing.assert_array_equal(back["lin.weight"], theirs["lin.weight"])
  with pytest.raises(ValueError, match="structure"):
    to_authors(convert, theirs, {"a": ours["a"]})

  def half(p):
    return {"a": p["lin.weight"][:2]}

  with pytest.raises(ValueError, match="not covered"):
    to_authors(half, theirs, {"a": np.zeros((2, 3))})


def test_interop_imports_neither_torch_nor_haiku():
  code = (
      "import sys, relational_jax.interop; "
      "print(sorted(m for m in ('torch', 'haiku') if m in sys.modules))"
  )
  out = subprocess.run(
      [sys.executable, "-c", code],
      capture_output=True,
      text=True,
      check=True,
      env=dict(os.environ, JAX_PLATFORMS="cpu"),
      cwd=pathlib.Path(__file__).resolve().parents[2],
  )
  assert out.stdout.strip() == "[]"
