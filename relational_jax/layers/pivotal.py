"""Pivotal attention (FloydNet, Yu, Zeng & Ye 2026, arXiv 2601.19094).

A pair state X (B x N x N x D, like the Edge Transformer's)
attends, for each pair, over pivot nodes. In the paper's letters the pair is
(i, k) and the pivot j:

  s_ikj = (q_ik . k_ij + q_ik . k_jk) * scale    (scale 1/sqrt(2 K) by default)
  y_ik  = sum_j softmax_j(s)_ikj (v_ij + v_jk)

with q, both keys and both values five linear maps of X, per head. Here, as in
`relational_jax.layers.triangular`, arrays are named in the axis letters of
`relational_jax.layers.shapes`: the pair is (i, j) (axes I x J, both of size N
for a graph) and the pivot l (axis L), so the same equation reads

  s_ijl = (q_ij . k_il + q_ij . k_lj) * scale
  y_ij  = sum_l softmax_l(s)_ijl (v_il + v_lj).

Both sums are batched matrix products (per head and row i, (J x K) @ (K x L);
per column j, (I x K) @ (K x L)), unlike the triangular attention's
elementwise v_il * v_lj.

Options, as the authors' `pivotal_attention` (ocx-lab/FloydNet,
src/floydnet/functional.py):
  softmax_cap > 0   s <- cap * tanh(s / cap), before the mask.
  attn_mask         broadcastable to (B, H, I, J, L) in their pair/pivot
                    order (b, h, i, k, j). Boolean: True = masked, the score
                    is replaced by -mask_value (their `inf`, 1e9; a row with
                    every pivot masked so gets uniform weights, as theirs).
                    Otherwise additive: added to the (capped) score.
  dropout           on the softmax weights (inverted dropout; a PRNG key).
Ours adds `node_mask_BxL` (False = padded node, never a pivot: their boolean
mask with a B x 1 x 1 x 1 x L shape) and the chunking below.

Memory. The score tensor has B H N^3 entries. Here the pivot sum runs over
chunks of `chunk_size` (C) pivots with an online (flash attention style)
softmax whose statistics and accumulators are fp32, so a step holds one
B x H x N x N x C score block and activations are O(B N^2 (D + C H)). The
backward pass is a `jax.custom_vjp` that saves only the inputs, the output
and the fp32 softmax statistics (row maximum and sum) and recomputes each
chunk's weights (and its dropout mask, from the key folded with the chunk
index); every product in it is a batched GEMM as well. When C does not
divide N the last chunk starts at N - C and the pivots it shares with the
previous chunk are excluded. The chunk loop, the softmax statistics and the
custom VJP are `relational_jax.layers.online_softmax`'s (shared with the
triangular attention); this module supplies the scores, value sums and
gradients of one chunk.

impl='pallas' computes the forward pass with a Pallas kernel instead: one
program per (b, h, i-block, j-block) tile streams the pivots l one at a time
with the same fp32 online softmax and writes the output and the same
statistics (m, l), so gradients come from the chunked backward above. It
takes node masks (and boolean attn_masks of whole pivots) but no other
attn_mask and no dropout. impl='pallas_fused' computes the backward pass
with Pallas kernels too: the flash-attention backward with three owners
((i, j) tiles for dq, (i, l) tiles for dk_il and dv_il, (l, j) tiles for
dk_lj and dv_lj), each recomputing its weights from (m, l) one streamed
index at a time, so no N^3 block is formed (O(B H N^2 K) memory).
The kernels are `relational_jax.layers.pivotal_pallas`'s; `interpret=True`
runs them on CPU (the tests); the compiled GPU path is timed by
experiments/bench/gpu_check.py.
"""

import math
from typing import Any, NamedTuple, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from relational_jax.layers import dense as dense_lib
from relational_jax.layers import online_softmax
from relational_jax.layers import pivotal_pallas
from relational_jax.layers import shapes

__all__ = [
    "PivotalAttention",
    "pivotal_attention",
    "pivotal_attention_core",
    "pivotal_attention_reference",
    "MASK_VALUE",
    "IMPLS",
]

Array = jax.Array

# The authors' `inf`: boolean-masked scores become -MASK_VALUE.
MASK_VALUE = 1e9

# The computations of the core: 'chunked' (XLA online softmax, custom VJP),
# 'pallas' (the same statistics from a Pallas forward kernel, the chunked
# backward) or 'pallas_fused' (Pallas kernels forward and backward).
IMPLS = ("chunked", "pallas", "pallas_fused")
_PALLAS = ("pallas", "pallas_fused")


class _Static(NamedTuple):
  """The hashable (non-differentiable) settings of one call."""

  chunk_size: Optional[int]
  scale: float
  softmax_cap: float  # <= 0: no cap
  mask_value: float
  dropout_rate: float
  mask_kind: Optional[str]  # None, 'bool' or 'additive'
  block_size: int = 16  # the (i, j) tile of the Pallas kernel
  interpret: bool = False  # the Pallas kernel in interpret mode


