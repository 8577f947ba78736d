"""Pallas kernels of pivotal attention (FloydNet, arXiv 2601.19094).

  s_ijl = (q_ij . k_il + q_ij . k_lj) * scale
  y_ij  = sum_l softmax_l(s)_ijl (v_il + v_lj)

`forward` and `backward` have the signatures of `relational_jax.layers.
pivotal`'s `_forward` and `_backward` (the static settings, the five
operands, attn_mask, node mask and dropout key; the backward also y, the
fp32 statistics (m, l) and dy), so `pivotal` pairs them into its
impl='pallas' (this forward, its chunked backward) and impl='pallas_fused'
(both from here). No attn_mask and no dropout: the caller folds a mask of
whole pivots into the node mask. Every axis is zero-padded to a power of
two; `interpret=True` (static) runs the kernels on CPU.
"""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from relational_jax.layers import online_softmax

# ----------------------------------------------------------------------------
# Pallas forward kernel (impl='pallas' and 'pallas_fused').
# ----------------------------------------------------------------------------


def _forward_kernel(
    qs_ref,
    k_il_ref,
    k_lj_ref,
    v_il_ref,
    v_lj_ref,
    node_ref,
    y_ref,
    m_ref,
    l_ref,
    *,
    num_pivots,
    softmax_cap,
    mask_value,
):
  """One (b, h, i-block, j-block) tile: online softmax over the pivots l.

  Refs (b and h squeezed): qs_ref IxJxK (the scaled queries of the tile);
  k_il_ref, v_il_ref IxLxK (the tile's rows, every pivot); k_lj_ref, v_lj_ref
  LxJxK (every pivot, the tile's columns); node_ref L (int32, 1 = real
  pivot); outputs y_ref IxJxK and the fp32 statistics m_ref, l_ref IxJ as
  `_forward`'s. Only the first `num_pivots` pivots (the unpadded ones) are
  visited; the others never enter the sums.
  """
  bi, bj, kp = y_ref.shape
  qs_IxJxK = qs_ref[...].astype(jnp.float32)

  def body(l, carry):
    m_IxJ, sum_IxJ, acc_IxJxK = carry
    k_il_IxK = k_il_ref[:, pl.ds(l, 1), :].reshape(bi, kp).astype(jnp.float32)
    k_lj_JxK = k_lj_ref[pl.ds(l, 1), :, :].reshape(bj, kp).astype(jnp.float32)
    # t_ij = qs_ij . k_il + qs_ij . k_lj (the two sums apart, as `_scores`).
    s_IxJ = jnp.sum(qs_IxJxK * k_il_IxK[:, None, :], axis=-1) + jnp.sum(
        qs_IxJxK * k_lj_JxK[None, :, :], axis=-1
    )
    if softmax_cap > 0.0:
      s_IxJ = softmax_cap * jnp.tanh(s_IxJ / softmax_cap)
    real = node_ref[pl.ds(l, 1)].reshape(1, 1) > 0
    s_IxJ = jnp.where(real, s_IxJ, -mask_value)
    m_new_IxJ = jnp.maximum(m_IxJ, s_IxJ)
    # Every visited pivot has a finite score, so m_new is finite: the first
    # correction is exp(-inf) = 0.
    correction_IxJ = jnp.exp(m_IxJ - m_new_IxJ)
    p_IxJ = jnp.exp(s_IxJ - m_new_IxJ)
    v_il_IxK = v_il_ref[:, pl.ds(l, 1), :].reshape(bi, kp).astype(jnp.float32)
    v_lj_JxK = v_lj_ref[pl.ds(l, 1), :, :].reshape(bj, kp).astype(jnp.float32)
    acc_IxJxK = (
        acc_IxJxK * correction_IxJ[..., None]
        + p_IxJ[..., None] * v_il_IxK[:, None, :]
        + p_IxJ[..., None] * v_lj_JxK[None, :, :]
    )
    return m_new_IxJ, sum_IxJ * correction_IxJ + p_IxJ, acc_IxJxK

  init = (
      jnp.full((bi, bj), -jnp.inf, jnp.float32),
      jnp.zeros((bi, bj), jnp.float32),
      jnp.zeros((bi, bj, kp), jnp.float32),
  )
  m_IxJ, sum_IxJ, acc_IxJxK = jax.lax.fori_loop(0, num_pivots, body, init)
  y_ref[...] = (acc_IxJxK / sum_IxJ[..., None]).astype(y_ref.dtype)
  m_ref[...] = jnp.where(jnp.isneginf(m_IxJ), 0.0, m_IxJ)
  l_ref[...] = sum_IxJ


