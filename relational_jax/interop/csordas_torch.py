"""Csordas et al.'s PyTorch state dicts -> our seq2seq Transformer trees.

Their code: github.com/RobertCsordas/transformer_generalization,
`TransformerEncDecModel` (models/transformer_enc_dec.py) with the relative
Transformer and relative Universal Transformer (layers/transformer/), or
their absolute Transformer (sinusoidal positions; scale_mode 'none', 'down'
= our PED, 'opennmt' = our TEU).
Inputs are state dicts as numpy arrays,
`{k: v.numpy() for k, v in model.state_dict().items()}`. Ours is
`Seq2SeqTransformer` with their positions and the defaults that follow
their code (attention_out_bias=False, output_bias=True, post-norm);
tests/fidelity checks that the converted parameters compute their teacher-
forced logits and greedy decoding (to 1e-5).

Names (torch.nn.Linear weight is (out, in): our kernel is weight.T):
  input_embedding / output_embedding -> encoder / decoder embed table (same
    ids: our vocabulary sizes are their row counts, SOS / EOS included);
  output_map.bias -> decoder out_bias (tie_embeddings=True, their
    tied_embedding), or output_map -> decoder out (untied);
  trafo.{encoder,decoder}.layer. (Universal; our tied=True) or
    .layers.{l}. -> layers_0 or layers_{l};
  attention: data_to_q -> query; data_to_kv -> key and value (rows of head h:
    [2hK, 2hK + K) keys, [2hK + K, 2(h + 1)K) values); pos_to_pq -> pos_proj;
    global_content_bias / global_pos_bias -> u_bias / v_bias;
    multi_head_merge -> out (no bias);
  encoder norm1 / norm2 -> attn_norm / ff_norm; decoder norm1 / norm2 /
    norm3 -> self_norm / cross_norm / ff_norm; multihead_attn -> cross_attn;
    linear1 / linear2 -> ff hidden / out.
Buffers that ours recomputes are dropped: 'int_seq' (their length-mask
helper) and each relative attention's sinusoid table '*.pos_encoding'.
"""

from typing import Any, Mapping

from relational_jax.interop.common import Reader
from relational_jax.interop.common import torch_linear
from relational_jax.models.seq2seq import Seq2SeqConfig

__all__ = ["convert_attention", "convert_model"]

Params = Mapping[str, Any]


def _linear_kernel(reader, name, rows=None, cols=None):
  return reader.take(f"{name}.weight", (rows, cols)).T


def _attention(reader, prefix, num_heads, relative, width=None):
  q = _linear_kernel(reader, f"{prefix}data_to_q", width, width)
  d = q.shape[0]
  if q.shape[1] % num_heads:
    raise ValueError(
        f"{reader.what}: {prefix + 'data_to_q.weight'!r} has {q.shape[1]} "
        f"outputs, not divisible by num_heads={num_heads}"
    )
  k = q.shape[1] // num_heads
  kv_DxHx2xK = _linear_kernel(
      reader, f"{prefix}data_to_kv", 2 * num_heads * k, d
  ).reshape(d, num_heads, 2, k)
  tree = {
      "query": {"kernel": q.reshape(d, num_heads, k)},
      "key": {"kernel": kv_DxHx2xK[:, :, 0]},
      "value": {"kernel": kv_DxHx2xK[:, :, 1]},
      "out": {
          "kernel": (
              _linear_kernel(
                  reader, f"{prefix}multi_head_merge", d, num_heads * k
              ).reshape(num_heads, k, d)
          )
      },
  }
  if relative:
    tree["pos_proj"] = {
        "kernel": (
            _linear_kernel(
                reader, f"{prefix}pos_to_pq", num_heads * k, d
            ).reshape(d, num_heads, k)
        )
    }
    tree["u_bias"] = reader.take(f"{prefix}global_content_bias", (num_heads, k))
    tree["v_bias"] = reader.take(f"{prefix}global_pos_bias", (num_heads, k))
    reader.drop([f"{prefix}pos_encoding"])
  return tree


def _layer_norm(reader, name, width):
  return {
      "scale": reader.take(f"{name}.weight", (width,)),
      "bias": reader.take(f"{name}.bias", (width,)),
  }


def _feed_forward(reader, prefix, d, ffn):
  return {
      "hidden": torch_linear(reader, f"{prefix}linear1", ffn, d),
      "out": torch_linear(reader, f"{prefix}linear2", d, ffn),
  }


