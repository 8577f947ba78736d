"""Encoder-decoder Transformers for compositional seq2seq and seq2tree tasks.

Axis letters (`relational_jax.layers.shapes`): B batch, S source tokens,
T target tokens (decoder inputs), M encoder memory entries, D width, F
feed-forward hidden width, V vocabulary, P = n*k raw tree-position width,
Y output-edge labels.

One config (`Seq2SeqConfig`) selects:
  positions 'absolute'  sinusoidal PE added to the embeddings, combined by the
                        `scaling` scheme ('teu', 'ped', 'none'; Csordas et al.
                        2021 sec. 3.3 / appendix D);
            'relative'  Transformer-XL relative attention in every encoder and
                        decoder self-attention (Csordas et al. 2021 appendix
                        C); cross-attention has no positions. With no
                        positional encoding to scale, `scaling` 'ped' and
                        'none' are the same model (as in their code); 'teu'
                        still multiplies the tokens by sqrt(D);
            'tree'      seq2tree (Shiv & Quirk 2019): source tokens take the
                        sinusoidal PE, decoder inputs the learned tree PE
                        (sec. 3.2) of their node; `tree_alignment` 'output'
                        (sec. 4, default): the start token has the zero
                        position and every fed-back output its own; 'next':
                        each input the position of the node it generates.
                        With `tree_encoder` (tree2tree, sec. 5.1) the source
                        tokens, a tree's annotated DFS sequence, take the
                        tree PE of their node too. The tree PE is
                        `tree_pos_width` wide (the paper's d_pos, 2048 with
                        d_model 256 in sec. 5.1.1; 0 = d_model); a width
                        other than d_model is mapped to d_model by a learned
                        dense layer, with a bias as in the authors' code
                        (microsoft/icecaps, `tf.layers.dense` in
                        abstract_transformer_estimator.py `init_inputs` and
                        the decoder's `pos_proj`; `tree_pos_bias=False`:
                        bias-free, our option); `tree_pe_norm` 'paper'
                        scales it by sqrt(d_model / 2) as sec. 3.2 states
                        and icecaps computes, 'pe_width' by sqrt(d_pos / 2),
                        'sinusoid' to the sinusoid's norm; `tree_pe_init`
                        'glorot' draws theta as icecaps (TensorFlow's
                        default initialiser), 'spread' spreads p = tanh(theta)
                        over [0.5, 0.95] (see tree.TreePositionalEncoding);
                        `tree_tokens` 'lcrs_null' (icecaps): sequences are
                        LCRS binary trees with explicit '_NULL/0' leaves
                        (tree.linearize_lcrs_null), 'arity': general trees
                        annotated with their arity (our option); greedy
                        decoding ends a row when its tree is complete
                        (`tree_end` 'complete', icecaps's
                        `build_rt_decoder`: the end token is forced) or
                        at the model's EOS ('eos', our option);
  tied                  one encoder layer and one decoder layer applied L
                        times (Universal Transformer without ACT or timestep
                        embedding, as in Csordas et al. 2021);
  relation_aware        encoder self-attention is Graph2Graph relation-aware
                        attention over BxSxS relation ids (Mohammadshahi &
                        Henderson 2020 eq. 3-4); with num_edge_labels > 0 the
                        model also scores output edges from token pairs.

Layers are post-LN (Vaswani et al. 2017, as in Csordas et al. 2021) unless
`pre_norm`; LayerNorm epsilon `ln_epsilon` is 1e-5 as Csordas et al.'s
PyTorch code (PyTorch's default); Flax's default is 1e-6. Greedy decoding
uses explicit self-attention caches (`attention.init_cache`), one per
decoder-layer application.

The Edge Transformer encoder-decoder (ET encoder, ET decoder over the joint
source+target graph) is `relational_jax.models.et_seq2seq`; it has the same
calling convention. Extension point for other encoders feeding this
Transformer decoder: `register_encoder(name, factory)`. `factory(config)` must return a linen
Module called as
    encoder(src_BxS, src_mask_BxS, src_relations_BxSxS, deterministic)
      -> (memory_BxMxD, memory_mask_BxM)
The memory may have any length M (an Edge Transformer can return its N^2 edge
states flattened, or the diagonal x_ii); the decoder only cross-attends to it.
Select it with `Seq2SeqConfig(encoder=name)`; a subclass of Seq2SeqConfig can
carry the encoder's own hyperparameters.
"""

import dataclasses
import functools
from typing import Callable, Dict, Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from relational_jax.layers import attention as attn_lib
from relational_jax.layers import init as init_lib
from relational_jax.layers import positional_encoding as pe_lib
from relational_jax.layers import relation_aware as ra_lib
from relational_jax.layers import shapes
from relational_jax.layers import tree as tree_lib
from relational_jax.models import greedy

POSITIONS = ("absolute", "relative", "tree")

ENCODERS: Dict[str, Callable] = {}


def register_encoder(name: str, factory: Callable) -> None:
  """Registers `factory(config) -> linen Module` under `name` (see module
  docstring for the call contract)."""
  ENCODERS[name] = factory


# Seq2SeqConfig fields read only with positions='tree' (tree_order also
# orders generated For2Lam targets, so it is not among them).
_TREE_FIELDS = (
    "tree_depth",
    "tree_arity",
    "tree_binarize",
    "tree_alignment",
    "tree_pos_width",
    "tree_pe_norm",
    "tree_pe_init",
    "tree_pos_bias",
    "tree_end",
)


