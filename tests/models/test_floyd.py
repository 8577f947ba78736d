"""Tests for the FloydNet block and stack (relational_jax.models.floyd).

Their outputs and gradients against the authors' own block:
tests/fidelity (pivotal_block_*).
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relational_jax.models.floyd import FloydConfig
from relational_jax.models.floyd import FloydTransformer
from relational_jax.models.floyd import PivotalAttentionBlock

B, N, D, H = 2, 5, 8, 2
NODE_MASK = jnp.array([[True] * N, [True] * 3 + [False] * 2])

OPTIONS = {
    "pre_layernorm": dict(),
    "post_rmsnorm_bias_gelu": dict(
        norm_position="post", norm="rmsnorm", use_bias=True, activation="gelu"
    ),
    "pre_affine_silu_no_mix": dict(
        norm="affine", activation="silu", symmetric_mix=False
    ),
    "post_none_no_ffn": dict(norm_position="post", norm="none", use_ffn=False),
}


def _x(seed=0, b=B, n=N, d=D):
  return jax.random.normal(jax.random.PRNGKey(seed), (b, n, n, d))


def _random_params(module, *args, seed=3):
  """Non-trivial parameters (their init zeroes the mix and output maps)."""
  shapes = jax.eval_shape(module.init, jax.random.PRNGKey(0), *args)
  leaves, tree = jax.tree_util.tree_flatten(shapes)
  keys = jax.random.split(jax.random.PRNGKey(seed), len(leaves))
  return jax.tree_util.tree_unflatten(
      tree,
      [
          1.0 + 0.3 * jax.random.normal(k, l.shape)
          if l.ndim <= 1  # norms, biases, ffn_scale
          else jax.random.normal(k, l.shape) / np.sqrt(l.shape[0])
          for k, l in zip(keys, leaves)
      ],
  )


def _block(name, **kwargs):
  return PivotalAttentionBlock(
      num_heads=H, chunk_size=2, **OPTIONS[name], **kwargs
  )


def test_init_as_the_authors():
  """Xavier-uniform q/k/v map and FFN input, zeros for the mix, the output
  maps and every bias, ffn_scale 1: the pre-norm block starts as the
  identity."""
  d = 32
  block = PivotalAttentionBlock(num_heads=4, use_bias=True)
  x = _x(d=d, n=3)
  params = jax.jit(block.init)(jax.random.PRNGKey(0), x)["params"]
  for kernel, fan_in, fan_out in (
      (params["attention"]["qkv"]["kernel"], d, 5 * d),
      (params["ffn_hidden"]["kernel"], d, 4 * d),
  ):
    bound = np.sqrt(6.0 / (fan_in + fan_out))
    kernel = np.asarray(kernel)
    assert np.abs(kernel).max() <= bound
    np.testing.assert_allclose(kernel.std(), bound / np.sqrt(3), rtol=0.1)
  zero = [
      params["mix"],
      params["attention"]["out"],
      params["ffn_out"],
      params["attention"]["qkv"]["bias"],
      params["ffn_hidden"]["bias"],
  ]
  for leaf in jax.tree_util.tree_leaves(zero):
    assert not np.asarray(leaf).any()
  assert float(params["ffn_scale"]) == 1.0
  y = jax.jit(block.apply)({"params": params}, x)
  np.testing.assert_array_equal(np.asarray(y), np.asarray(x))


def test_block_equations():
  """pre: X + PA(N1(X + M X^T)), then + FFN(N2(.)) * ffn_scale; post:
  N1(X + PA(X + M X^T)), then N2(. + FFN(.)) * ffn_scale; written out with
  the submodules' parameters."""
  from relational_jax.layers.pivotal import PivotalAttention  # pylint: disable=g-import-not-at-top

  x = _x()
  for name in ("pre_layernorm", "post_rmsnorm_bias_gelu"):
    block = _block(name)
    params = _random_params(block, x)
    p = params["params"]
    attention = PivotalAttention(num_heads=H, use_bias=block.use_bias)
    pa = lambda z: attention.apply({"params": p["attention"]}, z)

    def dense(q, z):
      return z @ q["kernel"] + q.get("bias", 0.0)

    def norm(q, z):
      if block.norm == "layernorm":
        mu = z.mean(-1, keepdims=True)
        var = ((z - mu) ** 2).mean(-1, keepdims=True)
        return (z - mu) / jnp.sqrt(var + 1e-5) * q["scale"] + q["bias"]
      return z / jnp.sqrt((z**2).mean(-1, keepdims=True) + 1e-5) * q["scale"]

    act = (
        jax.nn.relu
        if block.activation == "relu"
        else lambda z: jax.nn.gelu(z, approximate=False)
    )
    ffn = lambda z: dense(p["ffn_out"], act(dense(p["ffn_hidden"], z)))

    @jax.jit
    def reference(x):
      mixed = x + dense(p["mix"], jnp.swapaxes(x, 1, 2))
      if block.norm_position == "pre":
        u = x + pa(norm(p["norm_attention"], mixed))
        return u + ffn(norm(p["norm_ffn"], u)) * p["ffn_scale"]
      u = norm(p["norm_attention"], x + pa(mixed))
      return norm(p["norm_ffn"], u + ffn(u)) * p["ffn_scale"]

    want = reference(x)
    got = jax.jit(block.apply)(params, x)
    np.testing.assert_allclose(
        np.asarray(got), np.asarray(want), atol=2e-5, err_msg=name
    )


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_padded_nodes_change_nothing_for_real_pairs(name):
  block = _block(name)
  x = _x()
  params = _random_params(block, x, NODE_MASK)
  padded = jnp.zeros((B, N, N), bool).at[1, 3:].set(True).at[1, :, 3:].set(True)
  x_padded = jnp.where(padded[..., None], _x(seed=9) * 10.0, x)
  got = jax.jit(block.apply)(params, x_padded, NODE_MASK)
  alone = jax.jit(block.apply)(params, x[1:, :3, :3])
  np.testing.assert_allclose(
      np.asarray(got[1, :3, :3]), np.asarray(alone[0]), atol=1e-5
  )


