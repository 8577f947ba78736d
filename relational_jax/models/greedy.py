"""Greedy decoding, written once for the encoder-decoders of this package.

Greedy decoding feeds the start token, then each step's argmax token back as
the next input; a row ends at its first EOS (kept) and is padded after it;
decoding stops after `max_len` tokens or once every row has ended. Returns
BxT int32 tokens (T = max_len, the start token not included).

A model supplies only its two functions, module-level so that `jax.jit` sees
the same ones on every call (they are static arguments, as is the model):

  init_fn(model, params, inputs, max_len) -> state
      the decoder state before the first step (e.g. an empty self-attention
      cache, or the encoded source);
  step_fn(model, params, inputs, state, last_B) -> (logits_BxV, state)
      feeds the tokens `last_B` at the next position.

`inputs` is a tuple of arrays whose first is batch-major (B rows).
`decode` runs `init_fn` and the whole loop on device, in one `jax.jit`
(`seq2seq.Seq2SeqTransformer`, `et_seq2seq.EdgeTransformerSeq2Seq`).
`host_loop` runs the same loop from Python, one step call per token, for
decoders whose next input needs host-side bookkeeping (`Seq2SeqTransformer`
with tree positions, Shiv & Quirk 2019 sec. 4).

Axis letters (`relational_jax.layers.shapes`): B batch, T output tokens,
V vocabulary.
"""

import functools
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from relational_jax.layers import shapes


def source_mask(src_BxS, src_mask_BxS, pad_id: int):
  """BxS bool, True at real source tokens: `src_mask_BxS` (checked against
  the source's shape), or by default src != pad_id."""
  if src_mask_BxS is None:
    return src_BxS != pad_id
  mask_BxS = jnp.asarray(src_mask_BxS)
  shapes.check_shape(mask_BxS, src_BxS.shape, "src_mask")
  return mask_BxS.astype(bool)


def pad_token(config, max_len, pad_id: Optional[int]) -> int:
  """The decoding set-up shared by the encoder-decoders: checks that
  `max_len` is an int in [1, config.max_tgt_len]; returns the token that
  fills each row after its first EOS (`pad_id`, default config.pad_id)."""
  if (
      not isinstance(max_len, (int, np.integer))
      or not 0 < max_len <= config.max_tgt_len
  ):
    raise ValueError(
        f"max_len must be in [1, max_tgt_len={config.max_tgt_len}], got"
        f" {max_len!r}."
    )
  return config.pad_id if pad_id is None else pad_id


def next_tokens(logits_BxV, finished_B, eos, pad):
  """One greedy step's tokens: the argmax of each row, `pad` for rows that
  had ended; returns them and the rows ended after them (EOS emitted)."""
  next_B = jnp.argmax(logits_BxV, axis=-1).astype(jnp.int32)
  next_B = jnp.where(finished_B, pad, next_B)
  return next_B, finished_B | (next_B == eos)


_next_tokens_jit = jax.jit(next_tokens)


def loop(step_fn, state, num_b: int, max_len: int, bos, eos, pad):
  """The loop, traced (a `lax.while_loop`): `step_fn(state, last_B) ->
  (logits_BxV, state)` is fed BOS, then each step's `next_tokens`; returns
  BxT tokens (T = max_len); stops once every row has ended."""
  out_BxT = jnp.full((num_b, max_len), pad, jnp.int32)
  last_B = jnp.full((num_b,), bos, jnp.int32)
  finished_B = jnp.zeros((num_b,), bool)

  def cond(carry):
    t, _, _, _, finished_B = carry
    return (t < max_len) & ~jnp.all(finished_B)

  def body(carry):
    t, state, last_B, out_BxT, finished_B = carry
    logits_BxV, state = step_fn(state, last_B)
    next_B, finished_B = next_tokens(logits_BxV, finished_B, eos, pad)
    out_BxT = out_BxT.at[:, t].set(next_B)
    return t + 1, state, next_B, out_BxT, finished_B

  carry = (jnp.zeros((), jnp.int32), state, last_B, out_BxT, finished_B)
  return jax.lax.while_loop(cond, body, carry)[3]


@functools.partial(
    jax.jit, static_argnames=("init_fn", "step_fn", "model", "max_len")
)
def decode(
    init_fn: Callable,
    step_fn: Callable,
    model,
    params,
    inputs,
    max_len: int,
    bos,
    eos,
    pad,
):
  """Greedy decoding on device (module docstring): `init_fn`, then `loop`
  over `step_fn`, one compilation per model, `max_len` and input shapes."""
  state = init_fn(model, params, inputs, max_len)
  step = functools.partial(step_fn, model, params, inputs)
  num_b = jax.tree.leaves(inputs)[0].shape[0]
  return loop(step, state, num_b, max_len, bos, eos, pad)


def host_loop(
    step_fn,
    state,
    num_b: int,
    max_len: int,
    bos: int,
    eos: int,
    pad: int,
    emitted_fn: Optional[Callable] = None,
):
  """The loop run from Python: `step_fn(state, last_B) -> (logits_BxV,
  state)` is called once per token with host (NumPy) tokens `last_B`, and
  `emitted_fn(next_B, finished_B)`, if given, after each step with the
  tokens just emitted and the rows ended after them; returns BxT tokens
  (T = max_len); stops once every row has ended."""
  out_BxT = np.full((num_b, max_len), pad, np.int32)
  last_B = np.full((num_b,), bos, np.int32)
  finished_B = np.zeros((num_b,), bool)
  for t in range(max_len):
    logits_BxV, state = step_fn(state, last_B)
    next_B, finished_B = jax.device_get(
        _next_tokens_jit(logits_BxV, finished_B, eos, pad)
    )
    out_BxT[:, t] = next_B
    if emitted_fn is not None:
      emitted_fn(next_B, finished_B)
    last_B = next_B
    if finished_B.all():
      break
  return jnp.asarray(out_BxT)