@dataclasses.dataclass(frozen=True)
class Seq2SeqConfig:
  """Hyperparameters of `Seq2SeqTransformer`; validated on construction.

  ffn_dim is the feed-forward hidden width F; tied applies one encoder and
  one decoder layer num_*_layers times (Universal Transformer); ln_epsilon is
  the LayerNorm epsilon, 1e-5 as the authors' code (Flax's default is 1e-6).

  Four fields follow Csordas et al.'s released code
  (RobertCsordas/transformer_generalization, the [C21] models) by default;
  each is an option because other codebases differ:
    attention_out_bias  their attention output map has no bias
                        (`multi_head_merge`, bias=False); applies to the plain
                        and relative attention (relation-aware attention keeps
                        its own map).
    output_bias         their output layer has a bias, tied to the embedding
                        or not (`TiedEmbedding.bias`, zeros at init).
    embedding_dropout   dropout on the embedded inputs. Negative (default):
                        theirs, 0.1 where an absolute encoding is added
                        (their `PositionalEncoding` has a fixed p=0.1; tree
                        positions count as absolute), none with relative
                        positions (their relative variants add nothing). Not
                        dropout_rate.
    init                'csordas': their layers' initialisation ('flax':
                        Flax's defaults); see `layers.init`.
  tests/fidelity/test_peer_goldens.py checks that the defaults compute their
  TransformerEncDecModel.
  """

  src_vocab_size: int
  tgt_vocab_size: int
  d_model: int = 128
  num_heads: int = 4
  ffn_dim: int = 256
  num_encoder_layers: int = 3
  num_decoder_layers: int = 3
  dropout_rate: float = 0.1
  positions: str = "absolute"  # One of POSITIONS.
  scaling: str = "ped"  # One of positional_encoding.SCALINGS.
  tied: bool = False
  relation_aware: bool = False
  num_relations: int = 3  # Relation ids in [0, num_relations).
  num_edge_labels: int = 0  # > 0 adds a PairwiseEdgeScorer head.
  edge_scorer: str = "mlp"  # One of relation_aware.SCORERS.
  max_src_len: int = 128
  max_tgt_len: int = 128
  tree_depth: int = 32  # k of Shiv & Quirk (sec. 5: k = 32).
  tree_arity: int = 2  # n; 2 after LCRS binarisation.
  tree_order: str = "dfs"  # One of tree.ORDERS.
  tree_binarize: bool = True
  tree_alignment: str = "output"  # One of tree.ALIGNMENTS (sec. 4).
  tree_encoder: bool = False  # Tree PE on the source too (tree2tree).
  tree_pos_width: int = 0  # d_pos; 0 = d_model; % (n*k) == 0.
  tree_pe_norm: str = "paper"  # One of tree.PE_NORMS (sec. 3.2 scale).
  tree_pe_init: str = "glorot"  # One of tree.THETA_INITS (icecaps').
  tree_pos_bias: bool = True  # Bias on the d_pos -> d_model map (icecaps').
  tree_tokens: str = "lcrs_null"  # One of tree.TREE_TOKENS (icecaps').
  tree_end: str = "complete"  # One of tree.TREE_ENDS (icecaps': complete).
  pre_norm: bool = False
  tie_embeddings: bool = False  # Decoder output = h E^T.
  # Csordas et al.'s code (their defaults, see the class docstring):
  attention_out_bias: bool = False  # Bias on attention's output map W_O.
  output_bias: bool = True  # Bias on the output logits (tied too).
  embedding_dropout: float = -1.0  # < 0: 0.1 with added positions, else 0.
  init: str = "csordas"  # One of init.INITS (parameter init).
  pad_id: int = 0  # Default src_mask is src != pad_id.
  encoder: str = "transformer"  # A name given to register_encoder.
  ln_epsilon: float = 1e-5

  def __post_init__(self):
    shapes.check_bool_fields(self)
    self.validate()

  def validate(self) -> None:
    for name in (
        "src_vocab_size",
        "tgt_vocab_size",
        "d_model",
        "num_heads",
        "ffn_dim",
        "num_encoder_layers",
        "num_decoder_layers",
        "num_relations",
        "max_src_len",
        "max_tgt_len",
        "tree_depth",
        "tree_arity",
    ):
      value = getattr(self, name)
      if not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    if self.tree_pos_width < 0:
      raise ValueError(
          "tree_pos_width must be >= 0 (0: d_model), got "
          f"{self.tree_pos_width}."
      )
    if self.num_edge_labels < 0:
      raise ValueError(
          f"num_edge_labels must be >= 0, got {self.num_edge_labels}."
      )
    if not 0.0 <= self.dropout_rate < 1.0:
      raise ValueError(
          f"dropout_rate must be in [0, 1), got {self.dropout_rate}."
      )
    if not self.embedding_dropout < 1.0:
      raise ValueError(
          "embedding_dropout must be < 1 (negative: the "
          f"authors' rule), got {self.embedding_dropout}."
      )
    if not self.ln_epsilon > 0.0:
      raise ValueError(f"ln_epsilon must be positive, got {self.ln_epsilon}.")
    shapes.check_choice(self.positions, POSITIONS, "positions")
    shapes.check_choice(self.scaling, pe_lib.SCALINGS, "scaling")
    shapes.check_choice(self.init, init_lib.INITS, "init")
    shapes.check_choice(self.tree_order, tree_lib.ORDERS, "tree_order")
    shapes.check_choice(
        self.tree_alignment, tree_lib.ALIGNMENTS, "tree_alignment"
    )
    shapes.check_choice(self.tree_pe_norm, tree_lib.PE_NORMS, "tree_pe_norm")
    shapes.check_choice(self.tree_pe_init, tree_lib.THETA_INITS, "tree_pe_init")
    shapes.check_choice(self.tree_tokens, tree_lib.TREE_TOKENS, "tree_tokens")
    shapes.check_choice(self.tree_end, tree_lib.TREE_ENDS, "tree_end")
    shapes.check_choice(self.edge_scorer, ra_lib.SCORERS, "edge_scorer")
    shapes.check_choice(self.encoder, tuple(ENCODERS), "encoder")
    shapes.check_divides(self.d_model, self.num_heads, "d_model")
    if self.relation_aware and self.positions == "relative":
      raise ValueError(
          "relation_aware=True needs positions in ['absolute', 'tree'] (the "
          "relation-aware encoder takes absolute positions, as in "
          "Graph2Graph); got positions='relative'."
      )
    if self.positions == "tree":
      if self.tree_tokens == "lcrs_null" and not self.tree_binarize:
        raise ValueError(
            "tree_tokens='lcrs_null' reads LCRS-binarised trees: "
            "tree_binarize must be True (or use tree_tokens='arity')."
        )
      if self.tree_binarize and self.tree_arity != 2:
        raise ValueError(
            "tree_binarize=True gives binary trees: tree_arity "
            f"must be 2, got {self.tree_arity}."
        )
      if self.tree_width % (self.tree_arity * self.tree_depth):
        raise ValueError(
            "positions='tree' needs the tree PE width (tree_pos_width, or "
            f"d_model when 0: {self.tree_width}) to be a multiple of "
            f"tree_arity*tree_depth ({self.tree_arity}*{self.tree_depth})."
        )
      if self.tree_encoder and self.encoder != "transformer":
        raise ValueError(
            "tree_encoder=True needs encoder='transformer', got "
            f"encoder={self.encoder!r}."
        )
      if self.tree_encoder and self.relation_aware:
        raise ValueError(
            "tree_encoder=True and relation_aware=True both "
            "define the source positions; choose one."
        )
    elif self.tree_encoder:
      raise ValueError(
          "tree_encoder=True needs positions='tree', got "
          f"positions={self.positions!r}."
      )
    # Nothing silently unread: fields that only another setting reads keep
    # their defaults without it.
    defaults = {f.name: f.default for f in dataclasses.fields(self)}
    unread = {
        "positions='tree'": () if self.positions == "tree" else _TREE_FIELDS,
        "relation_aware=True": (
            () if self.relation_aware else ("num_relations",)
        ),
        "num_edge_labels > 0": () if self.num_edge_labels else ("edge_scorer",),
    }
    for needs, names in unread.items():
      for name in names:
        if getattr(self, name) != defaults[name]:
          raise ValueError(
              f"{name}={getattr(self, name)!r} is read only with {needs}; "
              f"leave it at its default {defaults[name]!r}."
          )

  @property
  def embedding_dropout_rate(self) -> float:
    """The embedding dropout in effect (see the class docstring)."""
    if self.embedding_dropout >= 0.0:
      return self.embedding_dropout
    return 0.0 if self.positions == "relative" else 0.1

  @property
  def tree_position_dim(self) -> int:
    return self.tree_arity * self.tree_depth

  @property
  def tree_width(self) -> int:
    """Width of the tree PE before its map to d_model (d_pos)."""
    return self.tree_pos_width or self.d_model


