"""Sequence attention: multi-head and relative positional attention.

References
  [V17] Vaswani et al. 2017, "Attention is all you need", eq. 1.
  [C21] Csordas, Irie & Schmidhuber 2021, "The devil is in the detail: simple
        tricks improve systematic generalization of Transformers",
        appendix C (relative positional attention, after Dai et al. 2019).
  [D19] Dai et al. 2019, "Transformer-XL", sec. 3.3 (relative attention with
        the global biases u and v).

Axis letters (see `relational_jax.layers.shapes`): T query positions, S
key/value positions (source tokens, encoder memory or cache slots).

Attention layers here share one contract:
  * masks are boolean, True = attend / real token;
  * `__call__` is the full (training) pass;
  * `decode_step(x_BxTxD, cache, ...)` appends T new positions to an explicit
    cache pytree made by `init_cache` and returns `(out, new_cache)`. A
    decoder therefore runs greedy decoding with O(1) new tokens per step.
    Caches are plain dicts (`key`, `value`, `index`), so a tied (Universal)
    Transformer that applies one layer L times simply keeps L caches.
"""

import math
from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from relational_jax.layers import shapes
from relational_jax.layers.positional_encoding import sinusoidal_at

Cache = dict  # {'key': BxSxHxK, 'value': BxSxHxK, 'index': int32 scalar}


# ---------------------------------------------------------------------------
# Attention.


def init_cache(
    batch: int, max_len: int, num_heads: int, head_dim: int, dtype=jnp.float32
) -> Cache:
  """An empty decoder self-attention cache for `max_len` positions."""
  zeros_BxSxHxK = jnp.zeros((batch, max_len, num_heads, head_dim), dtype)
  return {
      "key": zeros_BxSxHxK,
      "value": zeros_BxSxHxK,
      "index": jnp.zeros((), jnp.int32),
  }


def _mask_value(dtype):
  return jnp.finfo(dtype).min


def attention_mask(
    kv_mask_BxS=None,
    *,
    num_queries: int,
    num_keys: int,
    causal: bool = False,
    query_offset=0,
):
  """Boolean Bx1xTxS (or 1x1xTxS) mask: key padding AND causality.

  Query t sits at absolute position query_offset + t; causal attention lets
  it see keys j <= query_offset + t.
  """
  mask_1x1xTxS = jnp.ones((1, 1, num_queries, num_keys), bool)
  if causal:
    q_pos_T = query_offset + jnp.arange(num_queries)
    mask_1x1xTxS = (jnp.arange(num_keys)[None, :] <= q_pos_T[:, None])[
        None, None
    ]
  if kv_mask_BxS is None:
    return mask_1x1xTxS
  return mask_1x1xTxS & kv_mask_BxS[:, None, None, :].astype(bool)


def _update_cache(cache: Cache, k_BxTxHxK, v_BxTxHxK):
  index = cache["index"]
  key = jax.lax.dynamic_update_slice_in_dim(cache["key"], k_BxTxHxK, index, 1)
  value = jax.lax.dynamic_update_slice_in_dim(
      cache["value"], v_BxTxHxK, index, 1
  )
  return {"key": key, "value": value, "index": index + k_BxTxHxK.shape[1]}


def _check_cache(cache: Cache, batch: int, heads: int, head_dim: int):
  if not isinstance(cache, dict) or set(cache) != {"key", "value", "index"}:
    raise ValueError(
        "cache must be a dict with keys 'key', 'value', 'index' "
        "(see init_cache)."
    )
  shapes.check_shape(cache["key"], (batch, "S", heads, head_dim), "cache key")
  shapes.check_shape(
      cache["value"], (batch, "S", heads, head_dim), "cache value"
  )


