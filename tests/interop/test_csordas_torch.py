"""relational_jax.interop.csordas_torch on Csordas et al.'s parameters."""

import dataclasses

import jax
import numpy as np
import pytest

from relational_jax.interop import csordas_torch
from relational_jax.interop import select
from relational_jax.interop import to_authors
from relational_jax.models.seq2seq import Seq2SeqConfig
from relational_jax.models.seq2seq import Seq2SeqTransformer
from tests.interop import goldens

CASES = ("cs_relative", "cs_relative_universal")


def _case(case):
  meta, _, params = goldens.load(case)
  sizes = meta["sizes"]
  config = Seq2SeqConfig(
      src_vocab_size=sizes["src_rows"],
      tgt_vocab_size=sizes["tgt_rows"],
      d_model=sizes["width"],
      num_heads=sizes["heads"],
      ffn_dim=sizes["ffn"],
      num_encoder_layers=sizes["num_layers"],
      num_decoder_layers=sizes["num_layers"],
      positions="relative",
      scaling="none",
      tied=sizes["universal"],
      tie_embeddings=sizes["tied_embedding"],
  )
  return config, params


@pytest.mark.parametrize("case", CASES)
def test_model_matches_our_init_and_inverts(case):
  config, params = _case(case)
  converted = csordas_torch.convert_model(params, config)
  src = jax.ShapeDtypeStruct((2, 5), np.int32)
  mask = jax.ShapeDtypeStruct((2, 5), np.bool_)
  tgt = jax.ShapeDtypeStruct((2, 4), np.int32)
  init = jax.eval_shape(
      Seq2SeqTransformer(config).init, jax.random.PRNGKey(0), src, mask, tgt
  )
  goldens.assert_same_shapes(converted, init["params"])
  convert = lambda p: csordas_torch.convert_model(p, config)
  back = to_authors(convert, params, converted, sep=".")
  assert set(back) == set(params)
  for name, value in params.items():
    np.testing.assert_array_equal(back[name], value, err_msg=name)


def test_buffers_are_dropped():
  config, params = _case("cs_relative")
  buffers = {
      "int_seq": np.arange(5000),
      "trafo.encoder.layers.0.self_attn.pos_encoding": np.zeros((1999, 16)),
      "trafo.decoder.layers.1.self_attn.pos_encoding": np.zeros((1999, 16)),
  }
  with_buffers = csordas_torch.convert_model(dict(params, **buffers), config)
  plain = csordas_torch.convert_model(params, config)
  assert jax.tree_util.tree_all(
      jax.tree_util.tree_map(np.array_equal, with_buffers, plain)
  )


def test_attention_alone_equals_its_part_of_the_model():
  config, params = _case("cs_relative")
  model = csordas_torch.convert_model(params, config)
  for prefix, relative, ours in (
      ("trafo.encoder.layers.1.self_attn.", True, ("encoder", "self_attn")),
      (
          "trafo.decoder.layers.0.multihead_attn.",
          False,
          ("decoder", "cross_attn"),
      ),
  ):
    alone = csordas_torch.convert_attention(
        select(params, prefix, "."), config.num_heads, relative=relative
    )
    layer = "layers_1" if prefix.startswith("trafo.encoder") else "layers_0"
    part = model[ours[0]][layer][ours[1]]
    assert jax.tree_util.tree_all(
        jax.tree_util.tree_map(np.array_equal, alone, part)
    )


def test_missing_and_unexpected_keys_are_named():
  config, params = _case("cs_relative_universal")
  name = "trafo.decoder.layer.norm3.bias"
  with pytest.raises(ValueError, match=r"missing key.*decoder\.layer\.norm3"):
    csordas_torch.convert_model(goldens.without(params, name), config)
  # Tied embedding: their output map has a bias only; a weight is unexpected.
  extra = dict(params, **{"output_map.weight": np.zeros((5, 16), np.float32)})
  with pytest.raises(ValueError, match=r"unexpected.*'output_map\.weight'"):
    csordas_torch.convert_model(extra, config)
  # Untied layers ('layers.{l}.') are unexpected for the Universal config.
  _, untied = _case("cs_relative")
  with pytest.raises(ValueError, match=r"missing key.*trafo\.encoder\.layer\."):
    csordas_torch.convert_model(untied, config)


def test_config_mismatches_raise():
  config, params = _case("cs_relative")
  for field, value in (
      ("positions", "tree"),
      ("attention_out_bias", True),
      ("pre_norm", True),
      ("scaling", "teu"),
  ):
    with pytest.raises(ValueError, match=field):
      csordas_torch.convert_model(
          params, dataclasses.replace(config, **{field: value})
      )
  # A relative model's state dict read as an absolute one: its relative
  # attention parameters are unexpected.
  with pytest.raises(ValueError, match=r"unexpected.*pos_to_pq"):
    csordas_torch.convert_model(
        params, dataclasses.replace(config, positions="absolute")
    )
  with pytest.raises(ValueError, match=r"input_embedding\.weight.*shape"):
    csordas_torch.convert_model(
        params, dataclasses.replace(config, src_vocab_size=9)
    )
