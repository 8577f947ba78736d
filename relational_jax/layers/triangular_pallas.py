"""Pallas kernels of the triangular attention (Edge Transformer eq. 4-8).

  y_ij = sum_l softmax_l(s)_ilj v_ilj,  s_ilj = q_il . k_lj / sqrt(K)
  (attention ablation: q_il . k_ij),     v_ilj = v1_il * v2_lj
  (value ablation: v1_il).

`forward` and `backward` have the signatures of `relational_jax.layers.
triangular`'s `_forward` and `_backward` (the static settings, q, k, v1, v2
(None: value ablation), node mask, node times (None: not supported here);
the backward also o, the fp32 logsumexp and do), so `triangular` pairs them
into impl='pallas' (this forward, its chunked backward) and
impl='pallas_fused' (both from here). Arrays are laid out head-major
(B x H x N x N x K) and zero-padded: N to a multiple of the block, K to a
power of two. `interpret=True` (static) runs the kernels on CPU.

The backward is flash attention's with one owner per gradient: (i, l)
tiles stream the columns j for dq_il and dv1_il; (l, j) tiles stream the
rows i for dk_lj and dv2_lj; with keys k_ij, (i, j) tiles stream the pivots
l for dk_ij. Each recomputes its weights from the logsumexp, one streamed
index at a time: no N^3 block is formed.
"""

import functools
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from relational_jax.layers import online_softmax

# Finite stand-in for -inf in the fp32 online softmax: masked pivots get this
# score, and exp(MASKED_SCORE - m) underflows to exactly 0 for any real m.
MASKED_SCORE = -1e30


def _head_major(x, b, padded, h, kp):
  """B x N x N x H x K -> B x H x N x N x K, zero-padded."""
  x = online_softmax.pad_to(x, (b, padded, padded, h, kp))
  return jnp.transpose(x, (0, 3, 1, 2, 4))


def _forward_kernel(*refs, num_pivots, scale, key_ij, value_ablation):
  """One (b, h, i-block, j-block) tile: online softmax over the pivots l.

  Refs (b and h squeezed): q_ref, v1_ref IxLxK (x_il); k_ref, v2_ref LxJxK
  (x_lj), or k_ref IxJxK (k_ij) for the attention ablation; no v2_ref for the
  value ablation; mask_ref L (int32); outputs o_ref IxJxK, lse_ref IxJ.
  """
  if value_ablation:
    q_ref, k_ref, v1_ref, mask_ref, o_ref, lse_ref = refs
    v2_ref = None
  else:
    q_ref, k_ref, v1_ref, v2_ref, mask_ref, o_ref, lse_ref = refs
  bi, bj, kp = o_ref.shape
  if key_ij:
    k_IxJxK = k_ref[...].astype(jnp.float32)

  def body(l, carry):
    m_IxJ, sum_IxJ, acc_IxJxK = carry
    q_IxK = q_ref[:, pl.ds(l, 1), :].reshape(bi, kp).astype(jnp.float32)
    if key_ij:  # q_il . k_ij
      s_IxJ = jnp.sum(q_IxK[:, None, :] * k_IxJxK, axis=-1)
    else:  # q_il . k_lj (eq. 5)
      k_JxK = k_ref[pl.ds(l, 1), :, :].reshape(bj, kp).astype(jnp.float32)
      s_IxJ = jax.lax.dot_general(
          q_IxK,
          k_JxK,
          (((1,), (1,)), ((), ())),
          preferred_element_type=jnp.float32,
      )
    valid = mask_ref[pl.ds(l, 1)].reshape(1, 1) > 0
    s_IxJ = jnp.where(valid, s_IxJ * scale, MASKED_SCORE)
    m_new_IxJ = jnp.maximum(m_IxJ, s_IxJ)
    correction_IxJ = jnp.exp(m_IxJ - m_new_IxJ)
    p_IxJ = jnp.where(valid, jnp.exp(s_IxJ - m_new_IxJ), 0.0)
    v1_IxK = v1_ref[:, pl.ds(l, 1), :].reshape(bi, kp).astype(jnp.float32)
    if value_ablation:
      v_IxJxK = jnp.broadcast_to(v1_IxK[:, None, :], (bi, bj, kp))
    else:  # eq. 8
      v2_JxK = v2_ref[pl.ds(l, 1), :, :].reshape(bj, kp).astype(jnp.float32)
      v_IxJxK = v1_IxK[:, None, :] * v2_JxK[None, :, :]
    acc_IxJxK = (
        acc_IxJxK * correction_IxJ[..., None] + p_IxJ[..., None] * v_IxJxK
    )
    return m_new_IxJ, sum_IxJ * correction_IxJ + p_IxJ, acc_IxJxK

  init = (
      jnp.full((bi, bj), MASKED_SCORE, jnp.float32),
      jnp.zeros((bi, bj), jnp.float32),
      jnp.zeros((bi, bj, kp), jnp.float32),
  )
  m_IxJ, sum_IxJ, acc_IxJxK = jax.lax.fori_loop(0, num_pivots, body, init)
  has_pivot = sum_IxJ > 0
  safe_sum_IxJ = jnp.where(has_pivot, sum_IxJ, 1.0)
  o_ref[...] = (acc_IxJxK / safe_sum_IxJ[..., None]).astype(o_ref.dtype)
  lse_ref[...] = jnp.where(has_pivot, m_IxJ + jnp.log(safe_sum_IxJ), 0.0)