# ----------------------------------------------------------------------------
# Core: chunked over the pivot axis L, online softmax, custom VJP. Layout
# (B, H, I, J, K) for the queries, as the authors' functional form.
# ----------------------------------------------------------------------------


class _Operands(NamedTuple):
  """The loop invariants of one call, laid out and cast once, outside the
  chunk loop (XLA:CPU would otherwise copy them in every chunk).

  The products over the pivots batched over the second pair axis j (q_ij .
  k_lj, and their partners in the backward pass) are GEMMs only with J-major
  operands: the backward pass keeps the queries in both layouts (the forward
  pass, where XLA:CPU does not copy them per chunk, only I-major), and the
  values are kept in fp32.
  """

  qs_BxHxIxJxK: Array  # scaled queries, I-major
  qs_BxHxJxIxK: Optional[Array]  # the same, J-major (None: not made)
  k_BxHxIxLxK: Array  # k_il
  k_BxHxLxJxK: Array  # k_lj
  v_BxHxIxLxK: Array  # v_il, fp32
  v_BxHxLxJxK: Array  # v_lj, fp32


def _operands(static, q, k_il, k_lj, v_il, v_lj, j_major):
  """The operands of the chunk loop (the queries scaled in their dtype; with
  `j_major`, a J-major copy of them as well)."""
  qs = q * jnp.asarray(static.scale, q.dtype)
  return _Operands(
      qs_BxHxIxJxK=qs,
      qs_BxHxJxIxK=jnp.swapaxes(qs, 2, 3) if j_major else None,
      k_BxHxIxLxK=k_il,
      k_BxHxLxJxK=k_lj,
      v_BxHxIxLxK=v_il.astype(jnp.float32),
      v_BxHxLxJxK=v_lj.astype(jnp.float32),
  )


class _Chunk(NamedTuple):
  pivots: online_softmax.Chunk  # which pivots
  k_BxHxIxCxK: Array  # k_il of the chunk's pivots
  k_BxHxCxJxK: Array  # k_lj
  v_BxHxIxCxK: Array  # v_il, fp32
  v_BxHxCxJxK: Array  # v_lj, fp32
  mask: Optional[Array]  # attn_mask's pivot slice (rank 5)
  node_Bx1x1x1xC: Optional[Array]  # True for real pivots
  keep_BxHxIxJxC: Optional[Array]  # dropout keep mask


def _chunk(pivots, static, ops, mask, node, rng):
  """The arrays of one chunk of pivots (`online_softmax.Chunk`), sliced in
  place."""
  b, h, num_i, num_j, _ = ops.qs_BxHxIxJxK.shape
  take = pivots.take
  if mask is not None and mask.shape[4] != 1:
    mask = take(mask, 4)
  node_c = None
  if node is not None:
    node_c = take(node, 1)[:, None, None, None, :]
  keep = None
  if static.dropout_rate > 0.0:
    keep = jax.random.bernoulli(
        jax.random.fold_in(rng, pivots.index),
        1.0 - static.dropout_rate,
        (b, h, num_i, num_j, pivots.size),
    )
  return _Chunk(
      pivots=pivots,
      k_BxHxIxCxK=take(ops.k_BxHxIxLxK, 3),
      k_BxHxCxJxK=take(ops.k_BxHxLxJxK, 2),
      v_BxHxIxCxK=take(ops.v_BxHxIxLxK, 3),
      v_BxHxCxJxK=take(ops.v_BxHxLxJxK, 2),
      mask=mask,
      node_Bx1x1x1xC=node_c,
      keep_BxHxIxJxC=keep,
  )


def _scores(static, ops, c):
  """(t, s) for one chunk, fp32, B x H x I x J x C.

  t_ijl = qs_ij . k_il + qs_ij . k_lj (qs: the scaled queries; the second
  product batched over j, from the J-major copy if made); s is t capped, masked
  (boolean fill or additive), with padded pivots filled like boolean-masked
  ones, and -inf for the pivots this chunk does not own.
  """
  t = jnp.einsum(
      "bhijk,bhilk->bhijl",
      ops.qs_BxHxIxJxK,
      c.k_BxHxIxCxK,
      preferred_element_type=jnp.float32,
  )
  if ops.qs_BxHxJxIxK is None:
    t = t + jnp.einsum(
        "bhijk,bhljk->bhijl",
        ops.qs_BxHxIxJxK,
        c.k_BxHxCxJxK,
        preferred_element_type=jnp.float32,
    )
  else:
    t = t + jnp.einsum(
        "bhjik,bhljk->bhijl",
        ops.qs_BxHxJxIxK,
        c.k_BxHxCxJxK,
        preferred_element_type=jnp.float32,
    )
  s = t
  if static.softmax_cap > 0.0:
    s = static.softmax_cap * jnp.tanh(s / static.softmax_cap)
  if static.mask_kind == "bool":
    s = jnp.where(c.mask, -static.mask_value, s)
  elif static.mask_kind == "additive":
    s = s + c.mask.astype(jnp.float32)
  if c.node_Bx1x1x1xC is not None:
    s = jnp.where(c.node_Bx1x1x1xC, s, -static.mask_value)
  return t, jnp.where(c.pivots.owned_C, s, -jnp.inf)