@pytest.mark.parametrize("name", ["pre_layernorm", "post_rmsnorm_bias_gelu"])
def test_node_permutation_equivariance(name):
  block = _block(name)
  x = _x()
  params = _random_params(block, x, NODE_MASK)
  perm = np.array([3, 0, 4, 1, 2])
  apply = jax.jit(block.apply)
  y = apply(params, x, NODE_MASK)
  y_perm = apply(params, x[:, perm][:, :, perm], NODE_MASK[:, perm])
  np.testing.assert_allclose(
      np.asarray(y_perm), np.asarray(y[:, perm][:, :, perm]), atol=1e-5
  )


def test_jit_and_chunking_change_nothing():
  x = _x()
  block = _block("pre_layernorm")
  params = _random_params(block, x, NODE_MASK)
  eager = block.apply(params, x, NODE_MASK)
  for chunk_size in (None, 3):
    other = _block("pre_layernorm").clone(chunk_size=chunk_size)
    np.testing.assert_allclose(
        np.asarray(jax.jit(other.apply)(params, x, NODE_MASK)),
        np.asarray(eager),
        atol=1e-5,
    )


def test_dropout_only_in_training():
  x = _x()
  block = _block("pre_layernorm", dropout_rate=0.3)
  params = _random_params(block, x)
  apply = jax.jit(block.apply, static_argnames="deterministic")
  plain = jax.jit(_block("pre_layernorm").apply)(params, x)
  np.testing.assert_allclose(
      np.asarray(apply(params, x)), np.asarray(plain), atol=1e-6
  )
  train = apply(
      params, x, deterministic=False, rngs={"dropout": jax.random.PRNGKey(1)}
  )
  assert np.isfinite(np.asarray(train)).all()
  assert not np.allclose(np.asarray(train), np.asarray(plain))


@pytest.mark.slow
def test_stack_zeroes_padded_pairs_and_is_untied():
  config = FloydConfig(num_layers=2, num_heads=H, head_dim=D // H, chunk_size=2)
  stack = FloydTransformer(config)
  x = _x()
  params = _random_params(stack, x, NODE_MASK)
  assert set(params["params"]) == {"block_0", "block_1"}
  y = np.asarray(jax.jit(stack.apply)(params, x, NODE_MASK))
  assert not y[1, 3:].any() and not y[1, :, 3:].any()
  alone = jax.jit(stack.apply)(params, x[1:, :3, :3])
  np.testing.assert_allclose(y[1, :3, :3], np.asarray(alone[0]), atol=1e-5)
  keep = FloydTransformer(dataclasses.replace(config, zero_padded_pairs=False))
  assert np.asarray(jax.jit(keep.apply)(params, x, NODE_MASK))[1, 3:].any()


@pytest.mark.slow
def test_stack_is_its_blocks_in_turn_with_padded_pairs_zeroed():
  """x^{l+1} = block_l(x^l) * pair_mask, pair_mask_ij = m_i m_j, applied
  block by block from their own parameters."""
  config = FloydConfig(num_layers=2, num_heads=H, head_dim=D // H, chunk_size=2)
  x = _x(4)
  params = _random_params(FloydTransformer(config), x, NODE_MASK)["params"]
  block = PivotalAttentionBlock.from_config(config)
  pair_BxNxNx1 = (NODE_MASK[:, :, None] & NODE_MASK[:, None, :])[..., None]
  want = x
  for l in range(2):
    got = block.apply({"params": params[f"block_{l}"]}, want, NODE_MASK)
    want = got * pair_BxNxNx1
  stack = FloydTransformer(config).apply({"params": params}, x, NODE_MASK)
  np.testing.assert_allclose(stack, want, rtol=1e-5, atol=1e-5)


def test_config_validation():
  assert FloydConfig(num_heads=4, head_dim=8).edge_width == 32
  assert FloydConfig(norm="LN").norm == "LN"  # their aliases are accepted
  for kwargs, match in (
      (dict(norm="batchnorm"), "batchnorm"),
      (dict(norm="group"), "norm"),
      (dict(norm_position="middle"), "norm_position"),
      (dict(activation="tanh"), "activation"),
      (dict(dropout_rate=1.0), "dropout_rate"),
      (dict(chunk_size=0), "chunk_size"),
      (dict(num_heads=0), "num_heads"),
      (dict(use_bias="no"), "FloydConfig.use_bias must be a bool, got 'no'"),
  ):
    with pytest.raises(ValueError, match=match):
      FloydConfig(**kwargs)
  with pytest.raises(ValueError, match="batchnorm"):
    PivotalAttentionBlock(num_heads=H, norm="bn").init(
        jax.random.PRNGKey(0), _x()
    )