def forward(static, q, k_il, k_lj, v_il, v_lj, mask, node, rng):
  """Pallas version of `pivotal._forward` (no attn_mask, no dropout): the same
  y_BxHxIxJxK and fp32 statistics (m, l), each B x H x I x J.

  Every axis is zero-padded to a power of two (I and J tiled by blocks of
  `block_size`, at most that power); padded rows and columns are computed
  and dropped, padded pivots are never visited.
  """
  b, h, num_i, num_j, kk = q.shape
  num_l = k_il.shape[3]
  pi, pj, pl_ = (pl.next_power_of_2(n) for n in (num_i, num_j, num_l))
  kp = pl.next_power_of_2(kk)  # Zero padding of K changes no dot product.
  del mask, rng  # None: not supported by the kernel.
  bi, bj = min(static.block_size, pi), min(static.block_size, pj)
  qs_BxHxIxJxK = q * jnp.asarray(static.scale, q.dtype)  # as `_operands`
  if node is None:
    node = jnp.ones((b, num_l), bool)
  node_BxL = online_softmax.pad_to(node.astype(jnp.int32), (b, pl_))
  sq = pl.squeezed
  ij_spec = pl.BlockSpec(
      (sq, sq, bi, bj, kp), lambda bb, hh, i, j: (bb, hh, i, j, 0)
  )
  il_spec = pl.BlockSpec(
      (sq, sq, bi, pl_, kp), lambda bb, hh, i, j: (bb, hh, i, 0, 0)
  )
  lj_spec = pl.BlockSpec(
      (sq, sq, pl_, bj, kp), lambda bb, hh, i, j: (bb, hh, 0, j, 0)
  )
  stats_spec = pl.BlockSpec(
      (sq, sq, bi, bj), lambda bb, hh, i, j: (bb, hh, i, j)
  )
  kernel = functools.partial(
      _forward_kernel,
      num_pivots=num_l,
      softmax_cap=static.softmax_cap,
      mask_value=static.mask_value,
  )
  out_dtype = jnp.result_type(q.dtype, v_il.dtype, v_lj.dtype)
  y, m, l = pl.pallas_call(
      kernel,
      out_shape=(
          jax.ShapeDtypeStruct((b, h, pi, pj, kp), out_dtype),
          jax.ShapeDtypeStruct((b, h, pi, pj), jnp.float32),
          jax.ShapeDtypeStruct((b, h, pi, pj), jnp.float32),
      ),
      grid=(b, h, pi // bi, pj // bj),
      in_specs=[
          ij_spec,
          il_spec,
          lj_spec,
          il_spec,
          lj_spec,
          pl.BlockSpec((sq, pl_), lambda bb, hh, i, j: (bb, 0)),
      ],
      out_specs=(ij_spec, stats_spec, stats_spec),
      interpret=static.interpret,
  )(
      online_softmax.pad_to(qs_BxHxIxJxK, (b, h, pi, pj, kp)),
      online_softmax.pad_to(k_il, (b, h, pi, pl_, kp)),
      online_softmax.pad_to(k_lj, (b, h, pl_, pj, kp)),
      online_softmax.pad_to(v_il, (b, h, pi, pl_, kp)),
      online_softmax.pad_to(v_lj, (b, h, pl_, pj, kp)),
      node_BxL,
  )
  y = y[:, :, :num_i, :num_j, :kk]
  return y, (m[:, :, :num_i, :num_j], l[:, :, :num_i, :num_j])


# ----------------------------------------------------------------------------
# Pallas backward kernels (impl='pallas_fused'): the flash-attention backward
# with three owners. Each kernel recomputes the weights of its tile from the
# saved (m, l) one streamed index at a time and accumulates in fp32:
#   (i, j) tiles, streaming the pivots l:  dq_ij;
#   (i, l) tiles, streaming the columns j: dk_il, dv_il;
#   (l, j) tiles, streaming the rows i:    dk_lj, dv_lj.
# No B x H x N x N x N array and no chunk of one is ever formed.
# ----------------------------------------------------------------------------


def _ds(t, p, dw, delta, real, softmax_cap):
  """dt from one weight block: ds = p (dw - delta) (softmax backward), 0 on
  padded pivots (their score is a constant fill), then back through the
  cap. Shapes broadcast (any tile)."""
  ds = jnp.where(real, p * (dw - delta), 0.0)
  if softmax_cap > 0.0:
    ds = ds * (1.0 - jnp.square(jnp.tanh(t / softmax_cap)))
  return ds


def _weights(t, m, l, real, softmax_cap, mask_value):
  """softmax_l(s) of a tile from the saved statistics (`_scores` and
  `online_softmax.probabilities`, without attn_mask)."""
  s = t
  if softmax_cap > 0.0:
    s = softmax_cap * jnp.tanh(s / softmax_cap)
  s = jnp.where(real, s, -mask_value)
  return jnp.exp(s - m) / l


def _dq_kernel(
    qs_ref,
    k_il_ref,
    k_lj_ref,
    v_il_ref,
    v_lj_ref,
    node_ref,
    dy_ref,
    m_ref,
    l_ref,
    delta_ref,
    dq_ref,
    *,
    num_pivots,
    softmax_cap,
    mask_value,
):
  """One (b, h, i-block, j-block) tile: dq_ij = sum_l dt_ijl (k_il + k_lj)
  (the scaled queries' gradient; the caller multiplies by the scale).

  Refs as `_forward_kernel`'s, plus dy_ref IxJxK and the fp32 m_ref,
  l_ref, delta_ref IxJ (delta_ij = dy_ij . y_ij); out dq_ref IxJxK, fp32.
  """
  bi, bj, kp = dq_ref.shape
  qs_IxJxK = qs_ref[...].astype(jnp.float32)
  dy_IxJxK = dy_ref[...].astype(jnp.float32)
  m_IxJ, l_IxJ, delta_IxJ = m_ref[...], l_ref[...], delta_ref[...]

  def body(l, dq_IxJxK):
    k_il_IxK = k_il_ref[:, pl.ds(l, 1), :].reshape(bi, kp).astype(jnp.float32)
    k_lj_JxK = k_lj_ref[pl.ds(l, 1), :, :].reshape(bj, kp).astype(jnp.float32)
    v_il_IxK = v_il_ref[:, pl.ds(l, 1), :].reshape(bi, kp).astype(jnp.float32)
    v_lj_JxK = v_lj_ref[pl.ds(l, 1), :, :].reshape(bj, kp).astype(jnp.float32)
    real = node_ref[pl.ds(l, 1)].reshape(1, 1) > 0
    t_IxJ = jnp.sum(qs_IxJxK * k_il_IxK[:, None, :], axis=-1) + jnp.sum(
        qs_IxJxK * k_lj_JxK[None, :, :], axis=-1
    )
    p_IxJ = _weights(t_IxJ, m_IxJ, l_IxJ, real, softmax_cap, mask_value)
    dw_IxJ = jnp.sum(dy_IxJxK * v_il_IxK[:, None, :], axis=-1) + jnp.sum(
        dy_IxJxK * v_lj_JxK[None, :, :], axis=-1
    )
    dt_IxJ = _ds(t_IxJ, p_IxJ, dw_IxJ, delta_IxJ, real, softmax_cap)
    return dq_IxJxK + dt_IxJ[..., None] * (
        k_il_IxK[:, None, :] + k_lj_JxK[None, :, :]
    )

  dq_ref[...] = jax.lax.fori_loop(
      0, num_pivots, body, jnp.zeros((bi, bj, kp), jnp.float32)
  )


def _dkv_kernel(
    qs_ref,
    k_il_ref,
    k_lj_ref,
    v_il_ref,
    v_lj_ref,
    node_ref,
    dy_ref,
    m_ref,
    l_ref,
    delta_ref,
    dk_ref,
    dv_ref,
    *,
    stream,
    num_streamed,
    softmax_cap,
    mask_value,
):
  """The keys' and values' gradients of one tile, streaming a pair axis:

    stream='j', an (i, l) tile:  dk_il = sum_j dt_ijl qs_ij,
                                 dv_il = sum_j p_ijl dy_ij;
    stream='i', an (l, j) tile:  dk_lj = sum_i dt_ijl qs_ij,
                                 dv_lj = sum_i p_ijl dy_ij.

  Refs (b and h squeezed): qs_ref, dy_ref IxJxK and m_ref, l_ref, delta_ref
  IxJ (the tile's rows, every column; or every row, the tile's columns);
  k_il_ref, v_il_ref IxLxK and k_lj_ref, v_lj_ref LxJxK (one pair the tile,
  the other every streamed index of the tile's pivots); node_ref L; out
  dk_ref, dv_ref the tile (AxBxK), fp32. Every operand is read in the
  tile's layout A x B (x K), the streamed index's axis of size 1, so one
  body serves both.
  """
  a, c, kp = dk_ref.shape

  def at(ref, axis, x):  # ref with index x of `axis` kept as a size-1 axis
    index = [slice(None)] * len(ref.shape)
    index[axis] = pl.ds(x, 1)
    return ref[tuple(index)]

  if stream == "j":  # A x B = I x L
    own_k, own_v, other_k, other_v = k_il_ref, v_il_ref, k_lj_ref, v_lj_ref
    pair = lambda ref, x: at(ref, 1, x)  # -> I x 1 (x K)
    other = lambda ref, x: at(ref, 1, x).reshape(1, c, kp)
    real = node_ref[...].reshape(1, c) > 0
  else:  # A x B = L x J
    own_k, own_v, other_k, other_v = k_lj_ref, v_lj_ref, k_il_ref, v_il_ref
    pair = lambda ref, x: at(ref, 0, x)  # -> 1 x J (x K)
    other = lambda ref, x: at(ref, 0, x).reshape(a, 1, kp)
    real = node_ref[...].reshape(a, 1) > 0
  own_k = own_k[...].astype(jnp.float32)
  own_v = own_v[...].astype(jnp.float32)
  f32 = lambda x: x.astype(jnp.float32)

  def body(x, carry):
    dk, dv = carry
    qs, dy = f32(pair(qs_ref, x)), f32(pair(dy_ref, x))
    t = jnp.sum(qs * own_k, axis=-1) + jnp.sum(
        qs * f32(other(other_k, x)), axis=-1
    )
    p = _weights(
        t, pair(m_ref, x), pair(l_ref, x), real, softmax_cap, mask_value
    )
    dw = jnp.sum(dy * own_v, axis=-1) + jnp.sum(
        dy * f32(other(other_v, x)), axis=-1
    )
    dt = _ds(t, p, dw, pair(delta_ref, x), real, softmax_cap)
    return dk + dt[..., None] * qs, dv + p[..., None] * dy

  zeros = jnp.zeros((a, c, kp), jnp.float32)
  dk_ref[...], dv_ref[...] = jax.lax.fori_loop(
      0, num_streamed, body, (zeros, zeros)
  )


def backward(static, q, k_il, k_lj, v_il, v_lj, mask, node, rng, y, stats, dy):
  """`pivotal._backward` by the kernels above, over three tilings (no attn_mask, no dropout):
  the same cotangents, from the forward's y and fp32 statistics (m, l).

  Padding as `forward`: padded rows, columns and pivots are
  computed and dropped (their l is padded with ones, so every weight is
  finite) and never streamed.
  """
  b, h, num_i, num_j, kk = q.shape
  num_l = k_il.shape[3]
  pi, pj, pl_ = (pl.next_power_of_2(n) for n in (num_i, num_j, num_l))
  kp = pl.next_power_of_2(kk)
  del mask, rng  # None: not supported by the kernels.
  bi, bj, bl = (min(static.block_size, n) for n in (pi, pj, pl_))
  m, l = stats
  delta_BxHxIxJ = jnp.sum(dy.astype(jnp.float32) * y.astype(jnp.float32), -1)
  if node is None:
    node = jnp.ones((b, num_l), bool)
  full = (b, h, pi, pj)
  operands = (
      online_softmax.pad_to(
          q * jnp.asarray(static.scale, q.dtype), full + (kp,)
      ),
      online_softmax.pad_to(k_il, (b, h, pi, pl_, kp)),
      online_softmax.pad_to(k_lj, (b, h, pl_, pj, kp)),
      online_softmax.pad_to(v_il, (b, h, pi, pl_, kp)),
      online_softmax.pad_to(v_lj, (b, h, pl_, pj, kp)),
      online_softmax.pad_to(node.astype(jnp.int32), (b, pl_)),
      online_softmax.pad_to(dy, full + (kp,)),
      online_softmax.pad_to(m, full),
      jnp.pad(
          l,
          [(0, 0), (0, 0), (0, pi - num_i), (0, pj - num_j)],
          constant_values=1.0,
      ),
      online_softmax.pad_to(delta_BxHxIxJ, full),
  )
  sq = pl.squeezed
  fp32 = jnp.float32

  def spec(block, index):
    """A BlockSpec over (b, h, tile axis 0, tile axis 1) grids; `index`
    maps the tile's two grid indices to the block's index."""
    return pl.BlockSpec(
        (sq, sq) + block, lambda bb, hh, x, z: (bb, hh) + index(x, z)
    )

  def node_spec(size, pick):
    return pl.BlockSpec((sq, size), lambda bb, hh, x, z: (bb, pick(x, z)))

  kernel_options = dict(
      softmax_cap=static.softmax_cap, mask_value=static.mask_value
  )

  def call(kernel, tiles, out_axes, in_specs, out_spec, outputs):
    """`kernel` over (b, h) x `tiles`, `outputs` fp32 arrays B x H x
    `out_axes` x K."""
    return pl.pallas_call(
        kernel,
        out_shape=(jax.ShapeDtypeStruct((b, h, *out_axes, kp), fp32),)
        * outputs,
        grid=(b, h, *tiles),
        in_specs=in_specs,
        out_specs=(out_spec,) * outputs,
        interpret=static.interpret,
    )(*operands)

  # dq: (i, j) tiles, every pivot.
  ij = spec((bi, bj, kp), lambda i, j: (i, j, 0))
  ij_stats = spec((bi, bj), lambda i, j: (i, j))
  rows_pivots = spec((bi, pl_, kp), lambda i, j: (i, 0, 0))
  pivots_cols = spec((pl_, bj, kp), lambda i, j: (0, j, 0))
  (dq,) = call(
      functools.partial(_dq_kernel, num_pivots=num_l, **kernel_options),
      (pi // bi, pj // bj),
      (pi, pj),
      [ij, rows_pivots, pivots_cols, rows_pivots, pivots_cols]
      + [node_spec(pl_, lambda i, j: 0), ij, ij_stats, ij_stats, ij_stats],
      ij,
      1,
  )

  def keys_and_values(stream):
    """(dk, dv) of the (i, l) tiles (stream 'j', every column) or the
    (l, j) tiles (stream 'i', every row); `_dkv_kernel`."""
    if stream == "j":
      tile = spec((bi, bl, kp), lambda i, l_: (i, l_, 0))
      pairs = spec((bi, pj, kp), lambda i, l_: (i, 0, 0))
      stats = spec((bi, pj), lambda i, l_: (i, 0))
      il, lj = tile, spec((bl, pj, kp), lambda i, l_: (l_, 0, 0))
      tiles, out_axes, num = (pi // bi, pl_ // bl), (pi, pl_), num_j
      node_block = node_spec(bl, lambda i, l_: l_)
    else:
      tile = spec((bl, bj, kp), lambda l_, j: (l_, j, 0))
      pairs = spec((pi, bj, kp), lambda l_, j: (0, j, 0))
      stats = spec((pi, bj), lambda l_, j: (0, j))
      il, lj = spec((pi, bl, kp), lambda l_, j: (0, l_, 0)), tile
      tiles, out_axes, num = (pl_ // bl, pj // bj), (pl_, pj), num_i
      node_block = node_spec(bl, lambda l_, j: l_)
    return call(
        functools.partial(
            _dkv_kernel, stream=stream, num_streamed=num, **kernel_options
        ),
        tiles,
        out_axes,
        [pairs, il, lj, il, lj, node_block, pairs, stats, stats, stats],
        tile,
        2,
    )

  dk_il, dv_il = keys_and_values("j")
  dk_lj, dv_lj = keys_and_values("i")
  dq = dq[:, :, :num_i, :num_j, :kk] * static.scale
  return (
      dq.astype(q.dtype),
      dk_il[:, :, :num_i, :num_l, :kk].astype(k_il.dtype),
      dk_lj[:, :, :num_l, :num_j, :kk].astype(k_lj.dtype),
      dv_il[:, :, :num_i, :num_l, :kk].astype(v_il.dtype),
      dv_lj[:, :, :num_l, :num_j, :kk].astype(v_lj.dtype),
      None,  # attn_mask (not supported)
      None,  # node
      None,  # rng
  )
