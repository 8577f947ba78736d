"""Triangular attention (Edge Transformer, Bergen, O'Donnell & Bahdanau, NeurIPS 2021).

Axis letters (`relational_jax.layers.shapes`): B batch, N nodes (edge (i, j)
has i and j in N; I and J where the two ends are told apart), L pivot nodes
(the l of a triangle (i, l, j); L = N), C pivots in one chunk, D width,
H heads, K head width (D = H * K).

Equations implemented (numbers from the paper, section 3):
  eq. 4  a_ij = W^o sum_l alpha_ilj v_ilj
  eq. 5  alpha_ilj = softmax_l(q_il . k_lj / sqrt(K))   (the paper's single
         head divides by sqrt(d); per head that is the head width K)
  eq. 6  q_il = W^q x_il
  eq. 7  k_lj = W^k x_lj
  eq. 8  v_ilj = V^1 x_il * V^2 x_lj                  (elementwise)
  eq. 9  a_ij = W^o [a^1_ij; ...; a^H_ij]              (multi-head: each head
         uses d x d/H blocks of W^q, W^k, V^1, V^2; heads are concatenated
         before W^o).
Causal masking (the ET encoder-decoder's decoder, sec. 3 "an encoder-decoder
version ... we adapt the Transformer decoder's causal masking approach to our
triangular attention"): with node times t (`node_time_BxL`; source tokens 0,
the target token at decoder position s at time s + 1), edge (i, j) belongs to
time max(t_i, t_j) and may use pivot l only if t_l <= max(t_i, t_j). Its
inputs (i, l) and (l, j) then belong to times <= max(t_i, t_j) as well, so by
induction every edge state depends only on tokens of its time or earlier.
Ablations (paper section 4.5):
  'value'      eq. 8 becomes v_ilj = V^1 x_il.
  'attention'  eq. 5 uses the key k_ij = W^k x_ij instead of k_lj, i.e.
               alpha_ilj = softmax_l(q_il . k_ij / sqrt(K)); the key no longer
               depends on the pivot l.
The paper omits biases "for clarity"; the projections here have biases
(`use_bias`), as the authors' released code does.

Memory. The value tensor v_ilj has B*N^3*D entries (6.4 GB in fp32 at B=32,
N=64, D=192), and the authors' code materialises it. Here the sum over the
pivot l is taken in chunks of `chunk_size` (C) pivots with an online (flash
attention style) softmax whose statistics are fp32, so no B x N x N x N x D
(nor per-head N^3 K) tensor is ever built: the per-chunk scores are
B x N x C x N x H, and the per-chunk value products v_icj are written as
broadcast-multiply-reduce expressions that XLA fuses into their reductions
(tests/layers/test_triangular.py checks the compiled temp memory), so
activations are O(B N^2 (D + C H)). The backward pass is a `jax.custom_vjp`
that saves only the inputs, the output and the fp32 logsumexp, and recomputes
the probabilities chunk by chunk (flash attention's backward). The chunk
loop, the softmax statistics and the custom VJP are
`relational_jax.layers.online_softmax`'s (shared with pivotal attention);
this module supplies the scores, value sums and gradients of one chunk. A
Pallas forward kernel (impl='pallas') shares that backward; impl=
'pallas_fused' adds Pallas backward kernels (`triangular_pallas`).
"""

import functools
import math
from typing import Any, NamedTuple, Optional, Tuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from relational_jax.layers import dense as dense_lib
from relational_jax.layers import init as init_lib
from relational_jax.layers import online_softmax
from relational_jax.layers import shapes
from relational_jax.layers import triangular_pallas

__all__ = [
    "TriangularAttention",
    "triangular_attention_core",
    "triangular_attention_pallas",
    "triangular_attention_reference",
    "ABLATIONS",
    "IMPLS",
]

Array = jax.Array

ABLATIONS = ("none", "value", "attention")
IMPLS = ("chunked", "reference", "pallas", "pallas_fused")
_PALLAS = ("pallas", "pallas_fused")

# Masked pivots' score (exp(_NEG - m) underflows to exactly 0).
_NEG = triangular_pallas.MASKED_SCORE


# ----------------------------------------------------------------------------
# Core: (q, k, v1, v2, mask) -> o, chunked over the pivot axis, custom VJP.
# ----------------------------------------------------------------------------


class _Static(NamedTuple):
  """The hashable (non-differentiable) settings of one call."""

  chunk_size: Optional[int]
  key_ij: bool  # the attention ablation: keys k_ij
  block_size: int = 16  # the (i, j) tile of the Pallas kernel
  interpret: bool = False  # the Pallas kernel in interpret mode


class _ChunkArrays(NamedTuple):
  """One chunk's masked fp32 scores and its slices, read in place."""

  s_BxNxCxNxH: Array  # q_ic . k_cj / sqrt(K) (eq. 5), _NEG where masked
  pivot: Array  # Bx1xCx1x1 (BxNxCxNx1 with node times): False = masked
  q_BxNxCxHxK: Array
  k_chunk: Array  # k_BxCxNxHxK, or for key_ij the whole k_BxNxNxHxK
  v1_BxNxCxHxK: Array
  v2_BxCxNxHxK: Optional[Array]


