"""Tests for the Edge Transformer encoder-decoder (tiny configs, CPU)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from relational_jax.models import edge_transformer as et_lib
from relational_jax.models import et_seq2seq as ets
from tests.fast_jit import jit

PAD, BOS, EOS = 0, 1, 2
SRC_VOCAB, TGT_VOCAB = 7, 9


_ET_FIELDS = {f.name for f in dataclasses.fields(et_lib.ETConfig)}


def tiny(**overrides):
  """Width 8 (2 heads of 4), FFN 16; ETConfig fields go to `et`."""
  et_kwargs = dict(
      num_layers=2,
      num_heads=2,
      head_dim=4,
      ffn_dim=16,
      chunk_size=3,
      ffn_chunk_size=2,
  )
  kwargs = dict(
      src_vocab_size=SRC_VOCAB,
      tgt_vocab_size=TGT_VOCAB,
      num_decoder_layers=2,
      max_distance=3,
      max_src_len=8,
      max_tgt_len=8,
  )
  for name, value in overrides.items():
    (et_kwargs if name in _ET_FIELDS else kwargs)[name] = value
  return ets.ETSeq2SeqConfig(et=et_lib.ETConfig(**et_kwargs), **kwargs)


# Row 0 has a padded source token; row 1 a padded target tail.
SRC = jnp.array([[3, 4, 5, PAD], [2, 6, 1, 4]], jnp.int32)
TGT_IN = jnp.array([[BOS, 3, 4, 5, 6, 8], [BOS, 8, 7, 3, EOS, PAD]], jnp.int32)


def init(model, src=SRC, tgt_in=TGT_IN, seed=0):
  return jit(lambda key: model.init(key, src, None, tgt_in))(
      jax.random.PRNGKey(seed)
  )["params"]


def full_logits(model, params, src=SRC, tgt_in=TGT_IN):
  return jit(lambda p, s, t: model.apply({"params": p}, s, None, t))(
      params, src, tgt_in
  )


def incremental_logits(model, params, src=SRC, tgt_in=TGT_IN):
  def run(p, s, t):
    state = ets.init_decode_state(model, p, s, t.shape[1])
    out = []
    for step in range(t.shape[1]):
      logits_BxV, state = ets.decode_step(model, p, state, t[:, step])
      out.append(logits_BxV)
    return jnp.stack(out, axis=1)

  return jit(run)(params, src, tgt_in)


@pytest.mark.parametrize(
    "tied, layout", [(True, "paper"), (False, "released_code")]
)
@pytest.mark.slow
def test_incremental_decoding_equals_full_causal_pass(tied, layout):
  model = ets.EdgeTransformerSeq2Seq(tiny(tied=tied, layout=layout))
  params = init(model)
  if tied:
    assert set(params["decoder"]) == {"layer"}
  else:
    assert set(params["decoder"]) == {"layer_0", "layer_1"}
  np.testing.assert_allclose(
      incremental_logits(model, params),
      full_logits(model, params),
      rtol=1e-4,
      atol=1e-5,
  )


def _first_token_models():
  """The plain model, the one with first-token vectors, and the latter's
  parameters with the vectors set to random values (one layer each)."""
  one = dict(num_layers=1, num_decoder_layers=1)  # Depth is not the point.
  plain = ets.EdgeTransformerSeq2Seq(tiny(**one))
  model = ets.EdgeTransformerSeq2Seq(tiny(first_token_vectors=True, **one))
  params = init(model)
  key_s, key_t = jax.random.split(jax.random.PRNGKey(5))
  return (
      plain,
      model,
      params,
      dict(
          params,
          src_first=jax.random.normal(key_s, (8,)),
          tgt_first=jax.random.normal(key_t, (8,)),
      ),
  )


def test_first_token_vectors_reach_the_first_source_and_decoder_input():
  """The CFQ code's learned first-token vectors: zero at initialisation
  (the model without them); set, they move the encoder's input x_00 and
  the decoder's x_SS (joint state)."""
  plain, model, params, set_params = _first_token_models()
  assert not np.any(params["src_first"]) and not np.any(params["tgt_first"])
  without = {k: v for k, v in params.items() if not k.endswith("_first")}
  logits = jit(lambda p: model.apply({"params": p}, SRC, None, TGT_IN))
  plain_logits = full_logits(plain, without)
  np.testing.assert_allclose(logits(params), plain_logits, atol=1e-6)
  x_enc = jnp.zeros((2, 4, 4, 8))
  x0 = model.apply(
      {"params": set_params}, x_enc, TGT_IN, method=model.joint_state
  )
  x0_plain = plain.apply(
      {"params": without}, x_enc, TGT_IN, method=plain.joint_state
  )
  np.testing.assert_allclose(
      x0 - x0_plain,
      jnp.zeros_like(x0).at[:, 4, 4].set(set_params["tgt_first"]),
      atol=1e-6,
  )
  assert not np.allclose(logits(set_params), plain_logits)