# ---------------------------------------------------------------------------
# Layers.


class FeedForward(nn.Module):
  """max(0, h W_1 + b_1) W_2 + b_2 ([V17] eq. 2), dropout after the ReLU."""

  d_model: int
  ffn_dim: int
  dropout_rate: float = 0.0
  init_scheme: str = "flax"  # One of init.INITS (not `init`: Module.init).

  @nn.compact
  def __call__(self, h_BxNxD, deterministic: bool = True):
    shapes.check_shape(h_BxNxD, ("B", "N", self.d_model), "inputs")
    i = init_lib.feed_forward(self.init_scheme, self.d_model, self.ffn_dim)
    u_BxNxF = jax.nn.relu(
        nn.Dense(
            self.ffn_dim,
            kernel_init=i["hidden_kernel"],
            bias_init=i["hidden_bias"],
            name="hidden",
        )(h_BxNxD)
    )
    u_BxNxF = nn.Dropout(self.dropout_rate)(
        u_BxNxF, deterministic=deterministic
    )
    return nn.Dense(
        self.d_model,
        kernel_init=i["out_kernel"],
        bias_init=i["out_bias"],
        name="out",
    )(u_BxNxF)


def _attention(
    c: Seq2SeqConfig, causal: bool, relative: Optional[bool] = None
) -> nn.Module:
  """A layer's multi-head attention at the config's width, heads, dropout,
  output bias and initialisation: with relative positions (Csordas et al.
  2021 appendix C, `attention.RelativeMultiHeadAttention`) or none (Vaswani
  et al. 2017 eq. 1); relative by default when `c.positions` is."""
  if relative is None:
    relative = c.positions == "relative"
  module = (
      attn_lib.RelativeMultiHeadAttention
      if relative
      else attn_lib.MultiHeadAttention
  )
  return module(
      c.d_model,
      c.num_heads,
      c.dropout_rate,
      causal=causal,
      out_bias=c.attention_out_bias,
      kernel_init=init_lib.attention_kernel(c.init, relative=relative),
  )