def _edge_time(time_BxN):
  """max(t_i, t_j) for every edge (i, j), or None without node times."""
  if time_BxN is None:
    return None
  return jnp.maximum(time_BxN[:, :, None], time_BxN[:, None, :])


def _chunk_arrays(static, chunk, inputs, edge_time_BxNxN):
  """The scores s[b, i, c, j, h] = q_ic . k_cj / sqrt(K) (eq. 5) of one
  chunk (`online_softmax.Chunk`), masked: padded pivots, pivots the chunk
  does not own and, with node times, pivots c with t_c > edge_time[i, j] =
  max(t_i, t_j) (causal masking). `inputs` are the core's (q, k, v1, v2,
  mask, time); k is k_BxLxNxHxK (keys k_lj, eq. 7) or, for the attention
  ablation (`key_ij`), k_BxNxNxHxK (keys k_ij)."""
  q, k, v1, v2, mask, time = inputs
  q_BxNxCxHxK = chunk.take(q, 2)
  k_chunk = k if static.key_ij else chunk.take(k, 1)
  s_BxNxCxNxH = jnp.einsum(
      "bichk,bijhk->bicjh" if static.key_ij else "bichk,bcjhk->bicjh",
      q_BxNxCxHxK,
      k_chunk,
      preferred_element_type=jnp.float32,
  )
  s_BxNxCxNxH = s_BxNxCxNxH * (1.0 / math.sqrt(q.shape[-1]))
  mask_BxC = chunk.take(mask, 1) & chunk.owned_C[None]
  pivot = mask_BxC[:, None, :, None, None]  # Bx1xCx1x1
  if time is not None:
    time_BxC = chunk.take(time, 1)
    causal_BxNxCxN = (
        time_BxC[:, None, :, None] <= edge_time_BxNxN[:, :, None, :]
    )
    pivot = pivot & causal_BxNxCxN[..., None]  # BxNxCxNx1
  return _ChunkArrays(
      s_BxNxCxNxH=jnp.where(pivot, s_BxNxCxNxH, _NEG),
      pivot=pivot,
      q_BxNxCxHxK=q_BxNxCxHxK,
      k_chunk=k_chunk,
      v1_BxNxCxHxK=chunk.take(v1, 2),
      v2_BxCxNxHxK=None if v2 is None else chunk.take(v2, 1),
  )


def _aggregate_values(p_BxNxCxNxH, v1_BxNxCxHxK, v2_BxCxNxHxK):
  """sum_c p_icj v_icj for one chunk (eq. 4 and 8), fp32, -> BxNxNxHxK.

  With both value factors this is not a GEMM. The C pivots of the chunk are
  unrolled: each term p_icj * v1_ic * v2_cj is a broadcast product over the
  (i, j, h, k) grid, and XLA fuses the C terms into one elementwise loop, so
  neither v_icj nor any N x C x N x D product is stored. (Writing it as a
  reduction over the chunk axis is ~10x slower on XLA:CPU.)
  """
  v1_BxNxCxHxK = v1_BxNxCxHxK.astype(jnp.float32)
  if v2_BxCxNxHxK is None:  # value ablation: v_ilj = V^1 x_il, a GEMM.
    return jnp.einsum("bicjh,bichk->bijhk", p_BxNxCxNxH, v1_BxNxCxHxK)
  v2_BxCxNxHxK = v2_BxCxNxHxK.astype(jnp.float32)
  acc_BxNxNxHxK = 0.0
  for c in range(p_BxNxCxNxH.shape[2]):
    p_BxNxNxH = p_BxNxCxNxH[:, :, c]  # alpha_icj (unnormalised)
    v1_BxNxHxK = v1_BxNxCxHxK[:, :, c]  # V^1 x_ic, indexed by i
    v2_BxNxHxK = v2_BxCxNxHxK[:, c]  # V^2 x_cj, indexed by j
    acc_BxNxNxHxK = acc_BxNxNxHxK + (
        p_BxNxNxH[..., None] * v1_BxNxHxK[:, :, None] * v2_BxNxHxK[:, None]
    )
  return acc_BxNxNxHxK


# The backward unrolls its sums over the node axes up to this many nodes
# (CLRS trains at n <= 16); larger graphs take the per-pivot form, whose
# program does not grow with N (compile time).
UNROLL_NODES_MAX = 16


