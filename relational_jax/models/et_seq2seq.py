"""Edge Transformer encoder-decoder (Bergen et al. 2021, sec. 3, last paragraph).

Axis letters (`relational_jax.layers.shapes`): B batch, S source tokens,
T target tokens (decoder inputs), N = S + T joint nodes (I, J where the two
ends of an edge are told apart), L pivot nodes, A decoder-layer
applications, D width, H heads, K head width, R relative offsets, V target
vocabulary.

The paper: "an encoder Edge Transformer processes the question and produces a
3D tensor state x_enc. Next, the decoder Edge Transformer generates output
tokens one by one, left-to-right. To produce the output distribution for the
token we feed the state of the loop edge (i, i) through a linear layer. To
connect the decoder to the encoder we insert x_enc into the decoder's initial
state. [...] we adapt the Transformer decoder's causal masking approach to our
triangular attention mechanism." Concretely, here:

  encoder   x_enc = ET_enc(SequenceEdgeEmbedding_src(src))           BxSxSxD
            (eq. 10 input, eq. 3 layers; padded source nodes are masked).
  decoder   nodes = S source tokens followed by the T decoder inputs
            (BOS, y_0, ..., y_{T-2}); the initial joint state X^0 (BxNxNxD)
            has the blocks
              source-source  x_enc,
              target-target  eq. 10 on the decoder inputs (token on the loop
                             edge + learned relative position a(i - j)),
              source->target a learned vector c_st (edge (i, j), i source,
                             j target), target->source c_ts;
            Y = ET_dec(X^0) with causal node times (source tokens 0, decoder
            input s at s + 1: edge (i, j) uses pivot l only if
            t_l <= max(t_i, t_j); `layers.triangular`).
  output    logits_s = W y_{S+s, S+s} + b, the loop edge of input s.

So source edges only ever see source tokens, and the edges of decoder input s
only source tokens and decoder inputs <= s: the teacher-forced pass is causal.

Incremental greedy decoding. An edge (i, j) of the joint graph is finished
once the later of its two nodes has arrived, and its state at every decoder
layer never changes afterwards. The decoder state caches, per layer
application, the projections q, k, V^1 x, V^2 x (eq. 6-8) of every finished
edge. Emitting token s adds node p = S + s, whose new row (p, j) and column
(i, p) (j, i <= p) are computed layer by layer from the cache: O(N^2 D + N D^2)
per layer and step instead of the full pass's O(N^3 D + N^2 D^2). The cache
holds 4 A B N^2 D numbers (choose the evaluation batch to fit). Decoding
goes through the model's bound modules only (`EdgeTransformer.layer(a)`'s
`project` and `update`, `SequenceEdgeEmbedding.relative` / `.token`), never
through raw parameter names.
"""

import dataclasses
import math
from typing import Any, Dict, Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from relational_jax.layers import shapes
from relational_jax.layers import triangular as tri_lib
from relational_jax.models import edge_transformer as et_lib
from relational_jax.models import greedy

__all__ = [
    "ETSeq2SeqConfig",
    "EdgeTransformerSeq2Seq",
    "joint_node_times",
    "init_decode_state",
    "decode_step",
    "greedy_decode",
]

Array = jax.Array


def _default_et_config() -> et_lib.ETConfig:
  return et_lib.ETConfig(num_layers=3, num_heads=4, head_dim=16)