class EncoderLayer(nn.Module):
  """Self-attention (plain, relative or relation-aware) + feed-forward."""

  config: Seq2SeqConfig

  def setup(self):
    c = self.config
    if c.relation_aware:
      self.self_attn = ra_lib.RelationAwareAttention(
          c.d_model, c.num_heads, c.num_relations, c.dropout_rate
      )
    else:
      self.self_attn = _attention(c, causal=False)
    self.ff = FeedForward(c.d_model, c.ffn_dim, c.dropout_rate, c.init)
    self.attn_norm = nn.LayerNorm(epsilon=c.ln_epsilon)
    self.ff_norm = nn.LayerNorm(epsilon=c.ln_epsilon)
    self.dropout = nn.Dropout(c.dropout_rate)

  def __call__(
      self, h_BxSxD, mask_BxS, relations_BxSxS=None, deterministic: bool = True
  ):
    c = self.config
    shapes.check_shape(h_BxSxD, ("B", "S", c.d_model), "encoder hiddens")
    x_BxSxD = self.attn_norm(h_BxSxD) if c.pre_norm else h_BxSxD
    if c.relation_aware:
      a_BxSxD = self.self_attn(
          x_BxSxD, relations_BxSxS, mask_BxS, deterministic
      )
    elif c.positions == "relative":
      a_BxSxD = self.self_attn(x_BxSxD, mask_BxS, deterministic)
    else:
      a_BxSxD = self.self_attn(x_BxSxD, None, mask_BxS, deterministic)
    h_BxSxD = _residual(
        h_BxSxD,
        self.dropout(a_BxSxD, deterministic),
        self.attn_norm,
        c.pre_norm,
    )
    x_BxSxD = self.ff_norm(h_BxSxD) if c.pre_norm else h_BxSxD
    f_BxSxD = self.ff(x_BxSxD, deterministic)
    return _residual(
        h_BxSxD, self.dropout(f_BxSxD, deterministic), self.ff_norm, c.pre_norm
    )


class DecoderLayer(nn.Module):
  """Causal self-attention + cross-attention (no positions) + feed-forward."""

  config: Seq2SeqConfig

  def setup(self):
    c = self.config
    self.self_attn = _attention(c, causal=True)
    self.cross_attn = _attention(c, causal=False, relative=False)
    self.ff = FeedForward(c.d_model, c.ffn_dim, c.dropout_rate, c.init)
    self.self_norm = nn.LayerNorm(epsilon=c.ln_epsilon)
    self.cross_norm = nn.LayerNorm(epsilon=c.ln_epsilon)
    self.ff_norm = nn.LayerNorm(epsilon=c.ln_epsilon)
    self.dropout = nn.Dropout(c.dropout_rate)

  def _after_self(
      self, h_BxTxD, a_BxTxD, memory_BxMxD, memory_mask_BxM, deterministic
  ):
    c = self.config
    h_BxTxD = _residual(
        h_BxTxD,
        self.dropout(a_BxTxD, deterministic),
        self.self_norm,
        c.pre_norm,
    )
    x_BxTxD = self.cross_norm(h_BxTxD) if c.pre_norm else h_BxTxD
    a_BxTxD = self.cross_attn(
        x_BxTxD, memory_BxMxD, memory_mask_BxM, deterministic
    )
    h_BxTxD = _residual(
        h_BxTxD,
        self.dropout(a_BxTxD, deterministic),
        self.cross_norm,
        c.pre_norm,
    )
    x_BxTxD = self.ff_norm(h_BxTxD) if c.pre_norm else h_BxTxD
    f_BxTxD = self.ff(x_BxTxD, deterministic)
    return _residual(
        h_BxTxD, self.dropout(f_BxTxD, deterministic), self.ff_norm, c.pre_norm
    )

  def __call__(
      self,
      h_BxTxD,
      memory_BxMxD,
      memory_mask_BxM,
      tgt_mask_BxT=None,
      deterministic: bool = True,
  ):
    c = self.config
    shapes.check_shape(h_BxTxD, ("B", "T", c.d_model), "decoder hiddens")
    x_BxTxD = self.self_norm(h_BxTxD) if c.pre_norm else h_BxTxD
    if c.positions == "relative":
      a_BxTxD = self.self_attn(x_BxTxD, tgt_mask_BxT, deterministic)
    else:
      a_BxTxD = self.self_attn(x_BxTxD, None, tgt_mask_BxT, deterministic)
    return self._after_self(
        h_BxTxD, a_BxTxD, memory_BxMxD, memory_mask_BxM, deterministic
    )

  def decode_step(
      self,
      h_BxTxD,
      memory_BxMxD,
      memory_mask_BxM,
      cache,
      deterministic: bool = True,
  ):
    c = self.config
    shapes.check_shape(h_BxTxD, ("B", "T", c.d_model), "decoder hiddens")
    x_BxTxD = self.self_norm(h_BxTxD) if c.pre_norm else h_BxTxD
    a_BxTxD, cache = self.self_attn.decode_step(x_BxTxD, cache, deterministic)
    return (
        self._after_self(
            h_BxTxD, a_BxTxD, memory_BxMxD, memory_mask_BxM, deterministic
        ),
        cache,
    )


def _residual(h, update, norm, pre_norm: bool):
  return h + update if pre_norm else norm(h + update)