class _HeadsAttention(nn.Module):
  """The parts of the two attentions below: the per-head maps W_q, W_k, W_v
  (D -> HxK), W_O (HxK -> D) and attention dropout; `_weigh` turns logits
  into the output, out(sum_j softmax_j(logit_ij) v_j) [V17] eq. 1."""

  d_model: int
  num_heads: int
  dropout_rate: float = 0.0
  causal: bool = False
  out_bias: bool = True  # Bias of the output map W_O ([C21]'s code: none).
  kernel_init: Callable = nn.linear.default_kernel_init  # Every map's kernel.

  def setup(self):
    self.head_dim = shapes.check_divides(
        self.d_model, self.num_heads, "d_model"
    )
    self.query = self._heads_map("query")
    self.key = self._heads_map("key")
    self.value = self._heads_map("value")
    self.out = nn.DenseGeneral(
        self.d_model,
        axis=(-2, -1),
        use_bias=self.out_bias,
        kernel_init=self.kernel_init,
        name="out",
    )
    self.dropout = nn.Dropout(self.dropout_rate)

  def _heads_map(self, name: str) -> nn.Module:
    """A bias-free D -> HxK map."""
    return nn.DenseGeneral(
        (self.num_heads, self.head_dim),
        use_bias=False,
        kernel_init=self.kernel_init,
        name=name,
    )

  def _weigh(self, logits_BxHxTxS, mask, v_BxSxHxK, deterministic):
    """out(sum_s softmax_s(logits_ts) v_s) over the keys the boolean mask
    (broadcast to BxHxTxS) keeps; dropout on the weights."""
    logits_BxHxTxS = jnp.where(
        mask, logits_BxHxTxS, _mask_value(logits_BxHxTxS.dtype)
    )
    alpha_BxHxTxS = jax.nn.softmax(logits_BxHxTxS, axis=-1)
    alpha_BxHxTxS = self.dropout(alpha_BxHxTxS, deterministic=deterministic)
    z_BxTxHxK = jnp.einsum("bhts,bshk->bthk", alpha_BxHxTxS, v_BxSxHxK)
    return self.out(z_BxTxHxK)


class MultiHeadAttention(_HeadsAttention):
  """Scaled dot-product multi-head attention [V17] eq. 1, no positions.

  Used for cross-attention (the encoder-decoder interface, where [C21]
  appendix C keeps the standard form) and in models with absolute positions.
  """

  def _attend(
      self, q_BxTxHxK, k_BxSxHxK, v_BxSxHxK, mask_Bx1xTxS, deterministic
  ):
    logits_BxHxTxS = jnp.einsum("bthk,bshk->bhts", q_BxTxHxK, k_BxSxHxK)
    logits_BxHxTxS = logits_BxHxTxS / math.sqrt(self.head_dim)
    return self._weigh(logits_BxHxTxS, mask_Bx1xTxS, v_BxSxHxK, deterministic)

  def __call__(
      self,
      x_q_BxTxD,
      x_kv_BxSxD=None,
      kv_mask_BxS=None,
      deterministic: bool = True,
  ):
    """Attends from x_q to x_kv (self-attention when x_kv is None)."""
    if x_kv_BxSxD is None:
      x_kv_BxSxD = x_q_BxTxD
    shapes.check_shape(x_q_BxTxD, ("B", "T", self.d_model), "queries")
    shapes.check_shape(
        x_kv_BxSxD, (x_q_BxTxD.shape[0], "S", self.d_model), "keys/values"
    )
    num_t, num_s = x_q_BxTxD.shape[1], x_kv_BxSxD.shape[1]
    if self.causal and num_t != num_s:
      raise ValueError(
          "causal attention is self-attention: queries and keys "
          f"must have equal length, got {num_t} and {num_s}."
      )
    if kv_mask_BxS is not None:
      shapes.check_shape(kv_mask_BxS, (x_q_BxTxD.shape[0], num_s), "kv_mask")
    mask = attention_mask(
        kv_mask_BxS, num_queries=num_t, num_keys=num_s, causal=self.causal
    )
    return self._attend(
        self.query(x_q_BxTxD),
        self.key(x_kv_BxSxD),
        self.value(x_kv_BxSxD),
        mask,
        deterministic,
    )

  def decode_step(self, x_BxTxD, cache: Cache, deterministic: bool = True):
    """Causal self-attention of T new positions against the cache."""
    shapes.check_shape(x_BxTxD, ("B", "T", self.d_model), "queries")
    _check_cache(cache, x_BxTxD.shape[0], self.num_heads, self.head_dim)
    index = cache["index"]
    cache = _update_cache(cache, self.key(x_BxTxD), self.value(x_BxTxD))
    mask = attention_mask(
        None,
        num_queries=x_BxTxD.shape[1],
        num_keys=cache["key"].shape[1],
        causal=True,
        query_offset=index,
    )
    out = self._attend(
        self.query(x_BxTxD), cache["key"], cache["value"], mask, deterministic
    )
    return out, cache