@dataclasses.dataclass(frozen=True)
class ETSeq2SeqConfig:
  """Hyperparameters of `EdgeTransformerSeq2Seq`; validated on construction.

  Fields:
    src_vocab_size, tgt_vocab_size: vocabularies.
    et: the Edge Transformer layer and stack hyperparameters (width
      et.edge_width = et.num_heads * et.head_dim, ffn_dim, tied, layout,
      chunk_size, ffn_chunk_size, dropout_rate, ln_epsilon; see
      `edge_transformer.ETConfig`). The encoder applies et.num_layers layers;
      et.ablation must be 'none' and et.impl 'chunked' or 'reference'
      (causal masking).
    num_decoder_layers: layer applications of the decoder (same layer
      hyperparameters as the encoder, its own weights).
    max_distance: relative positions beyond it share an embedding (eq. 10).
    max_src_len, max_tgt_len: longest source and target sequences.
    pad_id: the default source mask is src != pad_id.
    first_token_vectors: add a learned vector (zero at initialisation) to
      the embedding of the first source token (the encoder's) and another
      to that of the first decoder input (the decoder's): the ET authors'
      CFQ encoder-decoder (cfq-semantic-parsing/model.py, `bos_vector`).
  """

  src_vocab_size: int
  tgt_vocab_size: int
  et: et_lib.ETConfig = dataclasses.field(default_factory=_default_et_config)
  num_decoder_layers: int = 3
  max_distance: int = 16
  max_src_len: int = 128
  max_tgt_len: int = 128
  pad_id: int = 0
  first_token_vectors: bool = False

  def __post_init__(self):
    for name in (
        "src_vocab_size",
        "tgt_vocab_size",
        "num_decoder_layers",
        "max_src_len",
        "max_tgt_len",
    ):
      value = getattr(self, name)
      if not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    if not isinstance(self.max_distance, int) or self.max_distance < 0:
      raise ValueError(
          f"max_distance must be an int >= 0, got {self.max_distance!r}."
      )
    if not isinstance(self.first_token_vectors, bool):
      raise ValueError(
          "first_token_vectors must be a bool, got "
          f"{self.first_token_vectors!r}."
      )
    shapes.check_config_type(self.et, et_lib.ETConfig, "et")
    if self.et.ablation != "none":
      raise ValueError(
          "ETSeq2SeqConfig needs et.ablation='none' (the "
          "incremental decoder caches V^2), got "
          f"{self.et.ablation!r}."
      )
    if self.et.impl.startswith("pallas"):
      raise ValueError(
          "ETSeq2SeqConfig needs et.impl in ['chunked', "
          "'reference']: the decoder's causal masking is not "
          f"supported by impl={self.et.impl!r}."
      )

  @property
  def decoder_et(self) -> et_lib.ETConfig:
    """The decoder stack's config: `et` with num_decoder_layers layers."""
    return dataclasses.replace(self.et, num_layers=self.num_decoder_layers)


def joint_node_times(num_b: int, num_s: int, num_t: int) -> Array:
  """BxN causal node times: 0 for the source tokens, s + 1 for input s."""
  t_N = jnp.concatenate([
      jnp.zeros((num_s,), jnp.int32),
      jnp.arange(1, num_t + 1, dtype=jnp.int32),
  ])
  return jnp.broadcast_to(t_N, (num_b, num_s + num_t))