def tree_decoder_state(c: Seq2SeqConfig) -> tree_lib.TreeDecoderState:
  """The partial-tree tracker of one decoded row: with tree_tokens
  'lcrs_null' the tokens are the binary tree's own nodes, a node of arity 1
  having a right child only (icecaps `get_next_pos_tree`); with 'arity'
  those of a general tree, placed in its LCRS binarisation
  (tree_binarize)."""
  if c.tree_tokens == "lcrs_null":
    return tree_lib.TreeDecoderState(
        c.tree_order, c.tree_depth, c.tree_arity, False, "last"
    )
  return tree_lib.TreeDecoderState(
      c.tree_order, c.tree_depth, c.tree_arity, c.tree_binarize
  )


class TreeEmbedding(nn.Module):
  """Raw n*k tree positions -> d_model features: the learned tree PE of
  Shiv & Quirk sec. 3.2 (`tree.TreePositionalEncoding`), `tree_width` wide,
  then, if that is not d_model, a dense layer to d_model: Glorot-uniform
  kernel and a zero-initialised bias, as icecaps' `tf.layers.dense` under
  its Xavier-initialised scope (`tree_pos_bias=False`: no bias)."""

  config: Seq2SeqConfig

  @nn.compact
  def __call__(self, x_BxNxP):
    c = self.config
    shapes.check_shape(
        x_BxNxP, ("B", "N", c.tree_position_dim), "tree positions"
    )
    pe_BxNxW = tree_lib.TreePositionalEncoding(
        c.d_model,
        c.tree_depth,
        c.tree_arity,
        c.tree_pe_norm,
        c.tree_pe_init,
        c.tree_width,
        name="encoding",
    )(jnp.asarray(x_BxNxP, jnp.float32))
    if c.tree_width == c.d_model:
      return pe_BxNxW
    return nn.Dense(
        c.d_model,
        use_bias=c.tree_pos_bias,
        kernel_init=nn.initializers.glorot_uniform(),
        name="to_d_model",
    )(pe_BxNxW)


# ---------------------------------------------------------------------------
# Stacks.


def _layer_schedule(num_layers: int, tied: bool):
  """Index of the layer module used at each of the num_layers applications."""
  return [0 if tied else l for l in range(num_layers)]


class TransformerEncoder(nn.Module):
  """Token embedding (+ sinusoidal PE unless relative) and encoder layers."""

  config: Seq2SeqConfig

  def setup(self):
    c = self.config
    self.embed = pe_lib.TokenEmbedding(
        c.src_vocab_size,
        c.d_model,
        c.scaling,
        init_lib.embedding(c.init, c.scaling, c.positions, c.d_model),
    )
    if c.tree_encoder:
      self.tree_pe = TreeEmbedding(c)
    num_modules = 1 if c.tied else c.num_encoder_layers
    self.layers = [EncoderLayer(c) for _ in range(num_modules)]
    if c.pre_norm:
      self.final_norm = nn.LayerNorm(epsilon=c.ln_epsilon)
    self.dropout = nn.Dropout(c.embedding_dropout_rate)

  def __call__(
      self,
      src_BxS,
      src_mask_BxS,
      src_relations_BxSxS=None,
      deterministic: bool = True,
      src_tree_pos_BxSxP=None,
  ):
    c = self.config
    shapes.check_shape(src_BxS, ("B", "S"), "src")
    num_b, num_s = src_BxS.shape
    shapes.check_shape(src_mask_BxS, (num_b, num_s), "src_mask")
    if num_s > c.max_src_len:
      raise ValueError(
          f"source length {num_s} exceeds max_src_len={c.max_src_len}."
      )
    if c.relation_aware:
      if src_relations_BxSxS is None:
        src_relations_BxSxS = jnp.zeros((num_b, num_s, num_s), jnp.int32)
      shapes.check_shape(
          src_relations_BxSxS, (num_b, num_s, num_s), "src_relations"
      )
    elif src_relations_BxSxS is not None:
      raise ValueError("src_relations_BxSxS given but relation_aware=False.")
    if c.tree_encoder:
      if src_tree_pos_BxSxP is None:
        raise ValueError(
            "tree_encoder=True needs the source tokens' tree "
            "positions (src_tree_pos_BxSxP; see "
            "tree.node_positions)."
        )
      shapes.check_shape(
          src_tree_pos_BxSxP,
          (num_b, num_s, c.tree_position_dim),
          "src_tree_pos",
      )
      pe = self.tree_pe(src_tree_pos_BxSxP)
    elif c.positions == "relative":
      pe = None
    else:
      pe = pe_lib.sinusoidal(num_s, c.d_model)
    h_BxSxD = self.dropout(self.embed(src_BxS, pe), deterministic)
    for l in _layer_schedule(c.num_encoder_layers, c.tied):
      h_BxSxD = self.layers[l](
          h_BxSxD, src_mask_BxS, src_relations_BxSxS, deterministic
      )
    if c.pre_norm:
      h_BxSxD = self.final_norm(h_BxSxD)
    return h_BxSxD, src_mask_BxS


register_encoder("transformer", TransformerEncoder)


def init_decoder_cache(
    config: Seq2SeqConfig, batch: int, max_len: int, dtype=jnp.float32
):
  """Empty cache: one self-attention cache per decoder-layer application."""
  head_dim = config.d_model // config.num_heads
  return {
      "index": jnp.zeros((), jnp.int32),
      "layers": [
          attn_lib.init_cache(batch, max_len, config.num_heads, head_dim, dtype)
          for _ in range(config.num_decoder_layers)
      ],
  }


