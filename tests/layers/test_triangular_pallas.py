"""Tests for the Pallas backward kernels of the triangular attention
(`triangular_attention_pallas(backward='pallas')`, impl='pallas_fused').

Edge Transformer eq. 4-8: y_ij = sum_l softmax_l(q_il . k_lj / sqrt(K))
(v1_il * v2_lj); the attention ablation keys k_ij, the value ablation
values v1_il. The kernels run in interpret mode on CPU and must give the
gradients of the chunked path and of the materialising reference.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relational_jax.layers import triangular

RTOL = 1e-5


def _inputs(seed, b, n, h, k):
  keys = jax.random.split(jax.random.PRNGKey(seed), 5)
  return [jax.random.normal(key, (b, n, n, h, k)) for key in keys]


def _value_and_grads(attend, operands, do):
  """o and the gradients of sum(o * do) with respect to every operand."""

  def loss(*args):
    o = attend(*args)
    return jnp.sum(o * do), o

  (_, o), grads = jax.value_and_grad(
      loss, argnums=tuple(range(len(operands))), has_aux=True
  )(*operands)
  return [o, *grads]


def _assert_rel_close(got, want):
  for i, (g, w) in enumerate(zip(got, want)):
    g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
    assert np.all(np.isfinite(g)), i
    err = np.max(np.abs(g - w)) / max(np.max(np.abs(w)), 1e-30)
    assert err < RTOL, f"output {i}: relative error {err:.3g}"


def _fused_and_chunked(ablation, mask, block):
  """(fused, chunked) attend(q, k, v1[, v2]) functions for an ablation."""
  key_ij = ablation == "attention"

  def attend(fn, q, k, v1, v2=None):
    return fn(q, k, v1, v2, mask, key_ij=key_ij)

  fused = functools.partial(
      triangular.triangular_attention_pallas,
      block_size=block,
      interpret=True,
      backward="pallas",
  )
  chunked = functools.partial(
      triangular.triangular_attention_core, chunk_size=3
  )
  return functools.partial(attend, fused), functools.partial(attend, chunked)


# (name, B, N, H, K, real nodes per element or None, ablation, block).
CASES = (
    ("plain", 1, 4, 2, 4, None, "none", 2),
    ("padding_odd_width", 2, 7, 2, 3, (7, 4), "none", 4),
    ("an_all_padding_graph", 2, 5, 2, 4, (5, 0), "none", 2),
    ("attention_ablation", 1, 6, 2, 4, (5,), "attention", 4),
    ("value_ablation", 1, 6, 2, 4, (4,), "value", 4),
    ("both_ablations", 1, 5, 2, 4, (5,), "both", 2),
)
_SLOW_CASES = ("value_ablation", "both_ablations")  # attention_ablation: fast


@pytest.mark.parametrize(
    "name,b,n,h,k,real,ablation,block",
    [
        pytest.param(
            *c, id=c[0], marks=pytest.mark.slow if c[0] in _SLOW_CASES else ()
        )
        for c in CASES
    ],
)
def test_fused_values_and_grads_match_chunked(
    name, b, n, h, k, real, ablation, block
):
  q, kk, v1, v2, do = _inputs(sum(map(ord, name)), b, n, h, k)
  mask = None
  if real is not None:
    mask = jnp.arange(n)[None, :] < jnp.asarray(real)[:, None]
  key_ablation = "attention" if ablation in ("attention", "both") else "none"
  fused, chunked = _fused_and_chunked(key_ablation, mask, block)
  operands = [q, kk, v1] + ([] if ablation in ("value", "both") else [v2])
  _assert_rel_close(
      _value_and_grads(fused, operands, do),
      _value_and_grads(chunked, operands, do),
  )


def test_fused_matches_the_materialising_reference():
  """Against eq. 4-8 themselves: all B N^3 H scores, plain autodiff."""
  q, kk, v1, v2, do = _inputs(3, 2, 6, 2, 4)
  mask = jnp.array([[True] * 6, [True, True, False, True, False, True]])
  fused, _ = _fused_and_chunked("none", mask, 4)
  reference = lambda *a: triangular.triangular_attention_reference(*a, mask)
  _assert_rel_close(
      _value_and_grads(fused, [q, kk, v1, v2], do),
      _value_and_grads(reference, [q, kk, v1, v2], do),
  )


# Fast: test_triangular.py::test_jit_matches_eager[pallas_fused] (the module).
@pytest.mark.slow
def test_fused_jit_equals_eager():
  q, kk, v1, v2, do = _inputs(4, 1, 5, 2, 4)
  mask = jnp.array([[True, True, True, False, True]])
  fused, _ = _fused_and_chunked("none", mask, 2)
  run = lambda *a: _value_and_grads(fused, list(a), do)
  for got, want in zip(jax.jit(run)(q, kk, v1, v2), run(q, kk, v1, v2)):
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_unknown_backward_raises():
  q, kk, v1, v2, _ = _inputs(5, 1, 4, 2, 4)
  with pytest.raises(ValueError, match=r"backward 'xla'.*'chunked', 'pallas'"):
    triangular.triangular_attention_pallas(q, kk, v1, v2, backward="xla")