class EdgeTransformerSeq2Seq(nn.Module):
  """ET encoder-decoder (module docstring). Same calling convention as
  `seq2seq.Seq2SeqTransformer`: teacher forcing via `apply`, greedy decoding
  via `greedy_decode` on the unbound module."""

  config: ETSeq2SeqConfig

  def setup(self):
    c = self.config
    d = c.et.edge_width
    self.src_embed = et_lib.SequenceEdgeEmbedding(
        c.src_vocab_size, d, c.max_distance
    )
    self.tgt_embed = et_lib.SequenceEdgeEmbedding(
        c.tgt_vocab_size, d, c.max_distance
    )
    # Row 0: source->target edges (i source, j target); row 1: target->source.
    self.cross = nn.Embed(2, d)
    self.encoder = et_lib.EdgeTransformer(c.et)
    self.decoder = et_lib.EdgeTransformer(c.decoder_et)
    self.out = nn.Dense(c.tgt_vocab_size)
    if c.first_token_vectors:
      zeros = nn.initializers.zeros_init()
      self.src_first = self.param("src_first", zeros, (d,))
      self.tgt_first = self.param("tgt_first", zeros, (d,))

  def encode(self, src_BxS, src_mask_BxS=None, deterministic: bool = True):
    """-> (x_enc_BxSxSxD, src_mask_BxS)."""
    c = self.config
    shapes.check_shape(src_BxS, ("B", "S"), "src")
    if src_BxS.shape[1] > c.max_src_len:
      raise ValueError(
          f"source length {src_BxS.shape[1]} exceeds "
          f"max_src_len={c.max_src_len}."
      )
    src_mask_BxS = greedy.source_mask(src_BxS, src_mask_BxS, c.pad_id)
    x_BxSxSxD = self.src_embed(src_BxS)
    if c.first_token_vectors:  # On the loop edge of source token 0.
      x_BxSxSxD = x_BxSxSxD.at[:, 0, 0].add(self.src_first)
    return (
        self.encoder(x_BxSxSxD, src_mask_BxS, deterministic=deterministic),
        src_mask_BxS,
    )

  def joint_state(self, x_enc_BxSxSxD, tgt_in_BxT):
    """X^0, the decoder's initial BxNxNxD state (module docstring)."""
    num_b, num_s = x_enc_BxSxSxD.shape[:2]
    num_t = tgt_in_BxT.shape[1]
    d = self.config.et.edge_width
    x_tgt_BxTxTxD = self.tgt_embed(tgt_in_BxT)
    if self.config.first_token_vectors:  # The loop edge of decoder input 0.
      x_tgt_BxTxTxD = x_tgt_BxTxTxD.at[:, 0, 0].add(self.tgt_first)
    cross_2xD = self.cross.embedding
    st_BxSxTxD = jnp.broadcast_to(cross_2xD[0], (num_b, num_s, num_t, d))
    ts_BxTxSxD = jnp.broadcast_to(cross_2xD[1], (num_b, num_t, num_s, d))
    top_BxSxNxD = jnp.concatenate([x_enc_BxSxSxD, st_BxSxTxD], axis=2)
    bottom_BxTxNxD = jnp.concatenate([ts_BxTxSxD, x_tgt_BxTxTxD], axis=2)
    return jnp.concatenate([top_BxSxNxD, bottom_BxTxNxD], axis=1)

  def decode(
      self,
      x_enc_BxSxSxD,
      src_mask_BxS,
      tgt_in_BxT,
      tgt_mask_BxT=None,
      deterministic: bool = True,
  ):
    """Teacher-forced decoder logits BxTxV (the causal full pass)."""
    c = self.config
    shapes.check_shape(tgt_in_BxT, ("B", "T"), "tgt_in")
    num_b, num_t = tgt_in_BxT.shape
    if num_t > c.max_tgt_len:
      raise ValueError(
          f"target length {num_t} exceeds max_tgt_len={c.max_tgt_len}."
      )
    num_s = x_enc_BxSxSxD.shape[1]
    if tgt_mask_BxT is None:
      tgt_mask_BxT = jnp.ones((num_b, num_t), bool)
    shapes.check_shape(tgt_mask_BxT, (num_b, num_t), "tgt_mask")
    mask_BxN = jnp.concatenate(
        [src_mask_BxS, jnp.asarray(tgt_mask_BxT).astype(bool)], axis=1
    )
    y_BxNxNxD = self.decoder(
        self.joint_state(x_enc_BxSxSxD, tgt_in_BxT),
        mask_BxN,
        node_time_BxN=joint_node_times(num_b, num_s, num_t),
        deterministic=deterministic,
    )
    loops_BxTxD = jnp.einsum("bttd->btd", y_BxNxNxD[:, num_s:, num_s:])
    return self.out(loops_BxTxD)

  def __call__(
      self,
      src_BxS,
      src_mask_BxS,
      tgt_in_BxT,
      tgt_mask_BxT=None,
      *,
      src_relations_BxSxS=None,
      tgt_tree_pos_BxTxP=None,
      deterministic: bool = True,
  ):
    """Teacher forcing: logits BxTxV for the next token after each input.

    src_relations_BxSxS and tgt_tree_pos_BxTxP belong to other models and
    must be None (the Edge Transformer takes relative positions, eq. 10).
    """
    _reject_extras(src_relations_BxSxS, tgt_tree_pos_BxTxP)
    x_enc_BxSxSxD, src_mask_BxS = self.encode(
        src_BxS, src_mask_BxS, deterministic
    )
    return self.decode(
        x_enc_BxSxSxD, src_mask_BxS, tgt_in_BxT, tgt_mask_BxT, deterministic
    )

  @nn.nowrap
  def greedy_decode(
      self,
      params,
      src_BxS,
      max_len: int,
      bos: int,
      eos: int,
      *,
      src_mask_BxS=None,
      src_relations_BxSxS=None,
      arities: Optional[Sequence[int]] = None,
      pad_id: Optional[int] = None,
  ):
    """See `greedy_decode`."""
    if arities is not None:
      raise ValueError(
          "arities (tree decoding) is not supported by the Edge "
          "Transformer encoder-decoder; pass arities=None."
      )
    _reject_extras(src_relations_BxSxS, None)
    return greedy_decode(
        self,
        params,
        src_BxS,
        max_len,
        bos,
        eos,
        src_mask_BxS=src_mask_BxS,
        pad_id=pad_id,
    )

  # -- Incremental decoding (module docstring), called through `apply` by
  # `init_decode_state` and `decode_step`. The decoder's layers are used
  # through `EdgeTransformer.layer(a).project / .update`.

  def prefill(self, src_BxS, src_mask_BxS, max_len: int) -> Dict[str, Any]:
    """See `init_decode_state`."""
    c = self.config
    x_enc_BxSxSxD, src_mask_BxS = self.encode(src_BxS, src_mask_BxS)
    num_b, num_s = src_BxS.shape
    n = num_s + max_len
    caches = {name: [] for name in _CACHED}
    x_BxSxSxD = x_enc_BxSxSxD
    for application in range(c.num_decoder_layers):
      layer = self.decoder.layer(application)
      projections = layer.project(x_BxSxSxD)
      for name, proj_BxSxSxHxK in zip(_CACHED, projections):
        cache_BxNxNxHxK = jnp.zeros(
            (num_b, n, n) + proj_BxSxSxHxK.shape[3:], proj_BxSxSxHxK.dtype
        )
        caches[name].append(
            cache_BxNxNxHxK.at[:, :num_s, :num_s].set(proj_BxSxSxHxK)
        )
      o_BxSxSxHxK = tri_lib.triangular_attention_core(
          *projections, src_mask_BxS, chunk_size=c.et.chunk_size
      )
      x_BxSxSxD = layer.update(x_BxSxSxD, o_BxSxSxHxK)
    mask_BxN = jnp.concatenate(
        [src_mask_BxS, jnp.ones((num_b, max_len), bool)], axis=1
    )
    state = {name: jnp.stack(arrays) for name, arrays in caches.items()}
    state.update(
        index=jnp.zeros((), jnp.int32),
        mask_BxN=mask_BxN,
        src_len=jnp.asarray(num_s, jnp.int32),
    )
    return state

  def new_node_edges(self, tokens_B, p, num_s, n):
    """Decoder-input (layer 0) states of node p's row (p, j) and column
    (i, p), BxJxD and BxIxD, with input token tokens_B at p (`joint_state`)."""
    cross_2xD = self.cross.embedding
    e_BxD = self.tgt_embed.token(tokens_B)
    if self.config.first_token_vectors:  # Decoder input 0 sits at p = S.
      e_BxD = e_BxD + jnp.where(p == num_s, self.tgt_first, 0.0)
    j_N = jnp.arange(n)
    is_src_Nx1 = (j_N < num_s)[:, None]
    # Row (p, j): offset p - j; column (i, p): offset i - p (eq. 10).
    row_JxD = jnp.where(
        is_src_Nx1, cross_2xD[1], self.tgt_embed.relative(p - j_N)
    )
    col_IxD = jnp.where(
        is_src_Nx1, cross_2xD[0], self.tgt_embed.relative(j_N - p)
    )
    loop_1xNx1 = (j_N == p)[None, :, None]
    row_BxJxD = row_JxD[None] + jnp.where(loop_1xNx1, e_BxD[:, None], 0.0)
    col_BxIxD = col_IxD[None] + jnp.where(loop_1xNx1, e_BxD[:, None], 0.0)
    return row_BxJxD, col_BxIxD

  def decode_next(self, state, tokens_B):
    """See `decode_step`."""
    c = self.config
    mask_BxN = state["mask_BxN"]
    num_b, n = mask_BxN.shape
    shapes.check_shape(tokens_B, (num_b,), "tokens_B")
    num_s = state["src_len"]
    p = num_s + state["index"]
    scale = 1.0 / math.sqrt(c.et.head_dim)
    f32 = jnp.float32
    pivot_BxL = mask_BxN & (jnp.arange(n) <= p)[None]
    x_row_BxJxD, x_col_BxIxD = self.new_node_edges(tokens_B, p, num_s, n)
    caches = {name: state[name] for name in _CACHED}  # AxBxNxNxHxK each.
    zero = jnp.zeros((), jnp.int32)
    for application in range(c.num_decoder_layers):
      layer = self.decoder.layer(application)
      cache = {}
      for name, row_BxJxHxK, col_BxIxHxK in zip(
          _CACHED, layer.project(x_row_BxJxD), layer.project(x_col_BxIxD)
      ):
        # In-place writes of column p, then row p, of this application's cache.
        a = jnp.asarray(application, jnp.int32)
        buf = jax.lax.dynamic_update_slice(
            caches[name],
            col_BxIxHxK[None, :, :, None].astype(caches[name].dtype),
            (a, zero, zero, p, zero, zero),
        )
        buf = jax.lax.dynamic_update_slice(
            buf,
            row_BxJxHxK[None, :, None].astype(buf.dtype),
            (a, zero, p, zero, zero, zero),
        )
        caches[name] = buf
        cache[name] = buf[application]
      take = lambda name, axis: jax.lax.dynamic_index_in_dim(
          cache[name], p, axis=axis, keepdims=False
      ).astype(f32)
      q_BxLxHxK, v1_BxLxHxK = take("q", 1), take("v1", 1)  # x_pl, row p
      k_BxLxHxK, v2_BxLxHxK = take("k", 2), take("v2", 2)  # x_lp, column p
      # Row p: edges (p, j).
      s_BxLxJxH = (
          jnp.einsum("blhk,bljhk->bljh", q_BxLxHxK, cache["k"].astype(f32))
          * scale
      )
      alpha_BxLxJxH = _softmax_over_pivots(
          s_BxLxJxH, pivot_BxL[:, :, None, None], axis=1
      )
      o_row_BxJxHxK = jnp.einsum(
          "bljh,blhk,bljhk->bjhk",
          alpha_BxLxJxH,
          v1_BxLxHxK,
          cache["v2"].astype(f32),
      )
      # Column p: edges (i, p).
      s_BxIxLxH = (
          jnp.einsum("bilhk,blhk->bilh", cache["q"].astype(f32), k_BxLxHxK)
          * scale
      )
      alpha_BxIxLxH = _softmax_over_pivots(
          s_BxIxLxH, pivot_BxL[:, None, :, None], axis=2
      )
      o_col_BxIxHxK = jnp.einsum(
          "bilh,bilhk,blhk->bihk",
          alpha_BxIxLxH,
          cache["v1"].astype(f32),
          v2_BxLxHxK,
      )
      dtype = x_row_BxJxD.dtype
      x_row_BxJxD = layer.update(x_row_BxJxD, o_row_BxJxHxK.astype(dtype))
      x_col_BxIxD = layer.update(x_col_BxIxD, o_col_BxIxHxK.astype(dtype))
    loop_BxD = jax.lax.dynamic_index_in_dim(
        x_row_BxJxD, p, axis=1, keepdims=False
    )
    new_state = dict(state)
    new_state.update(caches)
    new_state["index"] = state["index"] + 1
    return self.out(loop_BxD), new_state