class TransformerDecoder(nn.Module):
  """Target embedding (+ sinusoidal or tree PE), decoder layers, logits."""

  config: Seq2SeqConfig

  def setup(self):
    c = self.config
    self.embed = pe_lib.TokenEmbedding(
        c.tgt_vocab_size,
        c.d_model,
        c.scaling,
        init_lib.embedding(c.init, c.scaling, c.positions, c.d_model),
    )
    if c.positions == "tree":
      self.tree_pe = TreeEmbedding(c)
    num_modules = 1 if c.tied else c.num_decoder_layers
    self.layers = [DecoderLayer(c) for _ in range(num_modules)]
    if c.pre_norm:
      self.final_norm = nn.LayerNorm(epsilon=c.ln_epsilon)
    if not c.tie_embeddings:
      i = init_lib.output_map(c.init, c.d_model)
      self.out = nn.Dense(
          c.tgt_vocab_size,
          use_bias=c.output_bias,
          kernel_init=i["kernel"],
          bias_init=i["bias"],
          name="out",
      )
    elif c.output_bias:
      self.out_bias_V = self.param(
          "out_bias", nn.initializers.zeros, (c.tgt_vocab_size,)
      )
    self.dropout = nn.Dropout(c.embedding_dropout_rate)

  def _embed(self, tokens_BxT, offset, tree_pos_BxTxP, deterministic):
    c = self.config
    num_b, num_t = tokens_BxT.shape
    if c.positions != "tree" and tree_pos_BxTxP is not None:
      raise ValueError(
          f"tgt_tree_pos_BxTxP given but positions={c.positions!r} (tree "
          "positions are read with positions='tree' only)."
      )
    if c.positions == "absolute":
      pe = pe_lib.sinusoidal(num_t, c.d_model, offset)
    elif c.positions == "tree":
      if tree_pos_BxTxP is None:
        raise ValueError(
            "positions='tree' needs the decoder inputs' tree "
            "positions (tgt_tree_pos_BxTxP; see "
            "tree.decoder_positions / TreeDecoderState)."
        )
      shapes.check_shape(
          tree_pos_BxTxP, (num_b, num_t, c.tree_position_dim), "tgt_tree_pos"
      )
      pe = self.tree_pe(tree_pos_BxTxP)
    else:
      pe = None
    return self.dropout(self.embed(tokens_BxT, pe), deterministic)

  def _logits(self, h_BxTxD):
    c = self.config
    if c.pre_norm:
      h_BxTxD = self.final_norm(h_BxTxD)
    if c.tie_embeddings:
      logits_BxTxV = self.embed.attend(h_BxTxD)
      return logits_BxTxV + self.out_bias_V if c.output_bias else logits_BxTxV
    return self.out(h_BxTxD)

  def __call__(
      self,
      tgt_in_BxT,
      memory_BxMxD,
      memory_mask_BxM,
      tgt_mask_BxT=None,
      tgt_tree_pos_BxTxP=None,
      deterministic: bool = True,
  ):
    c = self.config
    shapes.check_shape(tgt_in_BxT, ("B", "T"), "tgt_in")
    if tgt_in_BxT.shape[1] > c.max_tgt_len:
      raise ValueError(
          f"target length {tgt_in_BxT.shape[1]} exceeds "
          f"max_tgt_len={c.max_tgt_len}."
      )
    h_BxTxD = self._embed(tgt_in_BxT, 0, tgt_tree_pos_BxTxP, deterministic)
    for l in _layer_schedule(c.num_decoder_layers, c.tied):
      h_BxTxD = self.layers[l](
          h_BxTxD, memory_BxMxD, memory_mask_BxM, tgt_mask_BxT, deterministic
      )
    return self._logits(h_BxTxD)

  def decode_step(
      self,
      tokens_BxT,
      memory_BxMxD,
      memory_mask_BxM,
      cache,
      tree_pos_BxTxP=None,
      deterministic: bool = True,
  ):
    """Logits for T new decoder inputs at positions index..index+T-1."""
    c = self.config
    shapes.check_shape(tokens_BxT, ("B", "T"), "tokens")
    if len(cache["layers"]) != c.num_decoder_layers:
      raise ValueError(
          f"cache has {len(cache['layers'])} layer caches, the "
          f"decoder applies {c.num_decoder_layers} layers."
      )
    h_BxTxD = self._embed(
        tokens_BxT, cache["index"], tree_pos_BxTxP, deterministic
    )
    new_layers = []
    for application, l in enumerate(
        _layer_schedule(c.num_decoder_layers, c.tied)
    ):
      h_BxTxD, layer_cache = self.layers[l].decode_step(
          h_BxTxD,
          memory_BxMxD,
          memory_mask_BxM,
          cache["layers"][application],
          deterministic,
      )
      new_layers.append(layer_cache)
    new_cache = {
        "index": cache["index"] + tokens_BxT.shape[1],
        "layers": new_layers,
    }
    return self._logits(h_BxTxD), new_cache


# ---------------------------------------------------------------------------
# The model.


