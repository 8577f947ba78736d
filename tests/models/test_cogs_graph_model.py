"""CogsGraphEdgeTransformer: shapes, heads, masking, bad inputs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relational_jax.data.cogs_graph import LABEL_FIELDS
from relational_jax.models.cogs_graph import CogsGraphEdgeTransformer
from relational_jax.models.cogs_graph import HEADS
from relational_jax.models.edge_transformer import ETConfig

CFG = ETConfig(
    num_layers=2, num_heads=2, head_dim=4, chunk_size=None, ffn_chunk_size=None
)
SIZES = (5, 6, 4, 7)


def _model(**kw):
  return CogsGraphEdgeTransformer(CFG, vocab_size=11, label_sizes=SIZES, **kw)


def _inputs():
  tokens = jnp.array([[3, 4, 5, 6, 0], [2, 9, 0, 0, 0]], jnp.int32)
  return tokens, tokens > 0


def test_heads_and_shapes():
  model = _model()
  tokens, mask = _inputs()
  params = model.init(jax.random.PRNGKey(0), tokens, mask)["params"]
  out = model.apply({"params": params}, tokens, mask)
  assert tuple(out) == HEADS
  assert out["parent"].shape == (2, 5, 5)
  for field, size in zip(LABEL_FIELDS, SIZES):
    assert out[field].shape == (2, 5, size)
    assert out[field].dtype == jnp.float32
  # Padded candidates can never be chosen as parents.
  assert np.all(np.asarray(out["parent"])[1, :, 2:] < -1e8)
  assert set(params) == {"embed", "et", "parent"} | set(LABEL_FIELDS)


def test_parent_reads_column_or_row():
  tokens, mask = _inputs()
  col, row = _model(), _model(parent_from_column=False)
  params = col.init(jax.random.PRNGKey(1), tokens)["params"]
  a = np.asarray(col.apply({"params": params}, tokens)["parent"])
  b = np.asarray(row.apply({"params": params}, tokens)["parent"])
  np.testing.assert_allclose(a, np.swapaxes(b, 1, 2), rtol=1e-6, atol=1e-6)


def test_padding_changes_no_real_output_and_jit_equals_eager():
  """Row 1 (2 real tokens of 5) against the same 2 tokens alone: every head
  equal on the real tokens (parent scores over real candidates), whatever
  the padded tokens hold; jit == eager."""
  model = _model()
  tokens, mask = _inputs()
  params = {"params": model.init(jax.random.PRNGKey(2), tokens, mask)["params"]}
  apply = jax.jit(model.apply)
  padded = apply(params, tokens, mask)
  other = apply(params, tokens.at[1, 2:].set(7), mask)
  alone = apply(params, tokens[1:, :2], mask[1:, :2])
  for head in HEADS:
    for out in (padded, other):
      real = out[head][1:, :2, :2] if head == "parent" else out[head][1:, :2]
      np.testing.assert_allclose(real, alone[head], rtol=1e-5, atol=1e-5)
  eager = model.apply(params, tokens, mask)
  for head in HEADS:
    np.testing.assert_allclose(eager[head], padded[head], rtol=1e-5, atol=1e-5)


def test_bad_inputs():
  tokens, mask = _inputs()
  with pytest.raises(ValueError, match="label_sizes"):
    CogsGraphEdgeTransformer(CFG, vocab_size=11, label_sizes=(3,)).init(
        jax.random.PRNGKey(0), tokens
    )
  with pytest.raises(ValueError, match=r"tokens_BxN must have rank 2"):
    _model().init(jax.random.PRNGKey(0), tokens[0])
  with pytest.raises(
      ValueError, match=r"node_mask_BxN axis 1 must have size 5 \(axes 2x5\)"
  ):
    _model().init(jax.random.PRNGKey(0), tokens, mask[:, :3])