def _reject_extras(src_relations_BxSxS, tgt_tree_pos_BxTxP):
  if src_relations_BxSxS is not None:
    raise ValueError(
        "src_relations_BxSxS is not supported by the Edge "
        "Transformer encoder-decoder (use a relation-aware "
        "Seq2SeqTransformer); pass None."
    )
  if tgt_tree_pos_BxTxP is not None:
    raise ValueError(
        "tgt_tree_pos_BxTxP is not supported by the Edge "
        "Transformer encoder-decoder (positions='tree' needs "
        "Seq2SeqTransformer); pass None."
    )


# ---------------------------------------------------------------------------
# Incremental decoding (`EdgeTransformerSeq2Seq.prefill` / `.decode_next`).

# Per-application caches of finished edges: q, k, V^1 y, V^2 y (eq. 6-8).
_CACHED = ("q", "k", "v1", "v2")


def init_decode_state(
    model: EdgeTransformerSeq2Seq,
    params,
    src_BxS,
    max_len: int,
    src_mask_BxS=None,
) -> Dict[str, Any]:
  """Encodes the source and runs the decoder layers on the source block.

  Returns the decoder state for `max_len` target steps: 'index' (steps done),
  'mask_BxN' (real nodes), 'src_len' (S), and the per-application caches
  'q', 'k', 'v1', 'v2' (AxBxNxNxHxK, N = S + max_len) of finished edges.
  """
  return model.apply(
      {"params": params},
      src_BxS,
      src_mask_BxS,
      max_len,
      method=EdgeTransformerSeq2Seq.prefill,
  )


