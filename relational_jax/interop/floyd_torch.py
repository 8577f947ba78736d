"""The FloydNet authors' PyTorch state dicts -> our FloydNet trees.

Their code: github.com/ocx-lab/FloydNet, src/floydnet/transformer.py
(`PivotalAttentionBlock`); their example model (example/common/model.py
`FloydNet`) holds the blocks as `blocks.{l}`. Inputs are state dicts as
numpy arrays, `{k: v.numpy() for k, v in module.state_dict().items()}`.
Our modules: `relational_jax.models.floyd.PivotalAttentionBlock` and
`FloydTransformer`, configured by a `FloydConfig` matching their block's
arguments (norm, bias, symmetric mix, FFN and its expansion ratio; the
width D = num_heads * head_dim). tests/fidelity checks that the converted
parameters compute their outputs and gradients: a block's to 1e-5, the
stack's inside their example model (padded, our node mask) to 1e-4 of each
output's scale (golden floyd_model_padded).

torch.nn.Linear stores weight as (out, in): our kernel is weight.T.
  c_mix            -> mix                 (D x D)
  c_qkv            -> attention/qkv       (kernel D x 5 x H x K: their five
                                           D-wide chunks q_ik, k_ij, k_jk,
                                           v_ij, v_jk, each head-major)
  c_proj           -> attention/out       (kernel H x K x D)
  norm1, norm2     -> norm_attention, norm_ffn (weight -> scale, bias ->
                                           bias; rmsnorm has no bias;
                                           'none' has no parameters)
  ffn.0, ffn.2     -> ffn_hidden, ffn_out
  ffn_scale        -> ffn_scale           (a scalar)
Stacks: blocks.{l}. -> block_{l}. Nothing is dropped.
"""

from typing import Any, Mapping

import numpy as np

from relational_jax.interop.common import Reader
from relational_jax.interop.common import torch_linear
from relational_jax.models.floyd import FloydConfig
from relational_jax.models.floyd import canonical_norm

__all__ = ["convert_block", "convert_stack"]

Params = Mapping[str, Any]


def _norm(reader, name, kind, width):
  if kind == "none":
    return None
  tree = {"scale": reader.take(f"{name}.weight", (width,))}
  if kind in ("layernorm", "affine"):
    tree["bias"] = reader.take(f"{name}.bias", (width,))
  return tree


def _block(reader, prefix, config):
  d, h, k = config.edge_width, config.num_heads, config.head_dim
  kind = canonical_norm(config.norm)
  bias = "required" if config.use_bias else "none"
  linear = lambda name, rows, cols, **shapes: torch_linear(
      reader, f"{prefix}{name}", rows, cols, bias=bias, **shapes
  )
  tree = {
      "attention": {
          "qkv": linear("c_qkv", 5 * d, d, out_shape=(5, h, k)),
          "out": linear("c_proj", d, d, in_shape=(h, k)),
      }
  }
  if config.symmetric_mix:
    tree["mix"] = linear("c_mix", d, d)
  norms = {"norm_attention": _norm(reader, f"{prefix}norm1", kind, d)}
  if config.use_ffn:
    f = config.ffn_expansion_ratio * d
    norms["norm_ffn"] = _norm(reader, f"{prefix}norm2", kind, d)
    tree["ffn_hidden"] = linear("ffn.0", f, d)
    tree["ffn_out"] = linear("ffn.2", d, f)
    tree["ffn_scale"] = np.asarray(reader.take(f"{prefix}ffn_scale", ()))
  tree.update({name: t for name, t in norms.items() if t is not None})
  return tree


def convert_block(state_dict: Params, config: FloydConfig) -> dict:
  """Their `PivotalAttentionBlock` -> our `PivotalAttentionBlock`'s params.

  Args:
    state_dict: one block's state dict ('c_qkv.weight', 'norm1.weight', ...).
    config: our FloydConfig with their block's arguments: num_heads,
      head_dim = embed_dim / num_heads, use_bias (their bias),
      ffn_expansion_ratio, norm (their norm_fn), symmetric_mix (their
      enable_symmetric_mix), use_ffn (their enable_ffn).

  Returns:
    The 'params' collection of `PivotalAttentionBlock.from_config(config)`.

  Raises:
    ValueError: a missing or unexpected key, or a shape that does not fit
      the config.
  """
  reader = Reader(state_dict, "FloydNet block", ".")
  tree = _block(reader, "", config)
  reader.finish()
  return tree


def convert_stack(state_dict: Params, config: FloydConfig) -> dict:
  """Their model's blocks ('blocks.{l}. ...') -> our `FloydTransformer`'s.

  Args:
    state_dict: the 'blocks.*' entries of their FloydNet model's state dict,
      and nothing else (their embeddings and heads are not ours).
    config: as `convert_block`; num_layers their depth.

  Returns:
    The 'params' collection of `FloydTransformer(config)`.

  Raises:
    ValueError: a missing or unexpected key, or a shape that does not fit.
  """
  reader = Reader(state_dict, "FloydNet stack", ".")
  tree = {
      f"block_{i}": _block(reader, f"blocks.{i}.", config)
      for i in range(config.num_layers)
  }
  reader.finish()
  return tree