def _dropped(static, w, c):
  """w * keep / (1 - rate): the dropped weights (w itself without dropout)."""
  if c.keep_BxHxIxJxC is None:
    return w
  return jnp.where(c.keep_BxHxIxJxC, w / (1.0 - static.dropout_rate), 0.0)


def _forward(static, q, k_il, k_lj, v_il, v_lj, mask, node, rng):
  """Online-softmax forward (`online_softmax.forward`).

  Returns y_BxHxIxJxK and the fp32 softmax statistics (m, l), each
  B x H x I x J: softmax_l(s)_ijl = exp(s_ijl - m_ij) / l_ij.
  """
  ops = _operands(static, q, k_il, k_lj, v_il, v_lj, j_major=False)

  def chunk_scores(pivots):
    c = _chunk(pivots, static, ops, mask, node, rng)
    _, s_BxHxIxJxC = _scores(static, ops, c)

    def accumulate(acc_BxHxIxJxK, p_BxHxIxJxC):
      w_BxHxIxJxC = _dropped(static, p_BxHxIxJxC, c)
      return (
          acc_BxHxIxJxK
          + jnp.einsum(  # sum_l w_ijl v_il
              "bhijl,bhilk->bhijk", w_BxHxIxJxC, c.v_BxHxIxCxK
          )
          + jnp.einsum(  # sum_l w_ijl v_lj
              "bhijl,bhljk->bhijk", w_BxHxIxJxC, c.v_BxHxCxJxK
          )
      )

    return s_BxHxIxJxC, None, accumulate

  y, stats = online_softmax.forward(
      chunk_scores,
      q.shape,
      4,
      k_il.shape[3],
      static.chunk_size,
      online_softmax.MAX_SUM,
  )
  out_dtype = jnp.result_type(q.dtype, v_il.dtype, v_lj.dtype)
  return y.astype(out_dtype), stats


def _sum_to(x, shape):
  """Sums x over the axes where `shape` has size 1 (keeping them)."""
  axes = tuple(a for a, size in enumerate(shape) if size == 1)
  return jnp.sum(x, axis=axes, keepdims=True) if axes else x


def _bmm(lhs_BxHxAxMxN, rhs_BxHxAxNxK):
  """The batched product sum_n lhs_amn rhs_ank -> BxHxAxMxK, fp32, with the
  operands in this order (jnp.einsum may swap them; XLA:CPU's fast GEMMs want
  the summed axis last in the left operand)."""
  return jax.lax.dot_general(
      lhs_BxHxAxMxN,
      rhs_BxHxAxNxK,
      (((4,), (3,)), ((0, 1, 2), (0, 1, 2))),
      preferred_element_type=jnp.float32,
  )