def _value_grads(p_BxNxCxNxH, do_BxNxNxHxK, v1_BxNxCxHxK, v2_BxCxNxHxK):
  """Backward of `_aggregate_values` for one chunk (fp32).

  Returns dp_BxNxCxNxH = dL/dp, dv1_BxNxCxHxK and dv2_BxCxNxHxK (an empty
  placeholder for the value ablation).
  """
  v1_BxNxCxHxK = v1_BxNxCxHxK.astype(jnp.float32)
  if v2_BxCxNxHxK is None:  # value ablation: two GEMMs.
    dp_BxNxCxNxH = jnp.einsum("bijhk,bichk->bicjh", do_BxNxNxHxK, v1_BxNxCxHxK)
    dv1_BxNxCxHxK = jnp.einsum("bicjh,bijhk->bichk", p_BxNxCxNxH, do_BxNxNxHxK)
    return dp_BxNxCxNxH, dv1_BxNxCxHxK, jnp.zeros((0,), jnp.float32)
  v2_BxCxNxHxK = v2_BxCxNxHxK.astype(jnp.float32)
  n = do_BxNxNxHxK.shape[1]
  if n > UNROLL_NODES_MAX:
    return _value_grads_per_pivot(
        p_BxNxCxNxH, do_BxNxNxHxK, v1_BxNxCxHxK, v2_BxCxNxHxK
    )
  # dp_icj = sum_k do_ij v1_ic v2_cj: one reduction over the minor axis k
  # for all C pivots (XLA fuses the broadcast product into it).
  dp_BxNxCxNxH = jnp.sum(
      do_BxNxNxHxK[:, :, None]
      * v1_BxNxCxHxK[:, :, :, None]
      * v2_BxCxNxHxK[:, None],
      axis=-1,
  )
  # dv1_ic = sum_j p_icj do_ij v2_cj and dv2_cj = sum_i p_icj do_ij v1_ic: the
  # sums over the node axes j and i are unrolled, so each is one fused
  # elementwise accumulation over the (i|j, c, h, k) grid, as the forward's
  # `_aggregate_values`. (Per-pivot reductions over the major node axes ran
  # ~4x slower on XLA:CPU.) The unrolled program grows with N, hence only
  # up to UNROLL_NODES_MAX nodes.
  dv1_BxNxCxHxK = 0.0
  for j in range(n):
    dv1_BxNxCxHxK = dv1_BxNxCxHxK + (
        p_BxNxCxNxH[:, :, :, j, :, None]
        * do_BxNxNxHxK[:, :, None, j]
        * v2_BxCxNxHxK[:, None, :, j]
    )
  dv2_BxCxNxHxK = 0.0
  for i in range(n):
    dv2_BxCxNxHxK = dv2_BxCxNxHxK + (
        p_BxNxCxNxH[:, i, :, :, :, None]
        * do_BxNxNxHxK[:, None, i]
        * v1_BxNxCxHxK[:, i, :, None]
    )
  return dp_BxNxCxNxH, dv1_BxNxCxHxK, dv2_BxCxNxHxK


def _value_grads_per_pivot(
    p_BxNxCxNxH, do_BxNxNxHxK, v1_BxNxCxHxK, v2_BxCxNxHxK
):
  """`_value_grads` for graphs above UNROLL_NODES_MAX nodes: per pivot c of
  the chunk (unrolled over C, not N), three broadcast-multiply-reduce ops
  over the (i, j, h, k) grid, each fused by XLA into its reduction so the
  products are never stored. The optimization barriers keep XLA from
  sharing (and so materialising) the broadcasts between them."""
  barrier = jax.lax.optimization_barrier
  dp, dv1, dv2 = [], [], []
  for c in range(p_BxNxCxNxH.shape[2]):
    p_BxNxNxH = p_BxNxCxNxH[:, :, c]
    v1_BxNxHxK = v1_BxNxCxHxK[:, :, c]  # V^1 x_ic, indexed by i
    v2_BxNxHxK = v2_BxCxNxHxK[:, c]  # V^2 x_cj, indexed by j
    dp.append(
        jnp.sum(  # over k
            do_BxNxNxHxK * v1_BxNxHxK[:, :, None] * v2_BxNxHxK[:, None], axis=-1
        )
    )
    p_, do_, v2_ = barrier((p_BxNxNxH, do_BxNxNxHxK, v2_BxNxHxK))
    dv1.append(jnp.sum(p_[..., None] * do_ * v2_[:, None], axis=2))  # over j
    p_, do_, v1_ = barrier((p_BxNxNxH, do_BxNxNxHxK, v1_BxNxHxK))
    dv2.append(jnp.sum(p_[..., None] * do_ * v1_[:, :, None], axis=1))  # i
  return jnp.stack(dp, axis=2), jnp.stack(dv1, axis=2), jnp.stack(dv2, axis=1)