class RelativeMultiHeadAttention(_HeadsAttention):
  """Relative positional self-attention, [C21] appendix C / [D19] sec. 3.3.

    logit_ij = [(q_i + u) . k_j + (q_i + v) . W_R r(j - i)] / sqrt(K)
    z_i = sum_j softmax_j(logit_ij) v_j

  per head, with q_i = x_i W_q, k_j = x_j W_k,E, v_j = x_j W_v; r(.) the
  sinusoidal encoding of the signed offset j - i (D wide); W_R (= W_k,P) a
  per-layer D -> HxK map; u, v learned per-head biases (terms (c) and (d)
  of [C21] appendix C). [C21] writes P_{i-j}; we encode j - i as in the
  design brief (the two differ by a fixed linear map of r, which W_R
  absorbs). `causal=True` masks j > i (decoder self-attention).
  """

  def setup(self):
    super().setup()
    hk = (self.num_heads, self.head_dim)
    self.pos_proj = self._heads_map("pos_proj")
    self.u_bias_HxK = self.param("u_bias", nn.initializers.zeros, hk)
    self.v_bias_HxK = self.param("v_bias", nn.initializers.zeros, hk)

  def _attend(
      self,
      x_BxTxD,
      k_BxSxHxK,
      v_BxSxHxK,
      kv_mask_BxS,
      query_offset,
      deterministic,
  ):
    num_t, num_s = x_BxTxD.shape[1], k_BxSxHxK.shape[1]
    q_BxTxHxK = self.query(x_BxTxD)
    # Content terms (a) + (c): (q_i + u) . k_j.
    content_BxHxTxS = jnp.einsum(
        "bthk,bshk->bhts", q_BxTxHxK + self.u_bias_HxK, k_BxSxHxK
    )
    # Position terms (b) + (d): (q_i + v) . W_R r(j - i), computed once per
    # distinct offset (R = T + S - 1 of them) and gathered into TxS.
    # Offset number o encodes j - i = o - (T - 1) - query_offset, so entry
    # (t, s) reads o = s - t + T - 1.
    offsets_R = jnp.arange(num_t + num_s - 1) - (num_t - 1) - query_offset
    rel_RxHxK = self.pos_proj(sinusoidal_at(offsets_R, self.d_model))
    position_BxHxTxR = jnp.einsum(
        "bthk,rhk->bhtr", q_BxTxHxK + self.v_bias_HxK, rel_RxHxK
    )
    gather_TxS = (
        jnp.arange(num_s)[None, :] - jnp.arange(num_t)[:, None] + num_t - 1
    )
    position_BxHxTxS = jnp.take_along_axis(
        position_BxHxTxR,
        jnp.broadcast_to(
            gather_TxS, position_BxHxTxR.shape[:2] + gather_TxS.shape
        ),
        axis=-1,
    )
    logits_BxHxTxS = (content_BxHxTxS + position_BxHxTxS) / math.sqrt(
        self.head_dim
    )
    mask = attention_mask(
        kv_mask_BxS,
        num_queries=num_t,
        num_keys=num_s,
        causal=self.causal,
        query_offset=query_offset,
    )
    return self._weigh(logits_BxHxTxS, mask, v_BxSxHxK, deterministic)

  def __call__(self, x_BxNxD, mask_BxN=None, deterministic: bool = True):
    shapes.check_shape(x_BxNxD, ("B", "N", self.d_model), "inputs")
    if mask_BxN is not None:
      shapes.check_shape(mask_BxN, x_BxNxD.shape[:2], "mask")
    return self._attend(
        x_BxNxD,
        self.key(x_BxNxD),
        self.value(x_BxNxD),
        mask_BxN,
        0,
        deterministic,
    )

  def decode_step(self, x_BxTxD, cache: Cache, deterministic: bool = True):
    """T new positions (index, ..., index + T - 1) against the cache."""
    if not self.causal:
      raise ValueError(
          "decode_step needs causal=True (decoder self-attention)."
      )
    shapes.check_shape(x_BxTxD, ("B", "T", self.d_model), "inputs")
    _check_cache(cache, x_BxTxD.shape[0], self.num_heads, self.head_dim)
    index = cache["index"]
    cache = _update_cache(cache, self.key(x_BxTxD), self.value(x_BxTxD))
    out = self._attend(
        x_BxTxD, cache["key"], cache["value"], None, index, deterministic
    )
    return out, cache