def _backward(static, q, k_il, k_lj, v_il, v_lj, mask, node, rng, y, stats, dy):
  """Flash-style backward: each chunk's weights recomputed from (m, l).

  With w = dropped softmax weights and u_ijl = v_il + v_lj:
    dv_il = sum_j w_ijl dy_ij,  dv_lj = sum_i w_ijl dy_ij,
    ds_ijl = p_ijl (dy_ij . u_ijl * keep / (1 - rate) - dy_ij . y_ij),
  then back through the mask and the cap to dt, and
    dq_ij = scale sum_l dt_ijl (k_il + k_lj),
    dk_il = scale sum_j dt_ijl q_ij,  dk_lj = scale sum_i dt_ijl q_ij.
  Gradients are accumulated in fp32 carries, chunk by chunk; the products
  batched over j read J-major copies of dy and the queries made (and cast to
  fp32) once, before the loop, and dq's second sum is accumulated J-major.
  """
  b, h, num_i, num_j, kk = q.shape
  ops = _operands(static, q, k_il, k_lj, v_il, v_lj, j_major=True)
  qs_BxHxIxJxK = ops.qs_BxHxIxJxK.astype(jnp.float32)
  qs_BxHxJxIxK = ops.qs_BxHxJxIxK.astype(jnp.float32)
  dy_BxHxIxJxK = dy.astype(jnp.float32)
  dy_BxHxJxIxK = jnp.swapaxes(dy_BxHxIxJxK, 2, 3)
  delta_BxHxIxJ = jnp.sum(dy_BxHxIxJxK * y.astype(jnp.float32), axis=-1)

  def step(grads, pivots):
    dq_BxHxIxJxK, dq_BxHxJxIxK, dk_il, dk_lj, dv_il, dv_lj, dmask = grads
    c = _chunk(pivots, static, ops, mask, node, rng)
    t, s = _scores(static, ops, c)
    # 0 for the pivots not owned (s = -inf).
    p = online_softmax.probabilities(s, None, stats, 4, online_softmax.MAX_SUM)
    w = _dropped(static, p, c)
    # The sums over i (batched over j) are GEMMs with the chunk's block laid
    # out J x C x I, the summed axis last (XLA:CPU's fast GEMM form).
    w_BxHxJxCxI = jnp.transpose(w, (0, 1, 3, 4, 2))
    dv_il = pivots.add(
        dv_il, jnp.einsum("bhijl,bhijk->bhilk", w, dy_BxHxIxJxK), 3
    )
    dv_lj = pivots.add(
        dv_lj, jnp.swapaxes(_bmm(w_BxHxJxCxI, dy_BxHxJxIxK), 2, 3), 2
    )
    dw = jnp.einsum(
        "bhijk,bhilk->bhijl", dy_BxHxIxJxK, c.v_BxHxIxCxK
    ) + jnp.einsum("bhjik,bhljk->bhijl", dy_BxHxJxIxK, c.v_BxHxCxJxK)
    ds = online_softmax.softmax_grad(
        p, _dropped(static, dw, c), delta_BxHxIxJ, 4
    )
    ds = jnp.where(pivots.owned_C, ds, 0.0)
    if c.node_Bx1x1x1xC is not None:  # padded pivots: filled, constant
      ds = jnp.where(c.node_Bx1x1x1xC, ds, 0.0)
    if static.mask_kind == "bool":
      ds = jnp.where(c.mask, 0.0, ds)
    elif static.mask_kind == "additive":  # d s / d mask = 1
      reduced = _sum_to(ds, c.mask.shape[:4] + (ds.shape[4],))
      if mask.shape[4] == 1:
        dmask = dmask + jnp.sum(reduced, axis=4, keepdims=True)
      else:
        dmask = pivots.add(dmask, reduced, 4)
    dt = ds
    if static.softmax_cap > 0.0:
      dt = ds * (1.0 - jnp.square(jnp.tanh(t / static.softmax_cap)))
    dq_BxHxIxJxK = dq_BxHxIxJxK + jnp.einsum(
        "bhijl,bhilk->bhijk", dt, c.k_BxHxIxCxK.astype(jnp.float32)
    )
    dq_BxHxJxIxK = dq_BxHxJxIxK + jnp.einsum(
        "bhijl,bhljk->bhjik", dt, c.k_BxHxCxJxK.astype(jnp.float32)
    )
    dt_BxHxJxCxI = jnp.transpose(dt, (0, 1, 3, 4, 2))
    dk_il = pivots.add(
        dk_il, jnp.einsum("bhijl,bhijk->bhilk", dt, qs_BxHxIxJxK), 3
    )
    dk_lj = pivots.add(
        dk_lj, jnp.swapaxes(_bmm(dt_BxHxJxCxI, qs_BxHxJxIxK), 2, 3), 2
    )
    return dq_BxHxIxJxK, dq_BxHxJxIxK, dk_il, dk_lj, dv_il, dv_lj, dmask

  zeros = lambda x: jnp.zeros(x.shape, jnp.float32)
  init = (
      zeros(q),
      jnp.zeros((b, h, num_j, num_i, kk), jnp.float32),
      zeros(k_il),
      zeros(k_lj),
      zeros(v_il),
      zeros(v_lj),
      zeros(mask) if static.mask_kind == "additive" else jnp.zeros((0,)),
  )
  dq_BxHxIxJxK, dq_BxHxJxIxK, dk_il, dk_lj, dv_il, dv_lj, dmask = (
      online_softmax.backward(step, init, k_il.shape[3], static.chunk_size)
  )
  dq = (dq_BxHxIxJxK + jnp.swapaxes(dq_BxHxJxIxK, 2, 3)) * static.scale
  # Scaling q by `scale` in its dtype: keys' gradients used the scaled q.
  return (
      dq.astype(q.dtype),
      dk_il.astype(k_il.dtype),
      dk_lj.astype(k_lj.dtype),
      dv_il.astype(v_il.dtype),
      dv_lj.astype(v_lj.dtype),
      dmask.astype(mask.dtype) if static.mask_kind == "additive" else None,
      None,  # node
      None,  # rng
  )