@pytest.mark.slow
def test_incremental_decoding_with_first_token_vectors_equals_full_pass():
  """Incremental decoding adds the decoder's first-token vector at step 0
  only and still equals the full causal pass."""
  _, model, _, set_params = _first_token_models()
  np.testing.assert_allclose(
      incremental_logits(model, set_params),
      full_logits(model, set_params),
      rtol=1e-4,
      atol=1e-5,
  )


@pytest.mark.slow
def test_jit_equals_eager():
  """Teacher-forced logits, jitted and eager."""
  model = ets.EdgeTransformerSeq2Seq(tiny(tied=False))
  params = init(model)
  run = lambda p: model.apply({"params": p}, SRC, None, TGT_IN)
  np.testing.assert_allclose(
      jax.jit(run)(params), run(params), rtol=1e-5, atol=1e-5
  )


@pytest.mark.slow
def test_full_pass_is_causal():
  """Changing decoder input s changes no logits before position s."""
  model = ets.EdgeTransformerSeq2Seq(tiny())
  params = init(model)
  base = full_logits(model, params)
  changed = full_logits(model, params, tgt_in=TGT_IN.at[:, 3].set(7))
  np.testing.assert_allclose(changed[:, :3], base[:, :3], rtol=1e-5, atol=1e-6)
  assert not np.allclose(changed[:, 3:], base[:, 3:])


@pytest.mark.slow
def test_joint_state_blocks():
  """X^0: x_enc, cross vectors c_st / c_ts, eq. 10 on the decoder inputs."""
  model = ets.EdgeTransformerSeq2Seq(tiny())
  params = init(model)
  x_enc = jax.random.normal(jax.random.PRNGKey(3), (2, 4, 4, 8))
  x0 = model.apply(
      {"params": params},
      x_enc,
      TGT_IN,
      method=ets.EdgeTransformerSeq2Seq.joint_state,
  )
  assert x0.shape == (2, 10, 10, 8)
  emb = params["tgt_embed"]
  rel, tok = emb["relative_position"]["embedding"], emb["token"]["embedding"]
  cross = params["cross"]["embedding"]
  for b in range(2):
    for i in range(10):
      for j in range(10):
        if i < 4 and j < 4:
          want = x_enc[b, i, j]
        elif i < 4:
          want = cross[0]
        elif j < 4:
          want = cross[1]
        else:
          want = rel[int(np.clip((i - 4) - (j - 4), -3, 3)) + 3]
          if i == j:
            want = want + tok[TGT_IN[b, i - 4]]
        np.testing.assert_allclose(x0[b, i, j], want, rtol=1e-6, atol=1e-6)


@pytest.mark.slow
def test_source_padding_invariance():
  """Extra padded source positions change no logits."""
  model = ets.EdgeTransformerSeq2Seq(tiny())
  params = init(model)
  padded = jnp.concatenate([SRC, jnp.full((2, 2), PAD, jnp.int32)], axis=1)
  np.testing.assert_allclose(
      full_logits(model, params, src=padded),
      full_logits(model, params),
      rtol=1e-5,
      atol=1e-6,
  )


@pytest.mark.slow
def test_greedy_decoding_is_the_argmax_of_its_own_prefixes():
  model = ets.EdgeTransformerSeq2Seq(tiny())
  params = init(model, seed=4)
  out = np.asarray(model.greedy_decode(params, SRC, 6, BOS, EOS))
  assert out.shape == (2, 6) and out.dtype == np.int32
  tgt_in = jnp.concatenate(
      [jnp.full((2, 1), BOS), jnp.asarray(out[:, :-1])], axis=1
  )
  argmax = np.asarray(
      jnp.argmax(full_logits(model, params, tgt_in=tgt_in), axis=-1)
  )
  for b in range(2):
    ended = np.flatnonzero(out[b] == EOS)
    stop = ended[0] + 1 if len(ended) else 6
    np.testing.assert_array_equal(out[b, :stop], argmax[b, :stop])
    assert (out[b, stop:] == PAD).all()