def forward(static, q, k, v1, v2, mask, time):
  """Pallas version of `triangular._forward` (no node times): the same o_BxNxNxHxK
  and lse_BxNxNxH."""
  del time  # None: causal masking is not supported by the kernel.
  key_ij = static.key_ij
  b, n, _, h, kk = q.shape
  block = min(static.block_size, pl.next_power_of_2(n))
  padded = pl.cdiv(n, block) * block
  kp = pl.next_power_of_2(kk)  # Zero padding of K changes no dot product.

  head_major = lambda x: _head_major(x, b, padded, h, kp)
  mask_BxL = online_softmax.pad_to(mask.astype(jnp.int32), (b, padded))
  sq = pl.squeezed
  il_spec = pl.BlockSpec(
      (sq, sq, block, padded, kp), lambda bb, hh, i, j: (bb, hh, i, 0, 0)
  )
  lj_spec = pl.BlockSpec(
      (sq, sq, padded, block, kp), lambda bb, hh, i, j: (bb, hh, 0, j, 0)
  )
  ij_spec = pl.BlockSpec(
      (sq, sq, block, block, kp), lambda bb, hh, i, j: (bb, hh, i, j, 0)
  )
  mask_spec = pl.BlockSpec((sq, padded), lambda bb, hh, i, j: (bb, 0))
  args = [head_major(q), head_major(k), head_major(v1)]
  in_specs = [il_spec, ij_spec if key_ij else lj_spec, il_spec]
  if v2 is not None:
    args.append(head_major(v2))
    in_specs.append(lj_spec)
  args.append(mask_BxL)
  in_specs.append(mask_spec)
  kernel = functools.partial(
      _forward_kernel,
      num_pivots=padded,
      scale=1.0 / math.sqrt(kk),
      key_ij=key_ij,
      value_ablation=v2 is None,
  )
  out_dtype = jnp.result_type(q.dtype, v1.dtype)
  o_h, lse_h = pl.pallas_call(
      kernel,
      out_shape=(
          jax.ShapeDtypeStruct((b, h, padded, padded, kp), out_dtype),
          jax.ShapeDtypeStruct((b, h, padded, padded), jnp.float32),
      ),
      grid=(b, h, padded // block, padded // block),
      in_specs=in_specs,
      out_specs=(
          ij_spec,
          pl.BlockSpec(
              (sq, sq, block, block), lambda bb, hh, i, j: (bb, hh, i, j)
          ),
      ),
      interpret=static.interpret,
  )(*args)
  o = jnp.transpose(o_h, (0, 2, 3, 1, 4))[:, :n, :n, :, :kk]
  lse = jnp.transpose(lse_h, (0, 2, 3, 1))[:, :n, :n]
  return o, lse


# -- Backward kernels. ---------------------------------------------------------


def _dp_and_value_grad(p, do, v1, v2):
  """dp = do . v (the weights' gradient, summed over k) and p do * v2 (the
  contribution to dv1's or dv2's sum), for any broadcastable tile, where v =
  v1 * v2 (eq. 8) or v1 alone (value ablation: v2 None)."""
  if v2 is None:
    return jnp.sum(do * v1, axis=-1), p[..., None] * do
  return jnp.sum(do * v1 * v2, axis=-1), p[..., None] * do * v2


def _dq_dv1_kernel(*refs, num_nodes, scale, key_ij, value_ablation):
  """One (b, h, i-block, l-block) tile, streaming the columns j:
  dq_il = scale sum_j ds_ilj k_lj (k_ij with key_ij) and
  dv1_il = sum_j p_ilj do_ij (* v2_lj).

  Refs (b and h squeezed): q_ref, v1_ref IxLxK (the tile); k_ref LxJxK (the
  tile's pivots, every column; key_ij: IxJxK, the tile's rows); v2_ref LxJxK
  (absent for the value ablation); mask_ref L (int32); do_ref IxJxK and
  lse_ref, delta_ref IxJ (the tile's rows); out dq_ref, dv1_ref IxLxK fp32.
  """
  if value_ablation:
    q_ref, k_ref, v1_ref, mask_ref, do_ref, lse_ref, delta_ref = refs[:7]
    v2_ref = None
  else:
    q_ref, k_ref, v1_ref, v2_ref, mask_ref, do_ref, lse_ref, delta_ref = refs[
        :8
    ]
  dq_ref, dv1_ref = refs[-2:]
  bi, bl, kp = dq_ref.shape
  q_IxLxK = q_ref[...].astype(jnp.float32)
  v1_IxLxK = v1_ref[...].astype(jnp.float32)
  valid_1xL = mask_ref[...].reshape(1, bl) > 0

  def body(j, carry):
    dq_IxLxK, dv1_IxLxK = carry
    if key_ij:  # k_ij, one per row: I x 1 x K
      k_j = k_ref[:, pl.ds(j, 1), :].astype(jnp.float32)
    else:  # k_lj, one per pivot: 1 x L x K
      k_j = k_ref[:, pl.ds(j, 1), :].reshape(1, bl, kp).astype(jnp.float32)
    s_IxL = jnp.sum(q_IxLxK * k_j, axis=-1) * scale
    lse_Ix1 = lse_ref[:, pl.ds(j, 1)]
    p_IxL = jnp.where(valid_1xL, jnp.exp(s_IxL - lse_Ix1), 0.0)
    do_Ix1xK = do_ref[:, pl.ds(j, 1), :].astype(jnp.float32)
    v2_1xLxK = None
    if v2_ref is not None:
      v2_1xLxK = v2_ref[:, pl.ds(j, 1), :].reshape(1, bl, kp)
      v2_1xLxK = v2_1xLxK.astype(jnp.float32)
    dp_IxL, dv1_term = _dp_and_value_grad(p_IxL, do_Ix1xK, v1_IxLxK, v2_1xLxK)
    ds_IxL = p_IxL * (dp_IxL - delta_ref[:, pl.ds(j, 1)]) * scale
    return dq_IxLxK + ds_IxL[..., None] * k_j, dv1_IxLxK + dv1_term

  zeros = jnp.zeros((bi, bl, kp), jnp.float32)
  dq_ref[...], dv1_ref[...] = jax.lax.fori_loop(
      0, num_nodes, body, (zeros, zeros)
  )


def _dk_dv2_kernel(*refs, num_nodes, scale, key_ij, value_ablation):
  """One (b, h, l-block, j-block) tile, streaming the rows i:
  dk_lj = scale sum_i ds_ilj q_il (not with key_ij) and dv2_lj = sum_i
  p_ilj do_ij v1_il (not for the value ablation); outputs those computed.

  Refs: q_ref, v1_ref IxLxK (every row, the tile's pivots); k_ref LxJxK (the
  tile; key_ij: IxJxK, every row, the tile's columns); v2_ref LxJxK (the
  tile; absent for the value ablation); mask_ref L; do_ref IxJxK and
  lse_ref, delta_ref IxJ (every row, the tile's columns).
  """
  num_in = 7 if value_ablation else 8
  ins, outs = refs[:num_in], refs[num_in:]
  if value_ablation:
    q_ref, k_ref, v1_ref, mask_ref, do_ref, lse_ref, delta_ref = ins
    v2_LxJxK = None
  else:
    q_ref, k_ref, v1_ref, v2_ref, mask_ref, do_ref, lse_ref, delta_ref = ins
    v2_LxJxK = v2_ref[...].astype(jnp.float32)
  bl = mask_ref.shape[0]
  bj, kp = do_ref.shape[1:]
  if not key_ij:
    k_LxJxK = k_ref[...].astype(jnp.float32)
  valid_Lx1 = mask_ref[...].reshape(bl, 1) > 0

  def body(i, carry):
    q_Lx1xK = q_ref[pl.ds(i, 1), :, :].reshape(bl, 1, kp).astype(jnp.float32)
    if key_ij:
      k_1xJxK = k_ref[pl.ds(i, 1), :, :].astype(jnp.float32)
      s_LxJ = jnp.sum(q_Lx1xK * k_1xJxK, axis=-1) * scale
    else:
      s_LxJ = jnp.sum(q_Lx1xK * k_LxJxK, axis=-1) * scale
    lse_1xJ = lse_ref[pl.ds(i, 1), :]
    p_LxJ = jnp.where(valid_Lx1, jnp.exp(s_LxJ - lse_1xJ), 0.0)
    do_1xJxK = do_ref[pl.ds(i, 1), :, :].astype(jnp.float32)
    v1_Lx1xK = v1_ref[pl.ds(i, 1), :, :].reshape(bl, 1, kp).astype(jnp.float32)
    new = []
    if not key_ij:
      dp_LxJ, _ = _dp_and_value_grad(p_LxJ, do_1xJxK, v1_Lx1xK, v2_LxJxK)
      ds_LxJ = p_LxJ * (dp_LxJ - delta_ref[pl.ds(i, 1), :]) * scale
      new.append(carry[0] + ds_LxJ[..., None] * q_Lx1xK)
    if not value_ablation:
      new.append(carry[-1] + p_LxJ[..., None] * do_1xJxK * v1_Lx1xK)
    return tuple(new)

  zeros = jnp.zeros((bl, bj, kp), jnp.float32)
  done = jax.lax.fori_loop(0, num_nodes, body, (zeros,) * len(outs))
  for ref, value in zip(outs, done):
    ref[...] = value


def _dk_ij_kernel(*refs, num_pivots, scale, value_ablation):
  """One (b, h, i-block, j-block) tile of the attention ablation, streaming
  the pivots l: dk_ij = scale sum_l ds_ilj q_il.

  Refs: q_ref, v1_ref IxLxK (the tile's rows, every pivot); k_ref IxJxK (the
  tile); v2_ref LxJxK (every pivot, the tile's columns; absent for the
  value ablation); mask_ref L; do_ref IxJxK, lse_ref, delta_ref IxJ (the
  tile); out dk_ref IxJxK fp32.
  """
  if value_ablation:
    q_ref, k_ref, v1_ref, mask_ref, do_ref, lse_ref, delta_ref, dk_ref = refs
    v2_ref = None
  else:
    q_ref, k_ref, v1_ref, v2_ref, mask_ref, do_ref, lse_ref, delta_ref = refs[
        :8
    ]
    dk_ref = refs[8]
  bi, bj, kp = dk_ref.shape
  k_IxJxK = k_ref[...].astype(jnp.float32)
  do_IxJxK = do_ref[...].astype(jnp.float32)
  lse_IxJ, delta_IxJ = lse_ref[...], delta_ref[...]

  def body(l, dk_IxJxK):
    q_Ix1xK = q_ref[:, pl.ds(l, 1), :].astype(jnp.float32)
    valid = mask_ref[pl.ds(l, 1)].reshape(1, 1) > 0
    s_IxJ = jnp.sum(q_Ix1xK * k_IxJxK, axis=-1) * scale
    p_IxJ = jnp.where(valid, jnp.exp(s_IxJ - lse_IxJ), 0.0)
    v1_Ix1xK = v1_ref[:, pl.ds(l, 1), :].astype(jnp.float32)
    v2_1xJxK = None
    if v2_ref is not None:
      v2_1xJxK = v2_ref[pl.ds(l, 1), :, :].astype(jnp.float32)
    dp_IxJ, _ = _dp_and_value_grad(p_IxJ, do_IxJxK, v1_Ix1xK, v2_1xJxK)
    ds_IxJ = p_IxJ * (dp_IxJ - delta_IxJ) * scale
    return dk_IxJxK + ds_IxJ[..., None] * q_Ix1xK

  dk_ref[...] = jax.lax.fori_loop(
      0, num_pivots, body, jnp.zeros((bi, bj, kp), jnp.float32)
  )


def backward(static, q, k, v1, v2, mask, time, o, lse, do):
  """`triangular._backward` by the kernels above (no node times): the same
  cotangents (dq, dk, dv1, dv2, None, None) from the forward's o and lse.

  Padded rows, columns and pivots are computed and dropped; their do is 0
  and no padded pivot is valid, so they add nothing to the real ones.
  """
  del time  # None: causal masking is not supported by the kernels.
  key_ij, value_ablation = static.key_ij, v2 is None
  b, n, _, h, kk = q.shape
  block = min(static.block_size, pl.next_power_of_2(n))
  padded = pl.cdiv(n, block) * block
  kp = pl.next_power_of_2(kk)
  scale = 1.0 / math.sqrt(kk)
  head_major = lambda x: _head_major(x, b, padded, h, kp)
  do_f32 = do.astype(jnp.float32)
  delta_BxNxNxH = jnp.sum(do_f32 * o.astype(jnp.float32), axis=-1)

  def stats(x_BxNxNxH):  # -> B x H x N x N, padded
    x = online_softmax.pad_to(x_BxNxNxH, (b, padded, padded, h))
    return jnp.transpose(x, (0, 3, 1, 2))

  operands = [head_major(q), head_major(k), head_major(v1)]
  if not value_ablation:
    operands.append(head_major(v2))
  operands += [
      online_softmax.pad_to(mask.astype(jnp.int32), (b, padded)),
      head_major(do_f32),
      stats(lse),
      stats(delta_BxNxNxH),
  ]
  sq, fp32, tiles = pl.squeezed, jnp.float32, padded // block

  def spec(rows, cols, index):  # (b, h) squeezed; index(x, z) -> 2 or 3
    shape = (sq, sq, rows, cols) + ((kp,) if len(index(0, 0)) == 3 else ())
    return pl.BlockSpec(shape, lambda bb, hh, x, z: (bb, hh) + index(x, z))

  def call(kernel, in_specs, outputs, out_spec):
    in_specs = list(in_specs)
    if value_ablation:
      del in_specs[3]
    return pl.pallas_call(
        kernel,
        out_shape=(jax.ShapeDtypeStruct((b, h, padded, padded, kp), fp32),)
        * outputs,
        grid=(b, h, tiles, tiles),
        in_specs=in_specs,
        out_specs=(out_spec,) * outputs,
        interpret=static.interpret,
    )(*operands)

  options = dict(scale=scale, value_ablation=value_ablation)
  # (i, l) tiles: x = i, z = l; every column j.
  il = spec(block, block, lambda i, l: (i, l, 0))
  rows = lambda width, k=True: spec(
      block, width, (lambda i, l: (i, 0, 0)) if k else (lambda i, l: (i, 0))
  )
  pivots_cols = spec(block, padded, lambda i, l: (l, 0, 0))
  dq, dv1 = call(
      functools.partial(_dq_dv1_kernel, num_nodes=n, key_ij=key_ij, **options),
      [
          il,
          rows(padded) if key_ij else pivots_cols,
          il,
          pivots_cols,
          pl.BlockSpec((sq, block), lambda bb, hh, i, l: (bb, l)),
          rows(padded),
          rows(padded, k=False),
          rows(padded, k=False),
      ],
      2,
      il,
  )
  # (l, j) tiles: x = l, z = j; every row i.
  lj = spec(block, block, lambda l, j: (l, j, 0))
  rows_pivots = spec(padded, block, lambda l, j: (0, l, 0))
  cols = spec(padded, block, lambda l, j: (0, j, 0))
  cols_stats = spec(padded, block, lambda l, j: (0, j))
  lj_outputs = (not key_ij) + (not value_ablation)
  lj_grads = ()
  if lj_outputs:
    lj_grads = call(
        functools.partial(
            _dk_dv2_kernel, num_nodes=n, key_ij=key_ij, **options
        ),
        [
            rows_pivots,
            cols if key_ij else lj,
            rows_pivots,
            lj,
            pl.BlockSpec((sq, block), lambda bb, hh, l, j: (bb, l)),
            cols,
            cols_stats,
            cols_stats,
        ],
        lj_outputs,
        lj,
    )
  lj_grads = list(lj_grads)
  if key_ij:  # (i, j) tiles: x = i, z = j; every pivot l.
    ij = spec(block, block, lambda i, j: (i, j, 0))
    ij_stats = spec(block, block, lambda i, j: (i, j))
    (dk,) = call(
        functools.partial(_dk_ij_kernel, num_pivots=padded, **options),
        [
            spec(block, padded, lambda i, j: (i, 0, 0)),
            ij,
            spec(block, padded, lambda i, j: (i, 0, 0)),
            spec(padded, block, lambda i, j: (0, j, 0)),
            pl.BlockSpec((sq, padded), lambda bb, hh, i, j: (bb, 0)),
            ij,
            ij_stats,
            ij_stats,
        ],
        1,
        ij,
    )
  else:
    dk = lj_grads.pop(0)
  dv2 = None if value_ablation else lj_grads.pop(0)

  def node_major(x, like):  # B x H x N x N x K (padded) -> like's layout
    x = jnp.transpose(x, (0, 2, 3, 1, 4))[:, :n, :n, :, :kk]
    return x.astype(like.dtype)

  return (
      node_major(dq, q),
      node_major(dk, k),
      node_major(dv1, v1),
      None if value_ablation else node_major(dv2, v2),
      None,  # node mask
      None,  # node times
  )
