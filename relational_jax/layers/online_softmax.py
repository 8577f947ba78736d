"""The pivot-chunked online softmax of triangular and pivotal attention.

Both layers compute, for every pair (i, j), a softmax over the pivots l:

  y_ij = sum_l softmax_l(s)_ijl u_ijl

(Edge Transformer eq. 4-5, u_ilj = v1_il * v2_lj; FloydNet's pivotal
attention, u_ijl = v_il + v_lj, arXiv 2601.19094), where the
score and value tensors have N^3 entries per head. This module streams the
pivot axis in chunks of C pivots; each layer supplies only its per-chunk
scores, value sums and gradients.

  forward   per chunk c, with the layer's fp32 scores s_c, the running
            maximum m and sum l of the online (flash attention) softmax:
              m' = max(m, max_c s_c),  p_c = exp(s_c - m'),
              l' = l exp(m - m') + sum_c p_c,
              acc' = acc exp(m - m') + sum_c p_c u_c   (the layer's sum)
            then y = acc / l and the statistics saved for the backward pass
            (`LSE` or `MAX_SUM`).
  backward  chunk by chunk again: p recomputed from the statistics
            (`probabilities`), ds = p (dp - delta) with delta_ij =
            sum_l p_ijl dp_ijl = dy_ij . y_ij (`softmax_grad`), the layer's
            gradients accumulated in place (`Chunk.add`).
  VJP       `recomputing_vjp`: a `jax.custom_vjp` saving only the inputs,
            the output and the statistics.

Chunks are read in place (`Chunk.take`, dynamic slices). When C does not
divide N the last chunk starts at N - C and the pivots it shares with the
previous one are not its own (`Chunk.owned_C`), so every pivot counts once.
"""

import functools
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

Array = jax.Array

# The saved softmax statistics. LSE: lse = m + log l (0 where l = 0), and
# rows with no pivot give y = 0. MAX_SUM: (m, l) apart, for scores whose
# masked value (-1e9) leaves no fp32 room for log l in m + log l; rows with
# l = 0 (every score -inf) give nan, as torch.softmax.
LSE = "lse"
MAX_SUM = "max_sum"