@pytest.mark.slow
def test_learns_to_copy():
  """A few hundred Adam steps fit a 3-token copy task on 16 examples."""
  rng = np.random.default_rng(0)
  src = jnp.asarray(rng.integers(3, SRC_VOCAB, (16, 3)), jnp.int32)
  tgt_out = jnp.concatenate([src, jnp.full((16, 1), EOS)], axis=1)
  tgt_in = jnp.concatenate([jnp.full((16, 1), BOS), src], axis=1)
  model = ets.EdgeTransformerSeq2Seq(
      tiny(head_dim=8, ffn_dim=32, num_layers=1, num_decoder_layers=2)
  )
  params = init(model, src, tgt_in)
  tx = optax.adam(3e-3)

  def loss_fn(p):
    logits = model.apply({"params": p}, src, None, tgt_in)
    return optax.softmax_cross_entropy_with_integer_labels(
        logits, tgt_out
    ).mean()

  @jit
  def train(p):
    def step(carry, _):
      p, opt = carry
      loss, grads = jax.value_and_grad(loss_fn)(p)
      updates, opt = tx.update(grads, opt, p)
      return (optax.apply_updates(p, updates), opt), loss

    (p, _), losses = jax.lax.scan(step, (p, tx.init(p)), None, length=300)
    return p, losses

  params, losses = train(params)
  assert losses[-1] < 0.1 * losses[0], (losses[0], losses[-1])
  out = model.greedy_decode(params, src, 4, BOS, EOS)
  assert np.mean(np.all(np.asarray(out) == np.asarray(tgt_out), axis=1)) > 0.9


@pytest.mark.parametrize(
    "overrides, match",
    [
        (dict(num_heads=0), "ETConfig.num_heads must be a positive int"),
        (dict(tied="no"), "ETConfig.tied must be a bool, got 'no'"),
        (dict(ablation="value"), "needs et.ablation='none'"),
        (
            dict(layout="post"),
            r"Unknown layout 'post'; valid choices are "
            r"\['paper', 'released_code'\]",
        ),
        (dict(max_distance=-1), "max_distance must be an int >= 0"),
        (dict(first_token_vectors=1), "first_token_vectors must be a bool"),
        (dict(dropout_rate=1.0), r"dropout_rate must be in \[0, 1\)"),
        (
            dict(num_decoder_layers=0),
            "num_decoder_layers must be a positive int",
        ),
    ],
)
def test_bad_config_raises(overrides, match):
  with pytest.raises(ValueError, match=match):
    tiny(**overrides)


def test_bad_inputs_raise():
  model = ets.EdgeTransformerSeq2Seq(tiny())
  # Shapes only: each check raises while tracing, before any compute.
  params = jax.eval_shape(
      lambda key: model.init(key, SRC, None, TGT_IN), jax.random.PRNGKey(0)
  )["params"]
  apply = lambda *a, **k: jax.eval_shape(
      lambda p: model.apply({"params": p}, *a, **k), params
  )
  with pytest.raises(ValueError, match="tgt_tree_pos_BxTxP is not supported"):
    apply(
        SRC,
        None,
        TGT_IN,
        tgt_tree_pos_BxTxP=jnp.zeros((2, 6, 4)),
    )
  with pytest.raises(ValueError, match="src_relations_BxSxS is not supported"):
    apply(
        SRC,
        None,
        TGT_IN,
        src_relations_BxSxS=jnp.zeros((2, 4, 4), jnp.int32),
    )
  with pytest.raises(ValueError, match="arities .* is not supported"):
    model.greedy_decode(params, SRC, 4, BOS, EOS, arities=[0] * TGT_VOCAB)
  with pytest.raises(
      ValueError, match=r"max_len must be in \[1, " r"max_tgt_len=8\], got 9"
  ):
    model.greedy_decode(params, SRC, 9, BOS, EOS)
  with pytest.raises(ValueError, match="target length 9 exceeds max_tgt_len"):
    apply(SRC, None, jnp.ones((2, 9), jnp.int32))