_pivotal = online_softmax.recomputing_vjp(_forward, _backward)
# impl='pallas': the Pallas forward kernel, the chunked backward from its y
# and (m, l); impl='pallas_fused': Pallas kernels both ways.
_pivotal_pallas = online_softmax.recomputing_vjp(
    pivotal_pallas.forward, _backward
)
_pivotal_pallas_fused = online_softmax.recomputing_vjp(
    pivotal_pallas.forward, pivotal_pallas.backward
)


def _node_only_mask(mask, node, full_shape):
  """A boolean attn_mask that masks whole pivots (shape B x 1 x 1 x 1 x L
  or 1 x 1 x 1 x 1 x L) folded into the node mask (True = real pivot), for
  the Pallas impls; ValueError for any other attn_mask."""
  b, _, _, _, num_l = full_shape
  if mask.dtype != jnp.bool_ or mask.shape[1:4] != (1, 1, 1):
    kind = "a boolean" if mask.dtype == jnp.bool_ else "an additive"
    raise ValueError(
        f"impl='pallas' and 'pallas_fused' do not support {kind} attn_mask of"
        f" shape {tuple(mask.shape)}: only a boolean mask of whole pivots"
        " (shape (B or 1, 1, 1, 1, L)) or node_mask_BxL; use impl='chunked'."
    )
  real_BxL = jnp.broadcast_to(~mask[:, 0, 0, 0, :], (b, num_l))
  return real_BxL if node is None else node & real_BxL


def _mask_rank5(attn_mask, full_shape):
  """attn_mask as a rank-5 array broadcastable to `full_shape` (B, H, I, J,
  L), its kind ('bool' or 'additive'), or (None, None)."""
  if attn_mask is None:
    return None, None
  attn_mask = jnp.asarray(attn_mask)
  if attn_mask.ndim > 5:
    raise ValueError(
        f"attn_mask must be broadcastable to (B, H, I, J, L) = {full_shape}, "
        f"got shape {attn_mask.shape}."
    )
  mask = attn_mask.reshape((1,) * (5 - attn_mask.ndim) + attn_mask.shape)
  for got, want in zip(mask.shape, full_shape):
    if got not in (1, want):
      raise ValueError(
          "attn_mask must be broadcastable to (B, H, I, J, L) = "
          f"{full_shape}, got shape {attn_mask.shape}."
      )
  kind = "bool" if mask.dtype == jnp.bool_ else "additive"
  return mask, kind


