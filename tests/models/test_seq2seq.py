"""Tests for relational_jax.models.seq2seq (tiny configs, CPU)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from relational_jax.layers import tree as tree_lib
from relational_jax.models import seq2seq

PAD, BOS, EOS = 0, 1, 2
VOCAB = 10
# Tree vocabulary for the seq2tree variant: tokens 3-6 have one child,
# tokens 7-9 none (leaves); special tokens none.
ARITIES = [0, 0, 0, 1, 1, 1, 1, 0, 0, 0]


from tests.fast_jit import FAST_COMPILE, jit  # noqa: E402,F401


def tiny(**overrides):
  kwargs = dict(
      src_vocab_size=VOCAB,
      tgt_vocab_size=VOCAB,
      d_model=16,
      num_heads=2,
      ffn_dim=32,
      num_encoder_layers=1,
      num_decoder_layers=1,
      dropout_rate=0.0,
      max_src_len=16,
      max_tgt_len=16,
  )
  if overrides.get("positions") == "tree":
    kwargs["tree_depth"] = 4
  kwargs.update(overrides)
  return seq2seq.Seq2SeqConfig(**kwargs)


def copy_batch(config, batch=8, length=5, seed=0):
  """Copy task: src -> src + EOS. Tree configs copy a chain tree (four
  one-child nodes and a leaf, DFS) and feed the decoder tree positions."""
  rng = np.random.default_rng(seed)
  if config.positions == "tree":
    src = np.concatenate(
        [
            rng.integers(3, 7, (batch, length - 1)),
            rng.integers(7, VOCAB, (batch, 1)),
        ],
        axis=1,
    )
  else:
    src = rng.integers(3, VOCAB, (batch, length))
  tgt_out = np.concatenate([src, np.full((batch, 1), EOS)], axis=1)
  tgt_in = np.concatenate([np.full((batch, 1), BOS), src], axis=1)
  extra = {}
  if config.positions == "tree":
    extra["tgt_tree_pos_BxTxP"] = jnp.asarray(
        np.stack([
            tree_lib.decoder_positions(
                [ARITIES[t] for t in row],
                config.tree_order,
                config.tree_depth,
                length=length + 1,
            )
            for row in src
        ])
    )
  if config.relation_aware:
    extra["src_relations_BxSxS"] = jnp.asarray(
        rng.integers(0, config.num_relations, (batch, length, length)),
        jnp.int32,
    )
  return (
      jnp.asarray(src, jnp.int32),
      jnp.asarray(tgt_in, jnp.int32),
      jnp.asarray(tgt_out, jnp.int32),
      extra,
  )


def random_params(model, *args, seed=0, scale=0.3, **kwargs):
  """N(0, scale^2) parameters; shapes from jax.eval_shape (no compile)."""
  shapes = jax.eval_shape(model.init, jax.random.key(0), *args, **kwargs)[
      "params"
  ]
  rng = np.random.default_rng(seed)
  return jax.tree.map(
      lambda s: jnp.asarray(rng.normal(0.0, scale, s.shape), s.dtype), shapes
  )


def param_count(config):
  model = seq2seq.Seq2SeqTransformer(config)
  src, tgt_in, _, extra = copy_batch(config, batch=1)
  shapes = jax.eval_shape(
      model.init, jax.random.key(0), src, None, tgt_in, **extra
  )
  return sum(x.size for x in jax.tree.leaves(shapes["params"]))


# ---------------------------------------------------------------------------
# Config validation.


@pytest.mark.parametrize(
    "overrides, match",
    [
        (
            dict(positions="rotary"),
            (
                "positions 'rotary'; valid choices are \\['absolute',"
                " 'relative', 'tree'\\]"
            ),
        ),
        (dict(scaling="xavier"), "scaling 'xavier'.*'teu', 'ped', 'none'"),
        (dict(tree_order="inorder"), "tree_order 'inorder'.*'dfs', 'bfs'"),
        (dict(encoder="edge_transformer"), "encoder 'edge_transformer'"),
        (dict(num_heads=3), "num_heads=3 must divide the d_model 16"),
        (
            dict(num_decoder_layers=0),
            "num_decoder_layers must be a positive int",
        ),
        (dict(dropout_rate=1.0), "dropout_rate must be in"),
        (
            dict(relation_aware=True, positions="relative"),
            "relation_aware=True needs positions in",
        ),
        (dict(positions="tree", tree_depth=3), "multiple of tree_arity"),
        (dict(positions="tree", tree_arity=3), "tree_arity must be 2"),
        (
            dict(positions="tree", tree_alignment="previous"),
            "tree_alignment 'previous'.*'output', 'next'",
        ),
        (
            dict(positions="tree", tree_pe_norm="unit"),
            "tree_pe_norm 'unit'.*'paper', 'pe_width', 'sinusoid'",
        ),
        (dict(positions="tree", tree_pos_width=12), "tree PE width .* 12"),
        (dict(tree_encoder=True), "tree_encoder=True needs positions='tree'"),
        (dict(embedding_dropout=1.0), "embedding_dropout must be < 1"),
        (dict(init="xavier"), "init 'xavier'.*'csordas', 'flax'"),
        (dict(tied="no"), "Seq2SeqConfig.tied must be a bool, got 'no'"),
        (
            dict(tree_depth=8),
            r"tree_depth=8 is read only with positions='tree'; leave it at "
            r"its default 32",
        ),
        (dict(num_relations=7), r"num_relations=7 is read only with relation"),
        (dict(edge_scorer="biaffine"), r"edge_scorer='biaffine' is read only"),
    ],
)
def test_bad_config_raises(overrides, match):
  with pytest.raises(ValueError, match=match):
    tiny(**overrides)


def test_authors_options_change_parameters_and_embedding_dropout():
  """Csordas et al.'s defaults: no attention output bias, a bias on the
  (tied) output, embedding dropout 0.1 with absolute positions and none
  with relative ones (not dropout_rate); each can be switched."""

  def leaves(config):
    src = jnp.ones((1, 3), jnp.int32)
    params = seq2seq.Seq2SeqTransformer(config).init(
        jax.random.PRNGKey(0), src, None, src
    )["params"]
    return {
        "/".join(str(k.key) for k in path)
        for path, _ in jax.tree_util.tree_flatten_with_path(params)[0]
    }

  default = leaves(tiny(tie_embeddings=True))
  assert "decoder/out_bias" in default
  assert not any(p.endswith("attn/out/bias") for p in default)
  other = leaves(
      tiny(tie_embeddings=True, attention_out_bias=True, output_bias=False)
  )
  assert "decoder/out_bias" not in other
  assert "encoder/layers_0/self_attn/out/bias" in other
  assert "decoder/layers_0/cross_attn/out/bias" in other
  assert tiny(dropout_rate=0.5).embedding_dropout_rate == 0.1
  assert (
      tiny(positions="relative", dropout_rate=0.5).embedding_dropout_rate == 0.0
  )
  assert tiny(embedding_dropout=0.3).embedding_dropout_rate == 0.3


def test_tied_has_one_layer_of_parameters():
  tied_3 = param_count(
      tiny(tied=True, num_encoder_layers=3, num_decoder_layers=3)
  )
  tied_1 = param_count(tiny(tied=True))
  untied_3 = param_count(tiny(num_encoder_layers=3, num_decoder_layers=3))
  untied_1 = param_count(tiny())
  assert tied_3 == tied_1 == untied_1
  assert untied_3 > untied_1
  rel_tied = [
      param_count(
          tiny(
              positions="relative",
              tied=True,
              num_encoder_layers=n,
              num_decoder_layers=n,
          )
      )
      for n in (1, 3)
  ]
  assert rel_tied[0] == rel_tied[1]


# ---------------------------------------------------------------------------
# Training: every variant lowers the loss on a toy copy task.

# Dropout is on where it reaches a distinct attention class (plain,
# relative, relation-aware); elsewhere it is off to keep compiles small.
VARIANTS = {
    "absolute_ped": dict(scaling="ped", dropout_rate=0.1),
    "absolute_teu": dict(scaling="teu"),
    "absolute_none": dict(scaling="none"),
    "relative": dict(positions="relative", dropout_rate=0.1),
    "tied": dict(tied=True, num_encoder_layers=2, num_decoder_layers=2),
    "relation_aware": dict(relation_aware=True, dropout_rate=0.1),
    "tree": dict(positions="tree"),
}


@pytest.mark.parametrize("name", list(VARIANTS))
@pytest.mark.slow
def test_training_lowers_loss(name):
  config = tiny(**VARIANTS[name])
  model = seq2seq.Seq2SeqTransformer(config)
  src, tgt_in, tgt_out, extra = copy_batch(config)
  optimizer = optax.adam(1e-2)

  def loss_fn(params, dropout_key):
    logits = model.apply(
        {"params": params},
        src,
        None,
        tgt_in,
        deterministic=False,
        rngs={"dropout": dropout_key},
        **extra,
    )
    return optax.softmax_cross_entropy_with_integer_labels(
        logits, tgt_out
    ).mean()

  def train_step(params, opt_state, dropout_key):  # One optax step.
    loss, grads = jax.value_and_grad(loss_fn)(params, dropout_key)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  params = jit(model.init)(jax.random.key(0), src, None, tgt_in, **extra)[
      "params"
  ]
  train_step = jit(train_step)
  opt_state = optimizer.init(params)
  losses = []
  for dropout_key in jax.random.split(jax.random.key(1), 6):
    params, opt_state, loss = train_step(params, opt_state, dropout_key)
    losses.append(float(loss))
  assert np.all(np.isfinite(losses))
  assert losses[-1] < 0.85 * losses[0], (name, losses)


# ---------------------------------------------------------------------------
# Incremental decoding, padding, jit.


@pytest.mark.parametrize(
    "overrides",
    [
        dict(positions="tree"),
        dict(tied=True, num_decoder_layers=2, positions="relative"),
        dict(pre_norm=True, tie_embeddings=True, num_decoder_layers=2),
    ],
    ids=["tree", "tied_relative", "absolute_prenorm_tied"],
)
def test_incremental_decoding_equals_teacher_forcing(overrides):
  config = tiny(**overrides)
  model = seq2seq.Seq2SeqTransformer(config)
  src, tgt_in, _, extra = copy_batch(config, batch=2)
  params = random_params(model, src, None, tgt_in, **extra)
  tree_pos = extra.get("tgt_tree_pos_BxTxP")
  num_t = tgt_in.shape[1]
  full = jit(lambda p: model.apply({"params": p}, src, None, tgt_in, **extra))(
      params
  )
  memory, memory_mask = jit(
      lambda p: model.apply({"params": p}, src, method=model.encode)
  )(params)
  step = jit(
      lambda p, *args: model.apply(
          {"params": p}, *args, method=model.decode_step
      )
  )
  cache = model.init_cache(2, num_t + 1)
  steps = []
  for t in range(num_t):  # One new token per step.
    pos_t = None if tree_pos is None else tree_pos[:, t : t + 1]
    logits, cache = step(
        params, memory, memory_mask, tgt_in[:, t : t + 1], cache, pos_t
    )
    steps.append(logits)
  assert int(cache["index"]) == num_t
  np.testing.assert_allclose(
      np.asarray(jnp.concatenate(steps, axis=1)), np.asarray(full), atol=1e-4
  )


@pytest.mark.parametrize(
    "overrides",
    [
        dict(positions="absolute"),
        dict(positions="relative"),
        dict(relation_aware=True),
    ],
    ids=["absolute", "relative", "relation_aware"],
)
def test_padding_does_not_change_real_encoder_outputs(overrides):
  config = tiny(**overrides, num_encoder_layers=2)
  model = seq2seq.Seq2SeqTransformer(config)
  src, tgt_in, _, extra = copy_batch(config, batch=2, length=4)
  padded = jnp.concatenate([src, jnp.full((2, 3), PAD, jnp.int32)], axis=1)
  relations = {}
  padded_relations = {}
  if config.relation_aware:
    rel = extra["src_relations_BxSxS"]
    relations = dict(src_relations_BxSxS=rel)
    padded_relations = dict(
        src_relations_BxSxS=jnp.pad(
            rel, ((0, 0), (0, 3), (0, 3)), constant_values=1
        )
    )
  params = random_params(model, src, None, tgt_in, **extra)
  encode = jit(
      lambda p, s, **kw: model.apply(
          {"params": p}, s, method=model.encode, **kw
      )
  )
  memory, mask = encode(params, src, **relations)
  memory_padded, mask_padded = encode(params, padded, **padded_relations)
  assert np.asarray(mask).all() and not np.asarray(mask_padded)[:, 4:].any()
  np.testing.assert_allclose(
      np.asarray(memory_padded)[:, :4], np.asarray(memory), atol=1e-5
  )


@pytest.mark.slow
def test_jit_equals_no_jit():
  config = tiny()
  model = seq2seq.Seq2SeqTransformer(config)
  src, tgt_in, _, _ = copy_batch(config, batch=2)
  params = random_params(model, src, None, tgt_in)
  apply = lambda p: model.apply({"params": p}, src, None, tgt_in)
  np.testing.assert_allclose(
      np.asarray(jit(apply)(params)), np.asarray(apply(params)), atol=1e-5
  )


def test_inputs_the_config_does_not_read_are_refused():
  """Relations without relation_aware and decoder tree positions without
  positions='tree' would be dropped silently."""
  config = tiny()
  model = seq2seq.Seq2SeqTransformer(config)
  src, tgt_in, _, _ = copy_batch(config, batch=2, length=4)
  params = random_params(model, src, None, tgt_in)
  b, s = src.shape
  with pytest.raises(ValueError, match="src_relations_BxSxS given but rel"):
    model.apply(
        {"params": params},
        src,
        None,
        tgt_in,
        src_relations_BxSxS=jnp.zeros((b, s, s), jnp.int32),
    )
  with pytest.raises(ValueError, match="tgt_tree_pos_BxTxP given but pos"):
    model.apply(
        {"params": params},
        src,
        None,
        tgt_in,
        tgt_tree_pos_BxTxP=jnp.zeros(tgt_in.shape + (4,)),
    )


def test_edge_logits_shape():
  config = tiny(relation_aware=True, num_edge_labels=3)
  model = seq2seq.Seq2SeqTransformer(config)
  src, tgt_in, _, extra = copy_batch(config, batch=2, length=4)
  params = random_params(model, src, None, tgt_in, **extra)
  assert "edge_scorer" in params
  logits = jax.eval_shape(
      lambda p: model.apply(
          {"params": p},
          src,
          None,
          extra["src_relations_BxSxS"],
          method=model.edge_logits,
      ),
      params,
  )
  assert logits.shape == (2, 4, 4, 3)


# ---------------------------------------------------------------------------
# Greedy decoding.


def _teacher_forced_argmax(model, params, src, tokens, tree_pos=None):
  tgt_in = jnp.concatenate(
      [jnp.full((src.shape[0], 1), BOS, jnp.int32), tokens[:, :-1]], axis=1
  )
  extra = {} if tree_pos is None else {"tgt_tree_pos_BxTxP": tree_pos}
  logits = jit(
      lambda p: model.apply({"params": p}, src, None, tgt_in, **extra)
  )(params)
  return np.asarray(jnp.argmax(logits, axis=-1))


def test_greedy_decode_stops_at_eos_and_matches_teacher_forcing():
  config = tiny()
  model = seq2seq.Seq2SeqTransformer(config)
  src, tgt_in, _, _ = copy_batch(config, batch=3)
  params = random_params(model, src, None, tgt_in, seed=4, scale=1.0)
  max_len = 7
  free = np.asarray(model.greedy_decode(params, src, max_len, BOS, eos=-1))
  assert free.shape == (3, max_len)
  np.testing.assert_array_equal(
      _teacher_forced_argmax(model, params, src, jnp.asarray(free)), free
  )
  # Declare the token row 0 emits at step 2 to be EOS: every row must keep
  # its prefix up to its first EOS (included) and be padded after it.
  eos = int(free[0, 2])
  want = np.full_like(free, PAD)
  for b, row in enumerate(free):
    stop = list(row).index(eos) if eos in row else max_len - 1
    want[b, : stop + 1] = row[: stop + 1]
  got = np.asarray(model.greedy_decode(params, src, max_len, BOS, eos))
  np.testing.assert_array_equal(got, want)


@pytest.mark.slow
@pytest.mark.parametrize("tree_tokens", ["lcrs_null", "arity"])
def test_greedy_tree_decode_uses_tree_positions(tree_tokens):
  """'lcrs_null' (default): the tokens are the binary tree's nodes, an
  arity-1 node's child its right one (tree.decoder_positions with
  binarize=False, slots='last'); 'arity': general trees, LCRS positions."""
  config = tiny(positions="tree", tree_order="bfs", tree_tokens=tree_tokens)
  binary = (
      dict(binarize=False, slots="last") if tree_tokens == "lcrs_null" else {}
  )
  model = seq2seq.Seq2SeqTransformer(config)
  src, tgt_in, _, extra = copy_batch(config, batch=3)
  params = random_params(model, src, None, tgt_in, seed=5, scale=1.0, **extra)
  with pytest.raises(ValueError, match="needs `arities`"):
    model.greedy_decode(params, src, 6, BOS, EOS)
  out = np.asarray(
      model.greedy_decode(params, src, 6, BOS, eos=-1, arities=ARITIES)
  )
  tree_pos = np.stack([
      tree_lib.decoder_positions(
          [ARITIES[t] for t in row],
          "bfs",
          config.tree_depth,
          length=6,
          **binary,
      )
      for row in out
  ])
  np.testing.assert_array_equal(
      _teacher_forced_argmax(
          model, params, src, jnp.asarray(out), jnp.asarray(tree_pos)
      ),
      out,
  )


@pytest.mark.slow
def test_greedy_tree_decode_ends_complete_trees():
  """tree_end 'complete' (icecaps): a row ends with EOS once its tree is
  complete, and not before unless the model emits EOS itself."""
  config = tiny(positions="tree")
  model = seq2seq.Seq2SeqTransformer(config)
  src, tgt_in, _, extra = copy_batch(config, batch=4)
  params = random_params(model, src, None, tgt_in, seed=7, scale=1.0, **extra)
  out = np.asarray(
      model.greedy_decode(params, src, 12, BOS, EOS, arities=ARITIES)
  )
  completed = 0
  for row in out:
    state = seq2seq.tree_decoder_state(config)
    for t in row:
      if state.done:
        assert t == EOS, row
        completed += 1
        break
      if t == EOS:  # The model's own EOS, before the tree is complete.
        break
      state.push(t, ARITIES[t])
  assert completed > 0


@pytest.mark.slow
def test_tree2tree_encoder_positions_and_next_alignment_decoding():
  """tree_encoder: source tokens take the tree PE (here 32 wide, mapped to
  d_model 16) of their node; greedy decoding with the 'next' alignment
  equals teacher forcing with tree.decoder_positions(alignment='next')."""
  config = tiny(
      positions="tree",
      tree_encoder=True,
      tree_pos_width=32,
      tree_alignment="next",
      tree_tokens="arity",
  )
  model = seq2seq.Seq2SeqTransformer(config)
  src, tgt_in, _, extra = copy_batch(config, batch=2)
  extra["tgt_tree_pos_BxTxP"] = jnp.asarray(
      np.stack([
          tree_lib.decoder_positions(
              [ARITIES[t] for t in row],
              "dfs",
              4,
              length=tgt_in.shape[1],
              alignment="next",
          )
          for row in np.asarray(src)
      ])
  )
  src_pos = jnp.asarray(
      np.stack([
          tree_lib.node_positions([ARITIES[t] for t in row], "dfs", 4)
          for row in np.asarray(src)
      ])
  )
  params = random_params(
      model,
      src,
      None,
      tgt_in,
      src_tree_pos_BxSxP=src_pos,
      seed=6,
      scale=1.0,
      **extra,
  )
  assert params["encoder"]["tree_pe"]["to_d_model"]["kernel"].shape == (32, 16)
  assert params["decoder"]["tree_pe"]["encoding"]["theta"].shape == (4,)
  encode = jit(
      lambda p, pos: model.apply(
          {"params": p}, src, None, None, True, pos, method=model.encode
      )
  )
  assert not np.allclose(
      np.asarray(encode(params, src_pos)[0]),
      np.asarray(encode(params, src_pos[:, ::-1])[0]),
  )
  with pytest.raises(ValueError, match="needs the source tokens' tree"):
    model.apply({"params": params}, src, None, tgt_in, **extra)
  out = np.asarray(
      model.greedy_decode(
          params,
          src,
          6,
          BOS,
          eos=-1,
          arities=ARITIES,
          src_tree_pos_BxSxP=src_pos,
      )
  )
  tree_pos = np.stack([
      tree_lib.decoder_positions(
          [ARITIES[t] for t in row], "dfs", 4, length=6, alignment="next"
      )
      for row in out
  ])
  tgt = jnp.concatenate(
      [jnp.full((2, 1), BOS, jnp.int32), jnp.asarray(out[:, :-1])], axis=1
  )
  logits = jit(
      lambda p: model.apply(
          {"params": p},
          src,
          None,
          tgt,
          src_tree_pos_BxSxP=src_pos,
          tgt_tree_pos_BxTxP=jnp.asarray(tree_pos),
      )
  )(params)
  np.testing.assert_array_equal(np.asarray(jnp.argmax(logits, -1)), out)


def _layer_norm(x, p, eps):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * p["scale"] + p["bias"]


def _feed_forward(x, p):
  """[V17] eq. 2, one token at a time."""
  out = np.zeros_like(x)
  for index in np.ndindex(x.shape[:-1]):
    u = np.maximum(0.0, x[index] @ p["hidden"]["kernel"] + p["hidden"]["bias"])
    out[index] = u @ p["out"]["kernel"] + p["out"]["bias"]
  return out


@pytest.mark.parametrize("pre_norm", [False, True])
def test_layers_compose_attention_feed_forward_and_norms_as_written(pre_norm):
  """Encoder and decoder layers against their composition by hand: post-norm
  h <- LN(h + f(h)), pre-norm h <- h + f(LN(h)), f the sublayers in order
  (self-attention, [cross-attention,] eq. 2's feed-forward, checked here one
  token at a time), the attention modules as the layer's own."""
  c = tiny(positions="absolute", pre_norm=pre_norm)
  keys = jax.random.split(jax.random.PRNGKey(7), 4)
  h = jax.random.normal(keys[0], (2, 5, c.d_model))
  memory = jax.random.normal(keys[1], (2, 4, c.d_model))
  mask = jnp.array([[True] * 5, [True] * 3 + [False] * 2])
  memory_mask = jnp.array([[True] * 4, [True] * 2 + [False] * 2])
  eps = c.ln_epsilon

  def block(h, f, norm):
    if pre_norm:
      return h + f(_layer_norm(h, norm, eps))
    return _layer_norm(h + f(h), norm, eps)

  encoder = seq2seq.EncoderLayer(c)
  variables = encoder.init(keys[2], h, mask)
  p = jax.tree_util.tree_map(np.asarray, variables["params"])
  bound = encoder.bind(variables)
  want = block(
      np.asarray(h),
      lambda x: np.asarray(bound.self_attn(x, None, mask, True)),
      p["attn_norm"],
  )
  want = block(want, lambda x: _feed_forward(x, p["ff"]), p["ff_norm"])
  np.testing.assert_allclose(
      encoder.apply(variables, h, mask), want, rtol=1e-5, atol=1e-5
  )

  decoder = seq2seq.DecoderLayer(c)
  variables = decoder.init(keys[3], h, memory, memory_mask)
  p = jax.tree_util.tree_map(np.asarray, variables["params"])
  bound = decoder.bind(variables)
  want = block(
      np.asarray(h),
      lambda x: np.asarray(bound.self_attn(x, None, None, True)),
      p["self_norm"],
  )
  want = block(
      want,
      lambda x: np.asarray(bound.cross_attn(x, memory, memory_mask, True)),
      p["cross_norm"],
  )
  want = block(want, lambda x: _feed_forward(x, p["ff"]), p["ff_norm"])
  np.testing.assert_allclose(
      decoder.apply(variables, h, memory, memory_mask),
      want,
      rtol=1e-5,
      atol=1e-5,
  )