def _forward(static, q_BxNxLxHxK, k, v1_BxNxLxHxK, v2_BxLxNxHxK, mask, time):
  """Online-softmax forward. Returns (o_BxNxNxHxK, lse_BxNxNxH fp32); rows
  whose pivots are all masked (an all-padding graph) give zeros."""
  b, n, _, h, kk = q_BxNxLxHxK.shape
  edge_time_BxNxN = _edge_time(time)
  inputs = (q_BxNxLxHxK, k, v1_BxNxLxHxK, v2_BxLxNxHxK, mask, time)

  def chunk_scores(chunk):
    c = _chunk_arrays(static, chunk, inputs, edge_time_BxNxN)
    accumulate = lambda acc_BxNxNxHxK, p_BxNxCxNxH: acc_BxNxNxHxK + (
        _aggregate_values(p_BxNxCxNxH, c.v1_BxNxCxHxK, c.v2_BxCxNxHxK)
    )
    return c.s_BxNxCxNxH, c.pivot, accumulate

  o_BxNxNxHxK, lse_BxNxNxH = online_softmax.forward(
      chunk_scores,
      (b, n, n, h, kk),
      2,
      n,
      static.chunk_size,
      online_softmax.LSE,
  )
  out_dtype = jnp.result_type(q_BxNxLxHxK.dtype, v1_BxNxLxHxK.dtype)
  return o_BxNxNxHxK.astype(out_dtype), lse_BxNxNxH


def _backward(
    static,
    q_BxNxLxHxK,
    k,
    v1_BxNxLxHxK,
    v2_BxLxNxHxK,
    mask,
    time,
    o_BxNxNxHxK,
    lse_BxNxNxH,
    do_BxNxNxHxK,
):
  """Flash-style backward: recomputes p per chunk from the saved logsumexp.

  The gradients are accumulated in place (fp32 carries) chunk by chunk.
  """
  b, n, _, h, kk = q_BxNxLxHxK.shape
  scale = 1.0 / math.sqrt(kk)
  edge_time_BxNxN = _edge_time(time)
  inputs = (q_BxNxLxHxK, k, v1_BxNxLxHxK, v2_BxLxNxHxK, mask, time)
  do_BxNxNxHxK = do_BxNxNxHxK.astype(jnp.float32)
  # delta_ij = sum_k do_ij o_ij = sum_l p_ilj dp_ilj (softmax backward).
  delta_BxNxNxH = jnp.einsum(
      "bijhk,bijhk->bijh", do_BxNxNxHxK, o_BxNxNxHxK.astype(jnp.float32)
  )
  value_ablation = v2_BxLxNxHxK is None

  def step(grads, chunk):
    dq, dk, dv1, dv2 = grads
    c = _chunk_arrays(static, chunk, inputs, edge_time_BxNxN)
    p_BxNxCxNxH = online_softmax.probabilities(
        c.s_BxNxCxNxH, c.pivot, lse_BxNxNxH, 2, online_softmax.LSE
    )
    dp_BxNxCxNxH, dv1_BxNxCxHxK, dv2_BxCxNxHxK = _value_grads(
        p_BxNxCxNxH, do_BxNxNxHxK, c.v1_BxNxCxHxK, c.v2_BxCxNxHxK
    )
    ds_BxNxCxNxH = online_softmax.softmax_grad(
        p_BxNxCxNxH, dp_BxNxCxNxH, delta_BxNxNxH, 2
    )
    ds_BxNxCxNxH = ds_BxNxCxNxH * scale
    q_BxNxCxHxK = c.q_BxNxCxHxK.astype(jnp.float32)
    if static.key_ij:
      dq_BxNxCxHxK = jnp.einsum(
          "bicjh,bijhk->bichk", ds_BxNxCxNxH, k.astype(jnp.float32)
      )
      dk = dk + jnp.einsum("bicjh,bichk->bijhk", ds_BxNxCxNxH, q_BxNxCxHxK)
    else:
      dq_BxNxCxHxK = jnp.einsum(
          "bicjh,bcjhk->bichk", ds_BxNxCxNxH, c.k_chunk.astype(jnp.float32)
      )
      dk = chunk.add(
          dk, jnp.einsum("bicjh,bichk->bcjhk", ds_BxNxCxNxH, q_BxNxCxHxK), 1
      )
    dq = chunk.add(dq, dq_BxNxCxHxK, 2)
    dv1 = chunk.add(dv1, dv1_BxNxCxHxK, 2)
    if not value_ablation:
      dv2 = chunk.add(dv2, dv2_BxCxNxHxK, 1)
    return dq, dk, dv1, dv2

  zeros = jnp.zeros((b, n, n, h, kk), jnp.float32)
  init = (
      zeros,
      zeros,
      zeros,
      jnp.zeros((0,), jnp.float32) if value_ablation else zeros,
  )
  dq, dk, dv1, dv2 = online_softmax.backward(step, init, n, static.chunk_size)
  dq = dq.astype(q_BxNxLxHxK.dtype)
  dv1 = dv1.astype(v1_BxNxLxHxK.dtype)
  dk = dk.astype(k.dtype)
  dv2 = None if value_ablation else dv2.astype(v2_BxLxNxHxK.dtype)
  return dq, dk, dv1, dv2, None, None


_triangle_core = online_softmax.recomputing_vjp(_forward, _backward)