def _softmax_over_pivots(s, pivot_mask, axis):
  s = jnp.where(pivot_mask, s, tri_lib._NEG)  # pylint: disable=protected-access
  return jnp.where(pivot_mask, jax.nn.softmax(s, axis=axis), 0.0)


def decode_step(model: EdgeTransformerSeq2Seq, params, state, tokens_B):
  """Feeds decoder input `tokens_B` at position s = state['index'] (node
  p = S + s); returns the logits BxV of the token after it and the new state.

  For each decoder-layer application, the new row (p, j) and column (i, p)
  are projected (`EdgeTransformerLayer.project`) and written to the cache,
  then attend over the pivots l <= p (all earlier edges are finished, so this
  equals the causal full pass):  a_pj = sum_l softmax_l(q_pl . k_lj) V^1 x_pl
  * V^2 x_lj  and  a_ip = sum_l softmax_l(q_il . k_lp) V^1 x_il * V^2 x_lp
  (eq. 4-8), and are finished by `EdgeTransformerLayer.update`.
  """
  return model.apply(
      {"params": params},
      state,
      tokens_B,
      method=EdgeTransformerSeq2Seq.decode_next,
  )


def _greedy_init(model, params, inputs, max_len: int):
  """`greedy.decode`'s init_fn: the prefilled decoder state
  (`init_decode_state`)."""
  src_BxS, src_mask_BxS = inputs
  return init_decode_state(model, params, src_BxS, max_len, src_mask_BxS)


def _greedy_step(model, params, inputs, state, last_B):
  """`greedy.decode`'s step_fn: `decode_step` (the source is in `state`)."""
  del inputs
  return decode_step(model, params, state, last_B)


def greedy_decode(
    model: EdgeTransformerSeq2Seq,
    params,
    src_BxS,
    max_len: int,
    bos: int,
    eos: int,
    *,
    src_mask_BxS=None,
    pad_id: Optional[int] = None,
):
  """Incremental greedy decoding (module docstring), jitted, on device
  (`relational_jax.models.greedy.decode`).

  Returns BxT int32 tokens (T = max_len, BOS not included); each row ends at
  its first EOS (kept) and is padded with pad_id (default config.pad_id).
  """
  pad = greedy.pad_token(model.config, max_len, pad_id)
  src_BxS = jnp.asarray(src_BxS)
  shapes.check_shape(src_BxS, ("B", "S"), "src")
  src_mask_BxS = greedy.source_mask(src_BxS, src_mask_BxS, model.config.pad_id)
  return greedy.decode(
      _greedy_init,
      _greedy_step,
      model,
      params,
      (src_BxS, src_mask_BxS),
      max_len,
      bos,
      eos,
      pad,
  )
