"""Tests for relational_jax.layers.relation_aware (Graph2Graph eq. 3-4)."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relational_jax.layers import relation_aware

from tests.fast_jit import FAST_COMPILE, jit  # noqa: E402,F401
from tests.jit_check import assert_jit_equals_eager


def random_params(module, *args, seed=0, scale=0.5):
  """N(0, scale^2) parameters; shapes from jax.eval_shape (no compile)."""
  shapes = jax.eval_shape(module.init, jax.random.key(0), *args)["params"]
  rng = np.random.default_rng(seed)
  return jax.tree.map(
      lambda s: jnp.asarray(rng.normal(0.0, scale, s.shape), s.dtype), shapes
  )


def _inputs(num_b=2, num_n=5, d_model=8, num_relations=4, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(num_b, num_n, d_model)).astype(np.float32)
  rel = rng.integers(0, num_relations, (num_b, num_n, num_n)).astype(np.int32)
  mask = np.ones((num_b, num_n), bool)
  mask[-1, 3:] = False  # Padding in the last example.
  return jnp.asarray(x), jnp.asarray(rel), jnp.asarray(mask)


def _naive(params, x, rel, mask, num_heads, scale_relation_keys=True):
  """e_ij = (x_i W^Q)(x_j W^K + p_ij W^L_1)^T / sqrt(d),
  z_i = sum_j alpha_ij (x_j W^V + p_ij W^L_2), with loops over i, j; with
  scale_relation_keys=False the released G2GTr code's
  e_ij = (x_i W^Q)(x_j W^K)^T / sqrt(d) + (x_i W^Q)(p_ij W^L_1)^T. Biases of
  the q / k / v maps and R x K (shared) tables are used where present."""
  p = jax.tree.map(lambda a: np.asarray(a, np.float64), params)
  x, rel, mask = np.asarray(x, np.float64), np.asarray(rel), np.asarray(mask)
  num_b, num_n, d_model = x.shape
  head_dim = d_model // num_heads
  rel_key, rel_value = p["rel_key"], p["rel_value"]
  if rel_key.ndim == 2:  # one R x K table for every head
    rel_key = np.repeat(rel_key[:, None], num_heads, axis=1)
    rel_value = np.repeat(rel_value[:, None], num_heads, axis=1)
  out = np.zeros_like(x)
  for b in range(num_b):
    z = np.zeros((num_n, num_heads, head_dim))
    for h in range(num_heads):
      wq, wk, wv = (p[n]["kernel"][:, h, :] for n in ("query", "key", "value"))
      bq, bk, bv = (
          p[n]["bias"][h] if "bias" in p[n] else 0.0
          for n in ("query", "key", "value")
      )
      for i in range(num_n):
        q_i = x[b, i] @ wq + bq
        e = np.full(num_n, -np.inf)
        for j in range(num_n):
          if mask[b, j]:
            k_j = x[b, j] @ wk + bk
            r_ij = rel_key[rel[b, i, j], h]
            if scale_relation_keys:
              e[j] = q_i @ (k_j + r_ij) / math.sqrt(head_dim)
            else:
              e[j] = q_i @ k_j / math.sqrt(head_dim) + q_i @ r_ij
        alpha = np.exp(e - e.max())
        alpha /= alpha.sum()
        for j in range(num_n):
          value_ij = x[b, j] @ wv + bv + rel_value[rel[b, i, j], h]
          z[i, h] += alpha[j] * value_ij
    out[b] = np.einsum("nhk,hkd->nd", z, p["out"]["kernel"]) + p["out"]["bias"]
  return out


@pytest.mark.parametrize(
    "options",
    [
        {},
        dict(scale_relation_keys=False),
        # The released G2GTr code's function (g2g_torch.ATTENTION_OPTIONS).
        dict(qkv_bias=True, scale_relation_keys=False, shared_relations=True),
    ],
    ids=["paper", "unscaled_relation_keys", "released_code"],
)
def test_relation_aware_attention_matches_naive_loop(options):
  x, rel, mask = _inputs()
  attn = relation_aware.RelationAwareAttention(8, 2, num_relations=4, **options)
  params = random_params(attn, x, rel, mask)
  if options.get("shared_relations"):
    assert params["rel_key"].shape == (4, 4)  # R x K
  if options.get("qkv_bias"):
    assert params["query"]["bias"].shape == (2, 4)
  got = jit(attn.apply)({"params": params}, x, rel, mask)
  want = _naive(
      params, x, rel, mask, 2, options.get("scale_relation_keys", True)
  )
  np.testing.assert_allclose(np.asarray(got), want, atol=1e-4)


def test_shared_relations_equal_per_head_copies():
  """shared_relations=True is the per-head module with every head's table
  the same; the paper's scaling and the released code's differ."""
  x, rel, mask = _inputs(seed=2)
  shared = relation_aware.RelationAwareAttention(
      8, 2, num_relations=4, shared_relations=True
  )
  per_head = relation_aware.RelationAwareAttention(8, 2, num_relations=4)
  params = random_params(shared, x, rel, mask, seed=4)
  tiled = {
      **params,
      "rel_key": jnp.repeat(params["rel_key"][:, None], 2, axis=1),
      "rel_value": jnp.repeat(params["rel_value"][:, None], 2, axis=1),
  }
  got = shared.apply({"params": params}, x, rel, mask)
  np.testing.assert_allclose(
      got, per_head.apply({"params": tiled}, x, rel, mask), atol=1e-6
  )
  unscaled = relation_aware.RelationAwareAttention(
      8, 2, num_relations=4, scale_relation_keys=False
  )
  assert not np.allclose(
      unscaled.apply({"params": tiled}, x, rel, mask),
      per_head.apply({"params": tiled}, x, rel, mask),
      atol=1e-3,
  )


def test_relation_aware_attention_is_permutation_equivariant():
  x, rel, mask = _inputs(num_b=1, num_n=6, seed=3)
  attn = relation_aware.RelationAwareAttention(8, 2, num_relations=4)
  params = random_params(attn, x, rel, mask, seed=1)
  apply = jit(attn.apply)
  out = np.asarray(apply({"params": params}, x, rel, mask))
  perm = np.array([4, 1, 5, 0, 3, 2])
  out_perm = np.asarray(
      apply(
          {"params": params},
          x[:, perm],
          rel[:, perm][:, :, perm],
          mask[:, perm],
      )
  )
  np.testing.assert_allclose(out_perm, out[:, perm], atol=1e-5)
  # Relations matter: changing them changes the output.
  out_other = np.asarray(apply({"params": params}, x, (rel + 1) % 4, mask))
  assert not np.allclose(out_other, out, atol=1e-3)


@pytest.mark.parametrize("released_code", [False, True])
def test_relation_aware_attention_is_padding_invariant(released_code):
  """Real tokens' outputs equal the unpadded sequence's, whatever the padded
  tokens hold and whichever relations point at them."""
  options = (
      dict(qkv_bias=True, scale_relation_keys=False, shared_relations=True)
      if released_code
      else {}
  )
  x, rel, _ = _inputs(num_b=1, num_n=7, seed=5)
  attn = relation_aware.RelationAwareAttention(8, 2, num_relations=4, **options)
  params = {"params": random_params(attn, x, rel, seed=6)}
  num_real = 4
  mask = jnp.arange(7)[None] < num_real
  padded = attn.apply(params, x, rel, mask)
  short = attn.apply(params, x[:, :num_real], rel[:, :num_real, :num_real])
  np.testing.assert_allclose(padded[:, :num_real], short, atol=1e-5)
  x_other = x.at[:, num_real:].set(100.0)
  rel_other = rel.at[:, :, num_real:].set(3).at[:, num_real:].set(1)
  np.testing.assert_allclose(
      attn.apply(params, x_other, rel_other, mask)[:, :num_real],
      short,
      atol=1e-5,
  )


def test_relation_aware_attention_jit_equals_eager():
  """Values and gradients (input and parameters), with a padding mask."""
  x, rel, _ = _inputs(seed=7)
  attn = relation_aware.RelationAwareAttention(8, 2, num_relations=4)
  params = {"params": random_params(attn, x, rel, seed=8)}
  mask = jnp.array([[True] * 5, [True] * 3 + [False] * 2])
  assert_jit_equals_eager(lambda p, x: attn.apply(p, x, rel, mask), params, x)


def test_relations_from_parents():
  parents = jnp.array([[-1, 0, 0, 1]])
  rel = np.asarray(relation_aware.relations_from_parents(parents))
  want = np.array([[0, 2, 2, 0], [1, 0, 0, 2], [1, 0, 0, 0], [0, 1, 0, 0]])
  np.testing.assert_array_equal(rel[0], want)


@pytest.mark.parametrize(
    "kind,activation",
    [("mlp", "relu"), ("mlp", "leaky_relu"), ("biaffine", "relu")],
)
def test_pairwise_edge_scorer_matches_pairwise_formula(kind, activation):
  h = jax.random.normal(jax.random.key(0), (2, 4, 6))
  scorer = relation_aware.PairwiseEdgeScorer(
      num_labels=3, kind=kind, hidden_dim=5, activation=activation
  )
  params = random_params(scorer, h)
  got = np.asarray(jit(scorer.apply)({"params": params}, h))
  assert got.shape == (2, 4, 4, 3)
  p = jax.tree.map(np.asarray, params)
  hn = np.asarray(h)
  for b, i, j in itertools.product(range(2), range(4), range(4)):
    pair = np.concatenate([hn[b, i], hn[b, j]])
    w1 = np.concatenate([p["first"]["kernel"], p["second"]["kernel"]])
    if kind == "mlp":
      pre = pair @ w1 + p["first"]["bias"]
      slope = 0.01 if activation == "leaky_relu" else 0.0  # nn.LeakyReLU()
      hidden = np.where(pre > 0, pre, slope * pre)
      want = hidden @ p["out"]["kernel"] + p["out"]["bias"]
    else:
      bilinear = np.einsum("d,lde,e->l", hn[b, i], p["bilinear"], hn[b, j])
      want = bilinear + pair @ w1 + p["first"]["bias"]
    np.testing.assert_allclose(got[b, i, j], want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["mlp", "biaffine"])
def test_pairwise_edge_scorer_is_permutation_equivariant(kind):
  """Scores of the permuted tokens are the permuted scores: P S P^T."""
  h = jax.random.normal(jax.random.key(1), (2, 5, 6))
  scorer = relation_aware.PairwiseEdgeScorer(3, kind=kind, hidden_dim=5)
  params = {"params": random_params(scorer, h, seed=3)}
  perm = np.random.RandomState(0).permutation(5)
  out = scorer.apply(params, h)
  np.testing.assert_allclose(
      scorer.apply(params, h[:, perm]), out[:, perm][:, :, perm], atol=1e-5
  )


@pytest.mark.parametrize("kind", ["mlp", "biaffine"])
def test_pairwise_edge_scorer_jit_equals_eager(kind):
  """Values and gradients (input and parameters)."""
  h = jax.random.normal(jax.random.key(2), (2, 4, 6))
  scorer = relation_aware.PairwiseEdgeScorer(3, kind=kind, hidden_dim=5)
  params = {"params": random_params(scorer, h, seed=4)}
  assert_jit_equals_eager(scorer.apply, params, h)


def test_bad_scorer_kind_raises():
  scorer = relation_aware.PairwiseEdgeScorer(num_labels=2, kind="dot")
  with pytest.raises(ValueError, match="edge scorer kind 'dot'.*mlp"):
    scorer.init(jax.random.key(0), jnp.zeros((1, 2, 4)))


def test_bad_scorer_activation_raises():
  h = jnp.zeros((1, 2, 4))
  scorer = relation_aware.PairwiseEdgeScorer(num_labels=2, activation="gelu")
  with pytest.raises(ValueError, match="edge scorer activation 'gelu'"):
    scorer.init(jax.random.key(0), h)
  scorer = relation_aware.PairwiseEdgeScorer(
      num_labels=2, kind="biaffine", activation="leaky_relu"
  )
  with pytest.raises(ValueError, match="kind='mlp' only"):
    scorer.init(jax.random.key(0), h)