def _check_core_inputs(q, k, v1, v2, mask, chunk_size, time=None):
  shapes.check_shape(q, ("B", "N", "L", "H", "K"), "q_BxNxLxHxK")
  b, n, l, h, kk = q.shape
  shapes.check_equal(n, l, "q_BxNxLxHxK node axes N and L")
  for name, arr in (
      ("k_BxLxNxHxK", k),
      ("v1_BxNxLxHxK", v1),
      ("v2_BxLxNxHxK", v2),
  ):
    if arr is not None:
      shapes.check_shape(arr, (b, n, n, h, kk), name)
  shapes.check_shape(mask, (b, n), "node_mask_BxN")
  if time is not None:
    shapes.check_shape(time, (b, n), "node_time_BxL")
    if not jnp.issubdtype(time.dtype, jnp.integer):
      raise ValueError(
          f"node_time_BxL must be integer, got dtype {time.dtype}."
      )
  online_softmax.check_chunk_size(chunk_size)


def triangular_attention_core(
    q_BxNxLxHxK: Array,
    k: Array,
    v1_BxNxLxHxK: Array,
    v2_BxLxNxHxK: Optional[Array],
    node_mask_BxL: Optional[Array] = None,
    *,
    node_time_BxL: Optional[Array] = None,
    chunk_size: Optional[int] = 8,
    key_ij: bool = False,
) -> Array:
  """Per-head triangular attention before W^o (eq. 4-8), memory-lean.

    o[b, i, j, h] = sum_l alpha_ilj v_ilj,
    alpha_ilj = softmax_l(q_il . k_lj / sqrt(K))        (eq. 5)
    v_ilj = v1_il * v2_lj                               (eq. 8)

  Args:
    q_BxNxLxHxK: queries q_il = W^q x_il (eq. 6), pivot l on axis 2.
    k: keys. k_BxLxNxHxK = W^k x_lj (eq. 7), pivot l on axis 1; with
      `key_ij=True` (attention ablation) k_BxNxNxHxK = W^k x_ij.
    v1_BxNxLxHxK: left values V^1 x_il.
    v2_BxLxNxHxK: right values V^2 x_lj, or None for the value ablation
      (v_ilj = V^1 x_il).
    node_mask_BxL: True for real nodes; padded nodes are never pivots.
    node_time_BxL: optional integer node times for causal masking: edge
      (i, j) uses pivot l only if t_l <= max(t_i, t_j) (module docstring).
    chunk_size: pivots per chunk (None: all at once). Need not divide N.
    key_ij: attention ablation (key k_ij instead of k_lj in eq. 5).

  Returns:
    o_BxNxNxHxK in the inputs' dtype; softmax statistics are fp32.
  """
  if node_mask_BxL is None:
    node_mask_BxL = jnp.ones(q_BxNxLxHxK.shape[:2], bool)
  node_mask_BxL = jnp.asarray(node_mask_BxL).astype(bool)
  if node_time_BxL is not None:
    node_time_BxL = jnp.asarray(node_time_BxL)
  _check_core_inputs(
      q_BxNxLxHxK,
      k,
      v1_BxNxLxHxK,
      v2_BxLxNxHxK,
      node_mask_BxL,
      chunk_size,
      node_time_BxL,
  )
  return _triangle_core(
      _Static(chunk_size, bool(key_ij)),
      q_BxNxLxHxK,
      k,
      v1_BxNxLxHxK,
      v2_BxLxNxHxK,
      node_mask_BxL,
      node_time_BxL,
  )