def _check_config(config: Seq2SeqConfig) -> None:
  wanted = {
      "attention_out_bias": False,
      "output_bias": True,
      "pre_norm": False,
      "relation_aware": False,
      "num_edge_labels": 0,
      "encoder": "transformer",
  }
  wrong = {
      name: getattr(config, name)
      for name, value in wanted.items()
      if getattr(config, name) != value
  }
  if config.positions not in ("relative", "absolute"):
    wrong["positions"] = config.positions
  # Their relative variants do not scale tokens.
  if config.positions == "relative" and config.scaling == "teu":
    wrong["scaling"] = config.scaling
  if wrong:
    raise ValueError(
        "Csordas et al.'s TransformerEncDecModel has no counterpart for "
        f"Seq2SeqConfig {wrong}; it needs {wanted}, positions 'relative' "
        "(scaling 'none' or 'ped') or 'absolute' (scaling 'none', 'ped' or "
        "'teu')"
    )


def convert_attention(
    state_dict: Params, num_heads: int, *, relative: bool = True
) -> dict:
  """Their attention module -> ours.

  Args:
    state_dict: one attention module's state dict: their
      `FixedRelativeMultiheadAttention` (relative=True: 'data_to_q.weight',
      'data_to_kv.weight', 'pos_to_pq.weight', 'global_content_bias',
      'global_pos_bias', 'multi_head_merge.weight'; the 'pos_encoding'
      buffer is dropped) or their plain `MultiHeadAttention` (relative=False,
      the decoder's cross attention).
    num_heads: H.
    relative: which of the two.

  Returns:
    The 'params' collection of `layers.attention.RelativeMultiHeadAttention`
    (relative=True) or `MultiHeadAttention` (False), with out_bias=False.

  Raises:
    ValueError: a missing or unexpected key, or a shape that does not fit.
  """
  reader = Reader(state_dict, "Csordas et al. attention", ".")
  tree = _attention(reader, "", num_heads, relative)
  reader.finish()
  return tree


def convert_model(state_dict: Params, config: Seq2SeqConfig) -> dict:
  """Their `TransformerEncDecModel` -> our `Seq2SeqTransformer`'s.

  Args:
    state_dict: the whole model's state dict.
    config: our Seq2SeqConfig: positions 'relative' (their relative
      variants) or 'absolute' with their scaling ('none', 'ped' for their
      scale_mode 'down', 'teu' for 'opennmt'; their 'pos.pe' buffer is
      dropped), their sizes
      (src_vocab_size and tgt_vocab_size their embedding row counts,
      d_model, num_heads, ffn_dim, num_encoder_layers, num_decoder_layers),
      tied=True for their Universal variant, tie_embeddings=True for their
      tied_embedding; the Csordas defaults (attention_out_bias=False,
      output_bias=True, pre_norm=False) kept.

  Returns:
    The 'params' collection of `Seq2SeqTransformer(config)`.

  Raises:
    ValueError: a missing or unexpected key, a shape that does not fit the
      config, or a config option their model does not have.
  """
  _check_config(config)
  reader = Reader(state_dict, "Csordas et al. model", ".")
  d, heads, ffn = config.d_model, config.num_heads, config.ffn_dim
  relative = config.positions == "relative"
  reader.drop(["int_seq"] + ([] if relative else ["pos.pe"]))

  def prefix(side, i):
    if config.tied:
      return f"trafo.{side}.layer."
    return f"trafo.{side}.layers.{i}."

  encoder = {
      "embed": {
          "embedding": reader.take(
              "input_embedding.weight", (config.src_vocab_size, d)
          )
      }
  }
  decoder = {
      "embed": {
          "embedding": reader.take(
              "output_embedding.weight", (config.tgt_vocab_size, d)
          )
      }
  }
  for i in range(1 if config.tied else config.num_encoder_layers):
    e = prefix("encoder", i)
    encoder[f"layers_{i}"] = {
        "self_attn": _attention(reader, f"{e}self_attn.", heads, relative, d),
        "attn_norm": _layer_norm(reader, f"{e}norm1", d),
        "ff": _feed_forward(reader, e, d, ffn),
        "ff_norm": _layer_norm(reader, f"{e}norm2", d),
    }
  for i in range(1 if config.tied else config.num_decoder_layers):
    p = prefix("decoder", i)
    decoder[f"layers_{i}"] = {
        "self_attn": _attention(reader, f"{p}self_attn.", heads, relative, d),
        "self_norm": _layer_norm(reader, f"{p}norm1", d),
        "cross_attn": _attention(
            reader, f"{p}multihead_attn.", heads, False, d
        ),
        "cross_norm": _layer_norm(reader, f"{p}norm2", d),
        "ff": _feed_forward(reader, p, d, ffn),
        "ff_norm": _layer_norm(reader, f"{p}norm3", d),
    }
  if config.tie_embeddings:
    decoder["out_bias"] = reader.take(
        "output_map.bias", (config.tgt_vocab_size,)
    )
  else:
    decoder["out"] = torch_linear(
        reader, "output_map", config.tgt_vocab_size, d
    )
  reader.finish()
  return {"encoder": encoder, "decoder": decoder}
