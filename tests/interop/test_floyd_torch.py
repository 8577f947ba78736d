"""relational_jax.interop.floyd_torch on the FloydNet authors' parameters
(goldens)."""

import dataclasses

import jax
import numpy as np
import pytest

from relational_jax.interop import floyd_torch
from relational_jax.interop import to_authors
from relational_jax.models.floyd import FloydConfig
from relational_jax.models.floyd import FloydTransformer
from relational_jax.models.floyd import PivotalAttentionBlock
from tests.interop import goldens

KEY = jax.random.PRNGKey(0)
CASES = (
    "pivotal_block_pre",
    "pivotal_block_post_rmsnorm_bias_gelu",
    "pivotal_block_pre_affine_silu_no_mix",
    "pivotal_block_post_none_no_ffn",
)


def _config(meta, num_layers=1):
  sizes, options = meta["sizes"], meta["options"]
  return FloydConfig(
      num_layers=num_layers,
      num_heads=sizes["heads"],
      head_dim=sizes["width"] // sizes["heads"],
      ffn_expansion_ratio=options.get("ffn_expansion_ratio", 4),
      use_bias=options.get("bias", False),
      norm_position=options.get("norm_position", "pre"),
      norm=options.get("norm_fn", "layernorm"),
      symmetric_mix=options.get("enable_symmetric_mix", True),
      use_ffn=options.get("enable_ffn", True),
  )


def _pairs(meta):
  s = meta["sizes"]
  return jax.ShapeDtypeStruct(
      (s["batch"], s["nodes"], s["nodes"], s["width"]), np.float32
  )


@pytest.mark.parametrize("case", CASES)
def test_block_matches_our_init_and_inverts(case):
  meta, _, params = goldens.load(case)
  config = _config(meta)
  convert = lambda p: floyd_torch.convert_block(p, config)
  converted = convert(params)
  init = jax.eval_shape(
      PivotalAttentionBlock.from_config(config).init, KEY, _pairs(meta)
  )
  goldens.assert_same_shapes(converted, init["params"])
  back = to_authors(convert, params, converted, ".")
  assert set(back) == set(params)  # nothing dropped
  for name, value in back.items():
    np.testing.assert_array_equal(value, params[name], err_msg=name)


def test_stack_reads_their_blocks():
  meta, _, params = goldens.load("pivotal_block_pre")
  config = _config(meta, num_layers=2)
  # Block l's parameters are (l + 1) x the golden's: a swap would show.
  per_block = [{k: (l + 1) * v for k, v in params.items()} for l in (0, 1)]
  state = {
      f"blocks.{l}.{k}": v for l in (0, 1) for k, v in per_block[l].items()
  }
  converted = floyd_torch.convert_stack(state, config)
  init = jax.eval_shape(FloydTransformer(config).init, KEY, _pairs(meta))
  goldens.assert_same_shapes(converted, init["params"])
  for l in (0, 1):
    block = floyd_torch.convert_block(per_block[l], config)
    for leaf, want in zip(
        jax.tree_util.tree_leaves(converted[f"block_{l}"]),
        jax.tree_util.tree_leaves(block),
    ):
      np.testing.assert_array_equal(leaf, want)


def test_missing_unexpected_and_misshapen_keys_raise():
  meta, _, params = goldens.load("pivotal_block_pre")
  config = _config(meta)
  with pytest.raises(ValueError, match="missing key 'c_mix.weight'"):
    floyd_torch.convert_block(goldens.without(params, "c_mix.weight"), config)
  with pytest.raises(ValueError, match="unexpected key"):
    floyd_torch.convert_block({**params, "extra.weight": np.zeros(3)}, config)
  with pytest.raises(ValueError, match="missing key 'c_qkv.bias'"):
    floyd_torch.convert_block(
        params, dataclasses.replace(config, use_bias=True)
    )
  with pytest.raises(ValueError, match="c_qkv.weight"):
    floyd_torch.convert_block(
        params, dataclasses.replace(config, num_heads=1, head_dim=4)
    )