def triangular_attention_reference(
    q_BxNxLxHxK: Array,
    k: Array,
    v1_BxNxLxHxK: Array,
    v2_BxLxNxHxK: Optional[Array],
    node_mask_BxL: Optional[Array] = None,
    *,
    node_time_BxL: Optional[Array] = None,
    key_ij: bool = False,
    attention_dropout: Optional[Tuple[float, Array]] = None,
) -> Array:
  """Materialising reference of eq. 4-8 (as in the authors' einsum code).

  Builds the full score tensor B x N x L x N x H and the value tensor
  v_BxNxLxNxHxK (B*N^3*D entries); plain autodiff. Memory is O(B N^3 D).

  attention_dropout: (rate, key): inverted dropout on the attention weights
  alpha_BxNxLxNxH after the softmax, as the ET authors' code applies
  `nn.Dropout` to `att` (a keep mask `jax.random.bernoulli(key, 1 - rate,
  alpha.shape)`, kept weights scaled by 1 / (1 - rate)).
  """
  if node_mask_BxL is None:
    node_mask_BxL = jnp.ones(q_BxNxLxHxK.shape[:2], bool)
  kk = q_BxNxLxHxK.shape[-1]
  if key_ij:
    s_BxNxLxNxH = jnp.einsum(
        "bilhk,bijhk->biljh", q_BxNxLxHxK, k, preferred_element_type=jnp.float32
    )
  else:
    s_BxNxLxNxH = jnp.einsum(
        "bilhk,bljhk->biljh", q_BxNxLxHxK, k, preferred_element_type=jnp.float32
    )
  s_BxNxLxNxH = s_BxNxLxNxH / math.sqrt(kk)
  pivot = node_mask_BxL.astype(bool)[:, None, :, None, None]  # Bx1xLx1x1
  if node_time_BxL is not None:  # Pivot l of edge (i, j): t_l <= max(t_i, t_j).
    t_BxN = jnp.asarray(node_time_BxL)
    edge_time_BxNxN = jnp.maximum(t_BxN[:, :, None], t_BxN[:, None, :])
    pivot = (
        pivot
        & (t_BxN[:, None, :, None] <= edge_time_BxNxN[:, :, None, :])[..., None]
    )
  s_BxNxLxNxH = jnp.where(pivot, s_BxNxLxNxH, _NEG)
  alpha_BxNxLxNxH = jax.nn.softmax(s_BxNxLxNxH, axis=2)
  alpha_BxNxLxNxH = jnp.where(pivot, alpha_BxNxLxNxH, 0.0)
  if attention_dropout is not None:
    rate, key = attention_dropout
    keep_BxNxLxNxH = jax.random.bernoulli(
        key, 1.0 - rate, alpha_BxNxLxNxH.shape
    )
    alpha_BxNxLxNxH = jnp.where(
        keep_BxNxLxNxH, alpha_BxNxLxNxH / (1.0 - rate), 0.0
    )
  if v2_BxLxNxHxK is None:
    o = jnp.einsum(
        "biljh,bilhk->bijhk", alpha_BxNxLxNxH, v1_BxNxLxHxK.astype(jnp.float32)
    )
  else:
    v_BxNxLxNxHxK = jnp.einsum(
        "bilhk,bljhk->biljhk", v1_BxNxLxHxK, v2_BxLxNxHxK
    ).astype(jnp.float32)
    o = jnp.einsum("biljh,biljhk->bijhk", alpha_BxNxLxNxH, v_BxNxLxNxHxK)
  return o.astype(q_BxNxLxHxK.dtype)


# ----------------------------------------------------------------------------
# Pallas kernels (`relational_jax.layers.triangular_pallas`): impl='pallas'
# pairs the forward kernel with the chunked backward above (from its o and
# lse), impl='pallas_fused' with the backward kernels.
# ----------------------------------------------------------------------------

_triangle_pallas = online_softmax.recomputing_vjp(
    triangular_pallas.forward, _backward
)
_triangle_pallas_fused = online_softmax.recomputing_vjp(
    triangular_pallas.forward, triangular_pallas.backward
)
BACKWARDS = ("chunked", "pallas")


def triangular_attention_pallas(
    q_BxNxLxHxK: Array,
    k: Array,
    v1_BxNxLxHxK: Array,
    v2_BxLxNxHxK: Optional[Array],
    node_mask_BxL: Optional[Array] = None,
    *,
    key_ij: bool = False,
    block_size: int = 16,
    interpret: Optional[bool] = None,
    chunk_size: Optional[int] = 8,
    backward: str = "chunked",
) -> Array:
  """`triangular_attention_core` with a Pallas forward kernel.

  Each program computes an (i, j) tile of one batch element and head, looping
  over the pivots l with the same fp32 online softmax; it saves o and the
  logsumexp. backward='chunked': the backward is the chunked recomputation
  of `triangular_attention_core` (with `chunk_size`); 'pallas': Pallas
  kernels, one per owner of a gradient (`triangular_pallas.backward`;
  `chunk_size` unused). Tiles hold the whole pivot axis of q_il and k_lj for
  their rows/columns (block x N x K each), which suits moderate N.
  `interpret`: run the kernels in interpret mode; None: when
  jax.default_backend() is 'cpu' (as pivotal attention's).
  experiments/bench/gpu_check.py checks and times the compiled kernels on a
  GPU (docs/performance.md).
  """
  if node_mask_BxL is None:
    node_mask_BxL = jnp.ones(q_BxNxLxHxK.shape[:2], bool)
  node_mask_BxL = jnp.asarray(node_mask_BxL).astype(bool)
  _check_core_inputs(
      q_BxNxLxHxK, k, v1_BxNxLxHxK, v2_BxLxNxHxK, node_mask_BxL, chunk_size
  )
  online_softmax.check_block_size(block_size)
  shapes.check_choice(backward, BACKWARDS, "backward")
  fn = _triangle_pallas if backward == "chunked" else _triangle_pallas_fused
  return fn(
      _Static(
          chunk_size,
          bool(key_ij),
          block_size,
          online_softmax.interpret_mode(interpret),
      ),
      q_BxNxLxHxK,
      k,
      v1_BxNxLxHxK,
      v2_BxLxNxHxK,
      node_mask_BxL,
      None,
  )


# ----------------------------------------------------------------------------
# Flax module.
# ----------------------------------------------------------------------------