class Seq2SeqTransformer(nn.Module):
  """Encoder-decoder Transformer; see the module docstring for variants.

  Teacher forcing: `model.apply({'params': p}, src, src_mask, tgt_in, ...)`
  returns BxTxV logits. Greedy decoding: `model.greedy_decode(p, src, ...)`
  on the unbound module.
  """

  config: Seq2SeqConfig

  def setup(self):
    c = self.config
    self.encoder = ENCODERS[c.encoder](c)
    self.decoder = TransformerDecoder(c)
    if c.num_edge_labels > 0:
      self.edge_scorer = ra_lib.PairwiseEdgeScorer(
          c.num_edge_labels, c.edge_scorer, hidden_dim=c.d_model
      )

  def encode(
      self,
      src_BxS,
      src_mask_BxS=None,
      src_relations_BxSxS=None,
      deterministic: bool = True,
      src_tree_pos_BxSxP=None,
  ):
    """-> (memory_BxMxD, memory_mask_BxM). src_tree_pos_BxSxP: raw tree
    positions of the source tokens (tree_encoder only)."""
    extras = {}
    if self.config.tree_encoder:
      extras["src_tree_pos_BxSxP"] = src_tree_pos_BxSxP
    elif src_tree_pos_BxSxP is not None:
      raise ValueError("src_tree_pos_BxSxP given but tree_encoder=False.")
    return self.encoder(
        src_BxS,
        greedy.source_mask(src_BxS, src_mask_BxS, self.config.pad_id),
        src_relations_BxSxS,
        deterministic,
        **extras,
    )

  def decode(
      self,
      memory_BxMxD,
      memory_mask_BxM,
      tgt_in_BxT,
      tgt_mask_BxT=None,
      tgt_tree_pos_BxTxP=None,
      deterministic: bool = True,
  ):
    """Teacher-forced decoder logits BxTxV."""
    return self.decoder(
        tgt_in_BxT,
        memory_BxMxD,
        memory_mask_BxM,
        tgt_mask_BxT,
        tgt_tree_pos_BxTxP,
        deterministic,
    )

  def decode_step(
      self,
      memory_BxMxD,
      memory_mask_BxM,
      tokens_BxT,
      cache,
      tree_pos_BxTxP=None,
      deterministic: bool = True,
  ):
    """Incremental decoding: -> (logits_BxTxV, new_cache)."""
    return self.decoder.decode_step(
        tokens_BxT,
        memory_BxMxD,
        memory_mask_BxM,
        cache,
        tree_pos_BxTxP,
        deterministic,
    )

  def edge_logits(
      self,
      src_BxS,
      src_mask_BxS=None,
      src_relations_BxSxS=None,
      deterministic: bool = True,
  ):
    """BxSxSxY output-edge logits from encoder token pairs (Graph2Graph
    sec. 3.3); needs num_edge_labels > 0 and the default encoder."""
    if self.config.num_edge_labels <= 0:
      raise ValueError("edge_logits needs num_edge_labels > 0.")
    memory_BxSxD, _ = self.encode(
        src_BxS, src_mask_BxS, src_relations_BxSxS, deterministic
    )
    return self.edge_scorer(memory_BxSxD)

  def __call__(
      self,
      src_BxS,
      src_mask_BxS,
      tgt_in_BxT,
      tgt_mask_BxT=None,
      *,
      src_relations_BxSxS=None,
      tgt_tree_pos_BxTxP=None,
      src_tree_pos_BxSxP=None,
      deterministic: bool = True,
  ):
    """Teacher forcing: logits BxTxV for the next token after each input.

    Args:
      src_BxS: source token ids.
      src_mask_BxS: True for real source tokens (None: src != pad_id).
      tgt_in_BxT: decoder inputs (BOS, y_0, ..., y_{T-2}).
      tgt_mask_BxT: optional key mask for decoder self-attention.
      src_relations_BxSxS: relation ids (relation_aware only; default 0).
      tgt_tree_pos_BxTxP: raw tree positions (n*k) of the decoder inputs
        (positions='tree' only), from `tree.decoder_positions` with the
        config's tree_alignment.
      src_tree_pos_BxSxP: raw tree positions of the source tokens
        (tree_encoder only), from `tree.node_positions` (DFS).
      deterministic: False enables dropout (needs a 'dropout' rng).
    """
    memory_BxMxD, memory_mask_BxM = self.encode(
        src_BxS,
        src_mask_BxS,
        src_relations_BxSxS,
        deterministic,
        src_tree_pos_BxSxP,
    )
    if self.config.num_edge_labels > 0 and self.is_initializing():
      self.edge_scorer(memory_BxMxD)  # Create the edge head's parameters.
    return self.decode(
        memory_BxMxD,
        memory_mask_BxM,
        tgt_in_BxT,
        tgt_mask_BxT,
        tgt_tree_pos_BxTxP,
        deterministic,
    )

  # -- Plain Python helpers, called on the unbound module. ------------------

  def init_cache(self, batch: int, max_len: int):
    return init_decoder_cache(self.config, batch, max_len)

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
      src_tree_pos_BxSxP=None,
  ):
    """See `greedy_decode`."""
    return greedy_decode(
        self,
        params,
        src_BxS,
        max_len,
        bos,
        eos,
        src_mask_BxS=src_mask_BxS,
        src_relations_BxSxS=src_relations_BxSxS,
        arities=arities,
        pad_id=pad_id,
        src_tree_pos_BxSxP=src_tree_pos_BxSxP,
    )


@functools.partial(jax.jit, static_argnames=("model",))
def _encode_jit(
    model,
    params,
    src_BxS,
    src_mask_BxS,
    src_relations_BxSxS,
    src_tree_pos_BxSxP=None,
):
  return model.apply(
      {"params": params},
      src_BxS,
      src_mask_BxS,
      src_relations_BxSxS,
      True,
      src_tree_pos_BxSxP,
      method=Seq2SeqTransformer.encode,
  )


