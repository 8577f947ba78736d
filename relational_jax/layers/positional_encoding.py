"""Sequence positional encodings: sinusoids and token-embedding scaling.

References
  [V17] Vaswani et al. 2017, "Attention is all you need", sec. 3.5 (sinusoids).
  [C21] Csordas, Irie & Schmidhuber 2021, "The devil is in the detail: simple
        tricks improve systematic generalization of Transformers":
        sec. 3.3 and appendix D (embedding scaling TEU / no scaling / PED).

Axis letters: see `relational_jax.layers.shapes`.
"""

import math
from typing import Callable, Optional

import flax.linen as nn
import jax.numpy as jnp

from relational_jax.layers import shapes

SCALINGS = ("teu", "ped", "none")


# ---------------------------------------------------------------------------
# Sinusoids.


def sinusoidal_at(positions, dim: int, max_timescale: float = 1e4):
  """Sinusoidal encoding of (possibly negative, possibly traced) positions.

  [V17] sec. 3.5 / [C21] appendix C eq. 1, interleaved:
    P[pos, 2i] = sin(pos / 10000^(2i/dim)),  P[pos, 2i+1] = cos(same).
  (C21's eq. 1 prints the exponent with the feature index j instead of the
  pair index; we follow V17, where both features of a pair share a
  frequency.) Odd `dim` drops the last cosine.

  Args:
    positions: array of any shape `...`, ints or floats.
    dim: encoding width.
  Returns:
    `... x dim` float32.
  """
  if dim <= 0:
    raise ValueError(f"sinusoidal dim must be positive, got {dim}.")
  half = (dim + 1) // 2
  inv_freq = max_timescale ** (
      -2.0 * jnp.arange(half, dtype=jnp.float32) / dim
  )  # One per sin / cos pair.
  angles = jnp.asarray(positions, jnp.float32)[..., None] * inv_freq
  pe_pairs = jnp.stack([jnp.sin(angles), jnp.cos(angles)], axis=-1)
  return pe_pairs.reshape(pe_pairs.shape[:-2] + (2 * half,))[..., :dim]


def sinusoidal(length: int, dim: int, offset=0):
  """`length x dim` encodings of positions offset, ..., offset + length - 1."""
  return sinusoidal_at(offset + jnp.arange(length), dim)


# ---------------------------------------------------------------------------
# Token embedding with the scaling schemes of [C21] sec. 3.3 / appendix D.


def embedding_init(scaling: str, d_model: int):
  """Initialiser of the `VxD` word-embedding table E for a scaling scheme.

  [C21] appendix D:
    'teu'  Glorot uniform, U(-sqrt(6/(D+V)), +sqrt(6/(D+V))).
    'none' N(0, 1) (PyTorch's default for embeddings).
    'ped'  Kaiming, N(0, 1/sqrt(D)) (standard deviation 1/sqrt(D)).
  """
  shapes.check_choice(scaling, SCALINGS, "scaling")
  if scaling == "teu":
    return nn.initializers.xavier_uniform()
  if scaling == "none":
    return nn.initializers.normal(stddev=1.0)
  return nn.initializers.normal(stddev=1.0 / math.sqrt(d_model))


def embedding_scales(scaling: str, d_model: int):
  """(token_scale, pe_scale) with H_i = token_scale E_{w_i} + pe_scale P_i.

  [C21] appendix D: TEU H_i = sqrt(D) E_{w_i} + P_i;  no scaling
  H_i = E_{w_i} + P_i;  PED H_i = E_{w_i} + P_i / sqrt(D).
  """
  shapes.check_choice(scaling, SCALINGS, "scaling")
  if scaling == "teu":
    return math.sqrt(d_model), 1.0
  if scaling == "ped":
    return 1.0, 1.0 / math.sqrt(d_model)
  return 1.0, 1.0


class TokenEmbedding(nn.Module):
  """Word embedding plus an (optional) absolute positional encoding.

  The positional encoding is passed in (sinusoidal, tree, ...), so every
  absolute scheme combines with the word embedding in the same scaled way,
  [C21] appendix D. Relative models pass no encoding; the token scale still
  applies (TEU multiplies by sqrt(D)).
  """

  vocab_size: int
  d_model: int
  scaling: str = "ped"
  # None: embedding_init(scaling, d_model). (Not `init`: Module.init.)
  table_init: Optional[Callable] = None

  def setup(self):
    shapes.check_choice(self.scaling, SCALINGS, "scaling")
    init = self.table_init or embedding_init(self.scaling, self.d_model)
    self.embedding_VxD = self.param(
        "embedding", init, (self.vocab_size, self.d_model)
    )

  def __call__(self, tokens_BxN, pe_BxNxD=None):
    shapes.check_shape(tokens_BxN, ("B", "N"), "tokens")
    token_scale, pe_scale = embedding_scales(self.scaling, self.d_model)
    h_BxNxD = token_scale * jnp.take(self.embedding_VxD, tokens_BxN, axis=0)
    if pe_BxNxD is not None:
      pe_BxNxD = jnp.asarray(pe_BxNxD)
      if pe_BxNxD.ndim == 2:  # NxD, shared over the batch.
        pe_BxNxD = pe_BxNxD[None]
      shapes.check_shape(
          pe_BxNxD,
          (None, tokens_BxN.shape[1], self.d_model),
          "positional encoding",
      )
      h_BxNxD = h_BxNxD + pe_scale * pe_BxNxD
    return h_BxNxD

  def attend(self, h_BxNxD):
    """Logits against the tied embedding table: h E^T."""
    shapes.check_shape(h_BxNxD, ("B", "N", self.d_model), "hiddens")
    return jnp.einsum("bnd,vd->bnv", h_BxNxD, self.embedding_VxD)