def chunking(num_pivots, chunk_size):
  """(pivots per chunk C, number of chunks) for `num_pivots` pivots."""
  size = num_pivots if chunk_size is None else min(chunk_size, num_pivots)
  return size, -(-num_pivots // size)


class Chunk(NamedTuple):
  """Pivots [start, start + size) of chunk `index`."""

  index: Array
  start: Array  # index * size, clamped to N - size
  size: int
  owned_C: Array  # False for pivots already counted by the previous chunk

  def take(self, x, axis):
    """x's slice of this chunk's pivots along `axis`."""
    return jax.lax.dynamic_slice_in_dim(x, self.start, self.size, axis)

  def add(self, buffer, update, axis):
    """buffer[..., start:start + C, ...] += update along `axis`."""
    current = self.take(buffer, axis)
    return jax.lax.dynamic_update_slice_in_dim(
        buffer, current + update, self.start, axis
    )


def _scan_chunks(step, init, num_pivots, chunk_size):
  """lax.scan of step(carry, chunk) -> carry over the chunks."""
  size, count = chunking(num_pivots, chunk_size)

  def body(carry, index):
    start = jnp.minimum(index * size, num_pivots - size)
    owned_C = (start + jnp.arange(size)) >= index * size
    return step(carry, Chunk(index, start, size, owned_C)), None

  return jax.lax.scan(body, init, jnp.arange(count))[0]


def forward(chunk_scores, acc_shape, axis, num_pivots, chunk_size, stats):
  """The online-softmax forward pass over the chunks of the pivot axis.

  Args:
    chunk_scores: chunk -> (s, pivot, accumulate): the chunk's fp32 scores s
      with its C pivots on `axis` (the other axes those of acc_shape[:-1]);
      pivot: None where excluded pivots score -inf, or, where every score is
      finite (excluded ones a finite stand-in for -inf), a boolean mask
      broadcastable to s, False where p is 0; accumulate(acc, p) -> acc +
      sum_c p_c u_c, the layer's weighted values added to the rescaled fp32
      accumulator.
    acc_shape: shape of the accumulator (pairs x K).
    axis: the pivot axis of s.
    num_pivots, chunk_size: N and C (None: one chunk).
    stats: LSE or MAX_SUM.

  Returns:
    (y fp32 in acc_shape, the statistics: lse, or the pair (m, l)).
  """

  def step(carry, chunk):
    m, l, acc = carry
    s, pivot, accumulate = chunk_scores(chunk)
    m_new = jnp.maximum(m, s.max(axis=axis))
    m_safe = m_new  # With a pivot mask every score is finite, so is m_new.
    if pivot is None:
      # Every score so far -inf (an additive -inf mask): a zero reference
      # keeps exp() from producing nan.
      m_safe = jnp.where(jnp.isneginf(m_new), 0.0, m_new)
    correction = jnp.exp(m - m_safe)
    p = jnp.exp(s - jnp.expand_dims(m_safe, axis))
    if pivot is not None:
      p = jnp.where(pivot, p, 0.0)
    l = l * correction + p.sum(axis=axis)
    return m_new, l, accumulate(acc * correction[..., None], p)

  init = (
      jnp.full(acc_shape[:-1], -jnp.inf, jnp.float32),
      jnp.zeros(acc_shape[:-1], jnp.float32),
      jnp.zeros(acc_shape, jnp.float32),
  )
  m, l, acc = _scan_chunks(step, init, num_pivots, chunk_size)
  if stats == MAX_SUM:
    return acc / l[..., None], (jnp.where(jnp.isneginf(m), 0.0, m), l)
  has_pivot = l > 0
  safe_l = jnp.where(has_pivot, l, 1.0)
  lse = jnp.where(has_pivot, m + jnp.log(safe_l), 0.0)
  return acc / safe_l[..., None], lse


def probabilities(s, pivot, saved, axis, stats):
  """softmax_l(s) of one chunk, recomputed from the `saved` statistics."""
  if stats == MAX_SUM:
    m, l = saved
    p = jnp.exp(s - jnp.expand_dims(m, axis)) / jnp.expand_dims(l, axis)
  else:
    p = jnp.exp(s - jnp.expand_dims(saved, axis))
  return p if pivot is None else jnp.where(pivot, p, 0.0)


def softmax_grad(p, dp, delta, axis):
  """ds = p (dp - delta): the softmax backward, delta = sum_l p dp."""
  return p * (dp - jnp.expand_dims(delta, axis))


def backward(chunk_grads, init, num_pivots, chunk_size):
  """Runs chunk_grads(grads, chunk) -> grads over the chunks (the layer
  recomputes the chunk's probabilities and accumulates its fp32 grads)."""
  return _scan_chunks(chunk_grads, init, num_pivots, chunk_size)


def recomputing_vjp(
    forward_fn: Callable[..., Any], backward_fn: Callable[..., Any]
):
  """f(static, *args) = forward_fn(static, *args)[0] with a custom VJP.

  forward_fn(static, *args) -> (y, saved statistics); `static` is hashable
  (not differentiated). The residuals are the args, y and the statistics
  only; backward_fn(static, *args, y, saved, dy) returns one cotangent per
  arg (None for the non-differentiable ones). Two forward functions (an XLA
  and a Pallas one) can share one backward.
  """

  @functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
  def f(static, *args):
    return forward_fn(static, *args)[0]

  def f_fwd(static, *args):
    y, saved = forward_fn(static, *args)
    return y, (args, y, saved)

  def f_bwd(static, residuals, dy):
    args, y, saved = residuals
    return tuple(backward_fn(static, *args, y, saved, dy))

  f.defvjp(f_fwd, f_bwd)
  return f


def check_chunk_size(chunk_size: Optional[int]) -> None:
  if chunk_size is not None and (
      isinstance(chunk_size, bool)
      or not isinstance(chunk_size, int)
      or chunk_size <= 0
  ):
    raise ValueError(
        "chunk_size must be a positive int or None (one chunk), got "
        f"{chunk_size!r}."
    )


# Helpers of the Pallas forward kernels.


def check_block_size(block_size: int) -> None:
  if (
      isinstance(block_size, bool)
      or not isinstance(block_size, int)
      or block_size <= 0
      or (block_size & (block_size - 1))
  ):
    raise ValueError(
        f"block_size must be a positive power of two, got {block_size!r}."
    )


def interpret_mode(interpret: Optional[bool]) -> bool:
  """Whether a Pallas kernel runs in interpret mode (the kernel run by the
  XLA interpreter): `interpret` when given, else on a CPU backend only."""
  if interpret is None:
    return jax.default_backend() == "cpu"
  return bool(interpret)


def pad_to(x, sizes):
  """x zero-padded at the end of each axis to `sizes`."""
  return jnp.pad(x, [(0, want - got) for got, want in zip(x.shape, sizes)])