def pivotal_attention_core(
    q_BxHxIxJxK: Array,
    k_BxHxIxLxK: Array,
    k_BxHxLxJxK: Array,
    v_BxHxIxLxK: Array,
    v_BxHxLxJxK: Array,
    node_mask_BxL: Optional[Array] = None,
    *,
    attn_mask: Optional[Array] = None,
    scale: Optional[float] = None,
    softmax_cap: float = -1.0,
    mask_value: float = MASK_VALUE,
    dropout_rate: float = 0.0,
    dropout_rng: Optional[Array] = None,
    chunk_size: Optional[int] = 8,
    impl: str = "chunked",
    block_size: int = 16,
    interpret: Optional[bool] = None,
) -> Array:
  """Per-head pivotal attention, memory-lean (module docstring):

    y_ij = sum_l softmax_l(s)_ijl (v_il + v_lj),
    s_ijl = (q_ij . k_il + q_ij . k_lj) * scale   (FloydNet's pivotal attention).

  Args:
    q_BxHxIxJxK: queries of the pairs (i, j) (the paper's q_ik).
    k_BxHxIxLxK, k_BxHxLxJxK: keys k_il and k_lj (the paper's k_ij, k_jk).
    v_BxHxIxLxK, v_BxHxLxJxK: values v_il and v_lj (the paper's v_ij, v_jk).
    node_mask_BxL: optional, True for real nodes; padded pivots get the
      score -mask_value (as a boolean attn_mask of shape B x 1 x 1 x 1 x L).
    attn_mask: optional, broadcastable to (B, H, I, J, L); boolean (True =
      masked, score -mask_value) or additive (no gradient is lost: its
      cotangent is returned).
    scale: score scale; None: 1 / sqrt(2 K).
    softmax_cap: > 0: s <- cap * tanh(s / cap) before the mask.
    mask_value: the magnitude of a masked score (the authors' `inf`).
    dropout_rate: dropout on the softmax weights; needs dropout_rng.
    dropout_rng: PRNG key of the dropout masks (one per chunk, the key
      folded with the chunk index: a different chunk_size draws different
      masks from the same distribution).
    chunk_size: pivots per chunk (None: all at once); need not divide L.
      With impl='pallas', the chunks of the backward pass; unused by
      'pallas_fused'.
    impl: 'chunked' (XLA, default), 'pallas' (a Pallas forward kernel, the
      chunked backward) or 'pallas_fused' (Pallas kernels forward and
      backward; module docstring). The Pallas impls support no dropout and,
      as attn_mask, only a boolean mask of whole pivots (shape (B or 1, 1,
      1, 1, L)); node_mask_BxL is the way to mask padded nodes.
    block_size: the tiles of the Pallas kernels, a power of two.
    interpret: run the Pallas kernel in interpret mode; None: when
      jax.default_backend() is 'cpu'.

  Returns:
    y_BxHxIxJxK in the inputs' dtype (softmax statistics and sums in fp32).
  """
  shapes.check_shape(q_BxHxIxJxK, ("B", "H", "I", "J", "K"), "q_BxHxIxJxK")
  b, h, num_i, num_j, kk = q_BxHxIxJxK.shape
  shapes.check_shape(k_BxHxIxLxK, (b, h, num_i, "L", kk), "k_BxHxIxLxK")
  num_l = k_BxHxIxLxK.shape[3]
  for name, arr, want in (
      ("k_BxHxLxJxK", k_BxHxLxJxK, (b, h, num_l, num_j, kk)),
      ("v_BxHxIxLxK", v_BxHxIxLxK, (b, h, num_i, num_l, kk)),
      ("v_BxHxLxJxK", v_BxHxLxJxK, (b, h, num_l, num_j, kk)),
  ):
    shapes.check_shape(arr, want, name)
  online_softmax.check_chunk_size(chunk_size)
  shapes.check_choice(impl, IMPLS, "impl")
  if impl in _PALLAS:
    online_softmax.check_block_size(block_size)
    if dropout_rate > 0.0:
      raise ValueError(
          "dropout_rate > 0 (dropout on the attention weights) is not "
          f"supported by impl={impl!r} (got {dropout_rate}); use "
          "impl='chunked'."
      )
  if not 0.0 <= dropout_rate < 1.0:
    raise ValueError(f"dropout_rate must be in [0, 1), got {dropout_rate}.")
  if dropout_rate > 0.0 and dropout_rng is None:
    raise ValueError("dropout_rate > 0 needs a dropout_rng (a PRNG key).")
  if node_mask_BxL is not None:
    node_mask_BxL = jnp.asarray(node_mask_BxL).astype(bool)
    shapes.check_shape(node_mask_BxL, (b, num_l), "node_mask_BxL")
  mask, kind = _mask_rank5(attn_mask, (b, h, num_i, num_j, num_l))
  static = _Static(
      chunk_size=chunk_size,
      scale=float(1.0 / math.sqrt(2.0 * kk) if scale is None else scale),
      softmax_cap=float(softmax_cap if softmax_cap is not None else -1.0),
      mask_value=float(mask_value),
      dropout_rate=float(dropout_rate),
      mask_kind=kind,
  )
  if impl in _PALLAS:
    if mask is not None:
      node_mask_BxL = _node_only_mask(
          mask, node_mask_BxL, (b, h, num_i, num_j, num_l)
      )
    fn = _pivotal_pallas if impl == "pallas" else _pivotal_pallas_fused
    return fn(
        static._replace(
            mask_kind=None,
            block_size=block_size,
            interpret=online_softmax.interpret_mode(interpret),
        ),
        q_BxHxIxJxK,
        k_BxHxIxLxK,
        k_BxHxLxJxK,
        v_BxHxIxLxK,
        v_BxHxLxJxK,
        None,
        node_mask_BxL,
        None,
    )
  return _pivotal(
      static,
      q_BxHxIxJxK,
      k_BxHxIxLxK,
      k_BxHxLxJxK,
      v_BxHxIxLxK,
      v_BxHxLxJxK,
      mask,
      node_mask_BxL,
      dropout_rng if dropout_rate > 0.0 else None,
  )


