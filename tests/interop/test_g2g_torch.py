"""relational_jax.interop.g2g_torch on the Graph2Graph authors' parameters
(goldens)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relational_jax.interop import g2g_torch
from relational_jax.interop import to_authors
from relational_jax.layers import relation_aware
from tests.interop import goldens

KEY = jax.random.PRNGKey(0)


def _attention(meta, **overrides):
  sizes = meta["sizes"]
  options = {**g2g_torch.ATTENTION_OPTIONS, **overrides}
  return relation_aware.RelationAwareAttention(
      sizes["width"], sizes["heads"], sizes["relations"], **options
  )


def _init(module, inputs):
  args = (inputs["x"], inputs["relations"], inputs["mask"])
  return jax.eval_shape(module.init, KEY, *args)["params"]


@pytest.mark.parametrize("case", ["g2g_attention", "g2g_statetr_attention"])
def test_attention_matches_our_init_and_inverts(case):
  meta, inputs, params = goldens.load(case)
  convert = lambda p: g2g_torch.convert_attention(p, meta["sizes"]["heads"])
  converted = convert(params)
  goldens.assert_same_shapes(converted, _init(_attention(meta), inputs))
  back = to_authors(convert, params, converted, ".")
  assert set(back) == set(params)  # nothing dropped
  for name, value in back.items():
    np.testing.assert_array_equal(value, params[name], err_msg=name)


def test_attention_per_head_tables_and_our_relation_ids():
  """Tiled per-head tables compute the same; with relation_ids=
  'relations_from_parents' ours reads relations_from_parents' ids (their 1
  and 2 swapped)."""
  meta, inputs, params = goldens.load("g2g_attention")
  heads = meta["sizes"]["heads"]
  args = (inputs["x"], inputs["relations"], inputs["mask"])
  want = _attention(meta).apply(
      {"params": g2g_torch.convert_attention(params, heads)}, *args
  )
  per_head = _attention(meta, shared_relations=False)
  tiled = g2g_torch.convert_attention(params, heads, shared_relations=False)
  goldens.assert_same_shapes(tiled, _init(per_head, inputs))
  np.testing.assert_allclose(
      per_head.apply({"params": tiled}, *args), want, atol=1e-6
  )
  ours_ids = g2g_torch.convert_attention(
      params, heads, relation_ids="relations_from_parents"
  )
  swapped = np.array([0, 2, 1])[inputs["relations"]]
  got = _attention(meta).apply(
      {"params": ours_ids}, inputs["x"], jnp.asarray(swapped), inputs["mask"]
  )
  np.testing.assert_allclose(got, want, atol=1e-6)
  # Their ids: 1 = i is the head of j; ours: 2 = i is the parent of j.
  ours = np.asarray(relation_aware.relations_from_parents(jnp.array([[-1, 0]])))
  np.testing.assert_array_equal(ours[0], [[0, 2], [1, 0]])


def test_relation_classifier_matches_our_init_and_inverts():
  meta, inputs, params = goldens.load("g2g_relation_classifier")
  sizes = meta["sizes"]
  scorer = relation_aware.PairwiseEdgeScorer(
      sizes["labels"], hidden_dim=sizes["width"], **g2g_torch.SCORER_OPTIONS
  )
  convert = g2g_torch.convert_relation_classifier
  converted = convert(params)
  init = jax.eval_shape(scorer.init, KEY, inputs["h"])["params"]
  goldens.assert_same_shapes(converted, init)
  back = to_authors(convert, params, converted, ".")
  assert set(back) == set(params)
  for name, value in back.items():
    np.testing.assert_array_equal(value, params[name], err_msg=name)


def test_missing_unexpected_and_unsupported_keys_raise():
  meta, _, params = goldens.load("g2g_attention")
  heads = meta["sizes"]["heads"]
  with pytest.raises(ValueError, match="missing key 'self.query.bias'"):
    g2g_torch.convert_attention(
        goldens.without(params, "self.query.bias"), heads
    )
  with pytest.raises(ValueError, match="unexpected key.*output.LayerNorm"):
    g2g_torch.convert_attention(
        {**params, "output.LayerNorm.weight": np.ones(8, np.float32)}, heads
    )
  with pytest.raises(ValueError, match="LayerNorm of the relation keys"):
    g2g_torch.convert_attention(
        {**params, "self.layernorm_key_layer.weight": np.ones(4)}, heads
    )
  with pytest.raises(ValueError, match="self.dp_relation_k.weight"):
    g2g_torch.convert_attention(params, 4)  # K = 2 does not fit their 4
  with pytest.raises(ValueError, match="relation_ids"):
    g2g_torch.convert_attention(params, heads, relation_ids="ours")
  _, _, classifier = goldens.load("g2g_relation_classifier")
  with pytest.raises(ValueError, match="missing key 'layer2.bias'"):
    g2g_torch.convert_relation_classifier(
        goldens.without(classifier, "layer2.bias")
    )
  with pytest.raises(ValueError, match="unexpected key"):
    g2g_torch.convert_relation_classifier(
        {**classifier, "layer3.weight": np.zeros((2, 2))}
    )