class TriangularAttention(nn.Module):
  """Multi-head triangular attention, Edge Transformer eq. 4-9.

    a_ij = W^o [a^1_ij; ...; a^H_ij],  a^h_ij = sum_l alpha^h_ilj v^h_ilj,
    alpha^h_ilj = softmax_l(q^h_il . k^h_lj / sqrt(K)),
    q_il = W^q x_il,  k_lj = W^k x_lj,  v_ilj = (V^1 x_il) * (V^2 x_lj).

  Attributes:
    num_heads: H; must divide the width D (K = D / H).
    ablation: 'none'; 'value' (eq. 8 -> v_ilj = V^1 x_il; no V^2 params);
      'attention' (eq. 5 uses k_ij = W^k x_ij), paper section 4.5.
    chunk_size: pivots aggregated per step of the online softmax (None: all
      N at once). Any positive size works (it need not divide N): the last
      chunk starts at N - C and skips the pivots already counted.
    impl: 'chunked' (custom-VJP online softmax, O(B N^2 D) memory),
      'pallas' (the same with a Pallas forward kernel; see
      `triangular_attention_pallas`), 'pallas_fused' (Pallas kernels forward
      and backward) or 'reference' (materialises B x N x N x N x D;
      tests/benchmarks only).
    pallas_block_size: the tiles of the Pallas kernels (a power of two).
    interpret: run the Pallas kernels in interpret mode; None: on CPU.
    use_bias: biases on the five projections.
    attention_dropout_rate: dropout on the attention weights alpha after the
      softmax, as the ET authors' code (`att = self.dropout(att)`); active
      only when `aggregate` gets deterministic=False (and a 'dropout' rng).
      The weights are then materialised: training with it runs the
      'reference' computation (O(B N^3 D) memory) whatever `impl` is;
      deterministic calls use `impl`.
    dtype: computation dtype (None: the input's); softmax stats stay fp32.
    param_dtype: parameter dtype.
    init_scheme: the parameters' initialisation, 'flax' or 'bergen' (the ET
      authors': Xavier-uniform maps, PyTorch's default biases;
      `relational_jax.layers.init.ET_INITS`).

  `__call__` is `output(aggregate(x))`; `aggregate` is `project` followed by
  the pivot sum (eq. 4-8). The pieces are public for incremental decoding
  (`relational_jax.models.et_seq2seq`).
  """

  num_heads: int
  ablation: str = "none"
  chunk_size: Optional[int] = 8
  impl: str = "chunked"
  pallas_block_size: int = 16
  interpret: Optional[bool] = None
  use_bias: bool = True
  attention_dropout_rate: float = 0.0
  dtype: Optional[Any] = None
  param_dtype: Any = jnp.float32
  init_scheme: str = "flax"  # Not `init`: that is Module.init.

  @nn.compact
  def _projections(self, width: int, dtype) -> dict:
    """The five linear maps (eq. 6-9) for width D (created on first use).

    Flax allows one compact method per module; the public `project` and
    `output` both reach the parameters through this one, so the parameter
    names (query, key, value_left, value_right, out) live in one place.
    """
    k_size = shapes.check_divides(width, self.num_heads, "width D")
    inits = init_lib.et_linear(
        self.init_scheme, width
    )  # Every map reads D wide.
    proj = functools.partial(
        dense_lib.DenseGeneral,
        features=(self.num_heads, k_size),
        axis=-1,
        use_bias=self.use_bias,
        dtype=dtype,
        param_dtype=self.param_dtype,
        kernel_init=inits["kernel"],
        bias_init=inits["bias"],
    )
    return dict(
        query=proj(name="query"),  # eq. 6
        key=proj(name="key"),  # eq. 7
        value_left=proj(name="value_left"),  # eq. 8
        value_right=(
            None if self.ablation == "value" else proj(name="value_right")
        ),
        out=dense_lib.DenseGeneral(  # eq. 9
            features=width,
            axis=(-2, -1),
            use_bias=self.use_bias,
            dtype=dtype,
            param_dtype=self.param_dtype,
            kernel_init=inits["kernel"],
            bias_init=inits["bias"],
            name="out",
        ),
    )

  def project(self, x_xD: Array):
    """(q, k, V^1 x, V^2 x) of edge states x (eq. 6-8), each `...xHxK`.

    V^2 x is None for the value ablation. For a whole state x_BxNxNxD, q and
    V^1 x are read with the pivot on axis 2 (x_il), k and V^2 x with the
    pivot on axis 1 (x_lj); for the attention ablation k is read as k_ij.
    """
    shapes.check_choice(self.ablation, ABLATIONS, "ablation")
    dtype = self.dtype or x_xD.dtype
    x_xD = x_xD.astype(dtype)
    maps = self._projections(x_xD.shape[-1], dtype)
    v2 = maps["value_right"]
    return (
        maps["query"](x_xD),
        maps["key"](x_xD),
        maps["value_left"](x_xD),
        None if v2 is None else v2(x_xD),
    )

  def output(self, o_xHxK: Array) -> Array:
    """W^o [a^1; ...; a^H] (eq. 9): heads `...xHxK` -> `...xD`."""
    dtype = self.dtype or o_xHxK.dtype
    width = o_xHxK.shape[-2] * o_xHxK.shape[-1]
    return self._projections(width, dtype)["out"](o_xHxK.astype(dtype))

  def __call__(
      self,
      x_BxNxNxD: Array,
      node_mask_BxN: Optional[Array] = None,
      node_time_BxN: Optional[Array] = None,
      deterministic: bool = True,
  ) -> Array:
    """Returns a_BxNxNxD (eq. 9): `output(aggregate(x, ...))`."""
    return self.output(
        self.aggregate(x_BxNxNxD, node_mask_BxN, node_time_BxN, deterministic)
    )

  def aggregate(
      self,
      x_BxNxNxD: Array,
      node_mask_BxN: Optional[Array] = None,
      node_time_BxN: Optional[Array] = None,
      deterministic: bool = True,
  ) -> Array:
    """The heads before W^o: o_BxNxNxHxK, o^h_ij = sum_l alpha^h_ilj v^h_ilj.

    Args:
      x_BxNxNxD: edge states, x[b, i, j] is edge (i, j).
      node_mask_BxN: optional, True for real nodes. Padded nodes are excluded
        as pivots l; the rows/columns of padded nodes are computed but
        meaningless.
      node_time_BxN: optional integer node times: causal masking, edge (i, j)
        attends over pivots l with t_l <= max(t_i, t_j) (module docstring).
        impl='pallas' and 'pallas_fused' do not support it.
      deterministic: False applies `attention_dropout_rate` (if > 0).
    """
    shapes.check_choice(self.ablation, ABLATIONS, "ablation")
    shapes.check_choice(self.impl, IMPLS, "impl")
    if not 0.0 <= self.attention_dropout_rate < 1.0:
      raise ValueError(
          "attention_dropout_rate must be in [0, 1), got "
          f"{self.attention_dropout_rate}."
      )
    shapes.check_shape(x_BxNxNxD, ("B", "N", "N", "D"), "x_BxNxNxD")
    b, n, n2, d = x_BxNxNxD.shape
    shapes.check_equal(
        n,
        n2,
        "x_BxNxNxD must have equal node axes 1 and 2 (got shape "
        f"{tuple(x_BxNxNxD.shape)})",
    )
    shapes.check_divides(d, self.num_heads, "width D")
    if node_mask_BxN is None:
      node_mask_BxN = jnp.ones((b, n), bool)
    shapes.check_shape(node_mask_BxN, (b, n), "node_mask_BxN")
    online_softmax.check_chunk_size(self.chunk_size)

    if node_time_BxN is not None:
      shapes.check_shape(node_time_BxN, (b, n), "node_time_BxN")
      if not jnp.issubdtype(jnp.asarray(node_time_BxN).dtype, jnp.integer):
        raise ValueError(
            "node_time_BxN must be integer, got dtype "
            f"{jnp.asarray(node_time_BxN).dtype}."
        )
    if node_time_BxN is not None and self.impl in _PALLAS:
      raise ValueError(
          "node_time_BxN (causal masking) is not supported by "
          f"impl={self.impl!r}; use impl='chunked' or 'reference'."
      )

    # One projection of every edge serves all its roles: x_il as query/left
    # value (pivot on axis 2) and x_lj as key/right value (pivot on axis 1).
    q_BxNxLxHxK, k, v1_BxNxLxHxK, v2_BxLxNxHxK = self.project(x_BxNxNxD)
    key_ij = self.ablation == "attention"

    if not deterministic and self.attention_dropout_rate > 0.0:
      return triangular_attention_reference(
          q_BxNxLxHxK,
          k,
          v1_BxNxLxHxK,
          v2_BxLxNxHxK,
          node_mask_BxN,
          node_time_BxL=node_time_BxN,
          key_ij=key_ij,
          attention_dropout=(
              self.attention_dropout_rate,
              self.make_rng("dropout"),
          ),
      )
    if self.impl == "chunked":
      o_BxNxNxHxK = triangular_attention_core(
          q_BxNxLxHxK,
          k,
          v1_BxNxLxHxK,
          v2_BxLxNxHxK,
          node_mask_BxN,
          node_time_BxL=node_time_BxN,
          chunk_size=self.chunk_size,
          key_ij=key_ij,
      )
    elif self.impl in _PALLAS:
      o_BxNxNxHxK = triangular_attention_pallas(
          q_BxNxLxHxK,
          k,
          v1_BxNxLxHxK,
          v2_BxLxNxHxK,
          node_mask_BxN,
          key_ij=key_ij,
          block_size=self.pallas_block_size,
          interpret=self.interpret,
          chunk_size=self.chunk_size,
          backward="chunked" if self.impl == "pallas" else "pallas",
      )
    else:
      o_BxNxNxHxK = triangular_attention_reference(
          q_BxNxLxHxK,
          k,
          v1_BxNxLxHxK,
          v2_BxLxNxHxK,
          node_mask_BxN,
          node_time_BxL=node_time_BxN,
          key_ij=key_ij,
      )
    return o_BxNxNxHxK