def pivotal_attention(
    q_ik: Array,
    k_ij: Array,
    k_jk: Array,
    v_ij: Array,
    v_jk: Array,
    attn_mask: Optional[Array] = None,
    dropout: float = 0.0,
    scale: Optional[float] = None,
    inf: float = MASK_VALUE,
    softmax_cap: float = -1,
    *,
    chunk_size: Optional[int] = None,
    dropout_rng: Optional[Array] = None,
    impl: str = "chunked",
    block_size: int = 16,
    interpret: Optional[bool] = None,
) -> Array:
  """The authors' functional form (FloydNet's `pivotal_attention`), in JAX.

    y_ik = sum_j softmax_j(s)_ikj (v_ij + v_jk),
    s_ikj = (q_ik . k_ij + q_ik . k_jk) * scale      (FloydNet, their letters)

  Same argument order, names and (B, H, N, N, D) layout (D: the head width):
  q_ik (B, H, I, K, D); k_ij, v_ij (B, H, I, J, D); k_jk, v_jk
  (B, H, J, K, D); attn_mask broadcastable to (B, H, I, K, J), boolean
  (True = masked: score -inf, their `inf` = 1e9) or additive (added after
  the cap); dropout on the weights; scale None = 1 / sqrt(2 D);
  softmax_cap > 0 caps the scores with cap * tanh(s / cap). Returns y_ik
  (B, H, I, K, D).

  Differences: dropout needs `dropout_rng` (theirs draws from torch's global
  generator whenever dropout > 0: pass dropout=0.0 at evaluation); the sum
  runs over chunks of `chunk_size` pivots (None: all at once) with an online
  softmax and a memory-lean backward (`pivotal_attention_core`); impl,
  block_size and interpret select its Pallas kernels (impl='pallas' or
  'pallas_fused': no dropout, attn_mask only boolean of whole pivots).
  """
  return pivotal_attention_core(
      q_ik,
      k_ij,
      k_jk,
      v_ij,
      v_jk,
      attn_mask=attn_mask,
      scale=scale,
      softmax_cap=softmax_cap,
      mask_value=inf,
      dropout_rate=dropout,
      dropout_rng=dropout_rng,
      chunk_size=chunk_size,
      impl=impl,
      block_size=block_size,
      interpret=interpret,
  )


def pivotal_attention_reference(
    q_BxHxIxJxK: Array,
    k_BxHxIxLxK: Array,
    k_BxHxLxJxK: Array,
    v_BxHxIxLxK: Array,
    v_BxHxLxJxK: Array,
    node_mask_BxL: Optional[Array] = None,
    *,
    attn_mask: Optional[Array] = None,
    scale: Optional[float] = None,
    softmax_cap: float = -1.0,
    mask_value: float = MASK_VALUE,
) -> Array:
  """Materialising reference (the whole B x H x I x J x L score tensor, plain
  autodiff, no dropout); tests and benchmarks only."""
  kk = q_BxHxIxJxK.shape[-1]
  scale = 1.0 / math.sqrt(2.0 * kk) if scale is None else scale
  qs = q_BxHxIxJxK * scale
  s = jnp.einsum(
      "bhijk,bhilk->bhijl", qs, k_BxHxIxLxK, preferred_element_type=jnp.float32
  ) + jnp.einsum(
      "bhijk,bhljk->bhijl", qs, k_BxHxLxJxK, preferred_element_type=jnp.float32
  )
  if softmax_cap is not None and softmax_cap > 0:
    s = softmax_cap * jnp.tanh(s / softmax_cap)
  if attn_mask is not None:
    attn_mask = jnp.asarray(attn_mask)
    if attn_mask.dtype == jnp.bool_:
      s = jnp.where(attn_mask, -mask_value, s)
    else:
      s = s + attn_mask
  if node_mask_BxL is not None:
    node = jnp.asarray(node_mask_BxL).astype(bool)[:, None, None, None, :]
    s = jnp.where(node, s, -mask_value)
  w = jax.nn.softmax(s, axis=-1)
  y = jnp.einsum("bhijl,bhilk->bhijk", w, v_BxHxIxLxK) + jnp.einsum(
      "bhijl,bhljk->bhijk", w, v_BxHxLxJxK
  )
  return y.astype(q_BxHxIxJxK.dtype)


# ----------------------------------------------------------------------------
# Flax module.
# ----------------------------------------------------------------------------