# -- Greedy decoding: the model's init and step functions for `greedy`. ----


def _greedy_init(model, params, inputs, max_len: int):
  """`greedy.decode`'s init_fn: the empty decoder self-attention cache."""
  del params
  memory_BxMxD, _ = inputs
  return init_decoder_cache(
      model.config, memory_BxMxD.shape[0], max_len, memory_BxMxD.dtype
  )


def _greedy_step(model, params, inputs, cache, last_B, tree_pos_Bx1xP=None):
  """`greedy.decode`'s step_fn: the decoder fed `last_B` at the cache's next
  position, attending to the encoder memory `inputs`; `tree_pos_Bx1xP` is
  the input's tree position (positions='tree')."""
  memory_BxMxD, memory_mask_BxM = inputs
  logits_Bx1xV, cache = model.apply(
      {"params": params},
      memory_BxMxD,
      memory_mask_BxM,
      last_B[:, None],
      cache,
      tree_pos_Bx1xP,
      method=Seq2SeqTransformer.decode_step,
  )
  return logits_Bx1xV[:, 0], cache


# The step of `greedy.host_loop` (positions='tree'), jitted once per model.
_greedy_step_jit = jax.jit(_greedy_step, static_argnames=("model",))


def greedy_decode(
    model: Seq2SeqTransformer,
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
    src_tree_pos_BxSxP=None,
):
  """Greedy decoding with the incremental self-attention cache.

  Returns BxT int32 tokens (T = max_len, BOS not included); each row ends at
  its first EOS (kept) and is padded with pad_id (default config.pad_id)
  after it (`relational_jax.models.greedy`). Sequence positions run the
  whole loop on device (`greedy.decode`); tree positions run it from the host
  (`greedy.host_loop`), one jitted step per token, with one `TreeDecoderState`
  per row that turns the emitted (token, arities[token]) pairs into the next
  input's tree position (Shiv & Quirk 2019 sec. 4) under the config's
  tree_alignment ('output': the start token at zero, each fed-back token at
  its own node's position; 'next': each input at the next node's). With
  tree_end 'complete' a row whose tree is complete emits `eos` (if it is a
  target token id).

  Args:
    model, params: the model and its parameters.
    src_BxS: source token ids.
    max_len: tokens to decode, in [1, max_tgt_len].
    bos, eos: the start and end token ids.
    src_mask_BxS: True at real source tokens (default: all).
    src_relations_BxSxS: relation_aware only: the relation id of each source
      pair (as `Seq2SeqTransformer.__call__`).
    arities: positions='tree' only: number of children of every target
      vocabulary entry (len tgt_vocab_size; 0 for special tokens).
    pad_id: fills each row after its first EOS (default config.pad_id).
    src_tree_pos_BxSxP: tree_encoder only: the source tokens' positions.
  """
  c = model.config
  pad = greedy.pad_token(c, max_len, pad_id)
  src_BxS = jnp.asarray(src_BxS)
  memory_BxMxD, memory_mask_BxM = _encode_jit(
      model,
      params,
      src_BxS,
      src_mask_BxS,
      src_relations_BxSxS,
      None if src_tree_pos_BxSxP is None else jnp.asarray(src_tree_pos_BxSxP),
  )
  inputs = (memory_BxMxD, memory_mask_BxM)
  if c.positions != "tree":
    return greedy.decode(
        _greedy_init,
        _greedy_step,
        model,
        params,
        inputs,
        max_len,
        bos,
        eos,
        pad,
    )

  if arities is None or len(arities) != c.tgt_vocab_size:
    raise ValueError(
        "positions='tree' greedy decoding needs `arities`, the number of "
        f"children of each of the {c.tgt_vocab_size} target tokens; got "
        f"{None if arities is None else len(arities)} entries."
    )
  num_b = src_BxS.shape[0]
  states = [tree_decoder_state(c) for _ in range(num_b)]
  # 'output' alignment: the input's own node position (zero for the start).
  own_BxP = np.zeros((num_b, c.tree_position_dim), np.float32)

  def step(cache, last_B):
    if c.tree_alignment == "output":
      tree_pos_Bx1xP = own_BxP[:, None]
    else:
      tree_pos_Bx1xP = np.stack([s.next_position() for s in states])[:, None]
    logits_BxV, cache = _greedy_step_jit(
        model, params, inputs, cache, last_B, jnp.asarray(tree_pos_Bx1xP)
    )
    if c.tree_end == "complete" and 0 <= eos < c.tgt_vocab_size:
      done_B = np.array([s.done for s in states])
      if done_B.any():  # A complete tree: the end token (icecaps).
        only_eos_V = jnp.where(jnp.arange(c.tgt_vocab_size) == eos, 0.0, -1e9)
        logits_BxV = jnp.where(done_B[:, None], only_eos_V, logits_BxV)
    return logits_BxV, cache

  def emitted(next_B, finished_B):
    nonlocal own_BxP
    own_BxP = np.zeros_like(own_BxP)
    for b in range(num_b):
      if not finished_B[b]:  # A node of the tree (not EOS, nor after it).
        own_BxP[b] = states[b].push(int(next_B[b]), int(arities[next_B[b]]))

  cache = _greedy_init(model, params, inputs, max_len)
  return greedy.host_loop(
      step, cache, num_b, max_len, bos, eos, pad, emitted_fn=emitted
  )