class PivotalAttention(nn.Module):
  """Multi-head pivotal attention on a pair state (FloydNet, arXiv 2601.19094):

    [q; k^1; k^2; v^1; v^2]_ij = W^qkv x_ij       (one map, 5 D outputs),
    y^h_ij = sum_l softmax_l(s^h)_ijl (v^1h_il + v^2h_lj),
    s^h_ijl = (q^h_ij . k^1h_il + q^h_ij . k^2h_lj) * scale,
    a_ij = W^o [y^1_ij; ...; y^H_ij].

  The authors' block (ocx-lab/FloydNet `PivotalAttentionBlock.attn`): their
  `c_qkv` is our 'qkv' (the five D-wide outputs in the order q_ik, k_ij,
  k_jk, v_ij, v_jk, each split head-major into H x K), their `c_proj` our
  'out'. Initialisation as theirs: Xavier-uniform 'qkv' (fan-in D, fan-out
  5 D), zero 'out' and zero biases.

  Attributes:
    num_heads: H; must divide the width D (K = D / H).
    chunk_size: pivots per step of the online softmax (None: all at once).
    use_bias: biases on both maps (the authors' default: none).
    attention_dropout_rate: dropout on the softmax weights when
      deterministic=False (a 'dropout' rng).
    scale: score scale; None: 1 / sqrt(2 K).
    softmax_cap: > 0 caps the scores at +-cap with cap * tanh(s / cap).
    mask_value: magnitude of a masked score (the authors' `inf`, 1e9).
    dtype: computation dtype (None: the input's); softmax statistics fp32.
    param_dtype: parameter dtype.
    impl: 'chunked' (XLA), 'pallas' (Pallas forward kernel, chunked
      backward) or 'pallas_fused' (Pallas kernels both ways); the Pallas
      impls: no attention dropout in training, attn_mask only boolean of
      whole pivots; see `pivotal_attention_core`.
    pallas_block_size: the tiles of the Pallas kernels (a power of two).
    interpret: run the Pallas kernel in interpret mode; None: on CPU.
  """

  num_heads: int
  chunk_size: Optional[int] = 8
  use_bias: bool = False
  attention_dropout_rate: float = 0.0
  scale: Optional[float] = None
  softmax_cap: float = -1.0
  mask_value: float = MASK_VALUE
  dtype: Optional[Any] = None
  param_dtype: Any = jnp.float32
  kernel_init: Any = nn.initializers.xavier_uniform()
  out_init: Any = nn.initializers.zeros_init()
  impl: str = "chunked"
  pallas_block_size: int = 16
  interpret: Optional[bool] = None

  @nn.compact
  def __call__(
      self,
      x_BxNxNxD: Array,
      node_mask_BxN: Optional[Array] = None,
      attn_mask: Optional[Array] = None,
      deterministic: bool = True,
  ) -> Array:
    """a_BxNxNxD from pair states x_BxNxNxD (x[b, i, j] is pair (i, j)).

    Args:
      x_BxNxNxD: pair states.
      node_mask_BxN: optional, True for real nodes: padded nodes are never
        pivots, so the pairs of real nodes do not see the padding (the
        pairs of padded nodes are computed and meaningless).
      attn_mask: optional, the authors' mask, broadcastable to
        (B, H, N, N, N) in their (b, h, i, k, j) order: boolean (True =
        masked) or additive.
      deterministic: False applies `attention_dropout_rate` (if > 0).
    """
    shapes.check_shape(x_BxNxNxD, ("B", "N", "N", "D"), "x_BxNxNxD")
    b, n, n2, d = x_BxNxNxD.shape
    shapes.check_equal(
        n,
        n2,
        "x_BxNxNxD must have equal node axes 1 and 2 (got shape "
        f"{tuple(x_BxNxNxD.shape)})",
    )
    k_size = shapes.check_divides(d, self.num_heads, "width D")
    if not 0.0 <= self.attention_dropout_rate < 1.0:
      raise ValueError(
          "attention_dropout_rate must be in [0, 1), got "
          f"{self.attention_dropout_rate}."
      )
    shapes.check_choice(self.impl, IMPLS, "impl")
    if (
        self.impl in _PALLAS
        and not deterministic
        and self.attention_dropout_rate > 0.0
    ):
      raise ValueError(
          "attention_dropout_rate > 0 with deterministic=False is not "
          f"supported by impl={self.impl!r}; use impl='chunked' (or "
          "deterministic=True)."
      )
    if node_mask_BxN is not None:
      shapes.check_shape(node_mask_BxN, (b, n), "node_mask_BxN")
    dtype = self.dtype or x_BxNxNxD.dtype
    qkv_BxNxNx5xHxK = dense_lib.DenseGeneral(
        features=(5, self.num_heads, k_size),
        use_bias=self.use_bias,
        dtype=dtype,
        param_dtype=self.param_dtype,
        kernel_init=self.kernel_init,
        name="qkv",
    )(x_BxNxNxD.astype(dtype))
    # Each role BxHxNxNxK: q_ij, k_il (= k of pair (i, l)), k_lj, v_il, v_lj
    # are all read from the same projected pair state.
    q, k_il, k_lj, v_il, v_lj = jnp.moveaxis(
        qkv_BxNxNx5xHxK, (3, 4), (0, 2)
    )  # 5 x BxHxNxNxK
    rate = 0.0 if deterministic else self.attention_dropout_rate
    y_BxHxNxNxK = pivotal_attention_core(
        q,
        k_il,
        k_lj,
        v_il,
        v_lj,
        node_mask_BxN,
        attn_mask=attn_mask,
        scale=self.scale,
        softmax_cap=self.softmax_cap,
        mask_value=self.mask_value,
        dropout_rate=rate,
        dropout_rng=self.make_rng("dropout") if rate > 0.0 else None,
        chunk_size=self.chunk_size,
        impl=self.impl,
        block_size=self.pallas_block_size,
        interpret=self.interpret,
    )
    return dense_lib.DenseGeneral(
        features=d,
        axis=(-2, -1),
        use_bias=self.use_bias,
        dtype=dtype,
        param_dtype=self.param_dtype,
        kernel_init=self.out_init,
        name="out",
    )(jnp.moveaxis(y_BxHxNxNxK, 1, 3))
