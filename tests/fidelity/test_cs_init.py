"""Our seq2seq initialisation ('csordas') against Csordas et al.'s own.

goldens/cs_init_scan.json (relative Universal) and
cs_init_scan_universal_ped.json (absolute Universal with PED) hold, per
parameter of their TransformerEncDecModel at the SCAN trafo_scan size (tied
embedding), the mean, standard deviation and max |value| of 5 seeds of their
`reset_parameters` (scripts/make_peer_goldens.py --cs_reference). Ours, built
as the `scan_cutoff26_relative_universal` / `_absolute_universal`
reproduction builds it, must draw every parameter from the same
distribution: the same shape (up to our 4 special vocabulary rows), the same
standard deviation and, for their uniform initialisers (all but the PED
model's Kaiming-normal embeddings), the same bound.
"""

import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relational_jax.models.seq2seq import Seq2SeqConfig
from relational_jax.models.seq2seq import Seq2SeqTransformer

GOLDENS = pathlib.Path(__file__).resolve().parent / "goldens"
GOLDEN_FILES = ("cs_init_scan.json", "cs_init_scan_universal_ped.json")
SPECIALS = (
    4  # our PAD/BOS/EOS/UNK rows; theirs: EOS+SOS (source), SOS/EOS (target)
)

_ATTENTION = {
    "data_to_q.weight": ("query", "kernel"),
    "data_to_kv.weight": (("key", "kernel"), ("value", "kernel")),
    "pos_to_pq.weight": ("pos_proj", "kernel"),
    "multi_head_merge.weight": ("out", "kernel"),
    "global_content_bias": ("u_bias",),
    "global_pos_bias": ("v_bias",),
}
_FF = {
    "linear1.weight": ("ff", "hidden", "kernel"),
    "linear1.bias": ("ff", "hidden", "bias"),
    "linear2.weight": ("ff", "out", "kernel"),
    "linear2.bias": ("ff", "out", "bias"),
}
_NORMS = {
    "encoder": {"norm1": "attn_norm", "norm2": "ff_norm"},
    "decoder": {
        "norm1": "self_norm",
        "norm2": "cross_norm",
        "norm3": "ff_norm",
    },
}


def our_paths(their_name):
  """Our parameter paths (tuples) holding their parameter `their_name`."""
  fixed = {
      "input_embedding.weight": [("encoder", "embed", "embedding")],
      "output_embedding.weight": [("decoder", "embed", "embedding")],
      "output_map.bias": [("decoder", "out_bias")],
  }
  if their_name in fixed:
    return fixed[their_name]
  _, side, _, *rest = their_name.split(".")  # trafo.<side>.layer.<...>
  rest = ".".join(rest)
  base = (side, "layers_0")
  for module, ours in (
      ("self_attn", "self_attn"),
      ("multihead_attn", "cross_attn"),
  ):
    if rest.startswith(module + "."):
      target = _ATTENTION[rest[len(module) + 1 :]]
      targets = target if isinstance(target[0], tuple) else (target,)
      return [base + (ours,) + t for t in targets]
  if rest in _FF:
    return [base + _FF[rest]]
  norm, field = rest.split(".")
  return [
      base + (_NORMS[side][norm], {"weight": "scale", "bias": "bias"}[field])
  ]


def _our_init_stats(golden, seeds=5):
  sizes = golden["sizes"]
  config = Seq2SeqConfig(
      src_vocab_size=sizes["src_words"] + SPECIALS,
      tgt_vocab_size=sizes["tgt_words"] + SPECIALS,
      d_model=sizes["width"],
      num_heads=sizes["heads"],
      ffn_dim=sizes["ffn"],
      num_encoder_layers=sizes["layers"],
      num_decoder_layers=sizes["layers"],
      # The relative golden predates the two keys; its reproduction: 'ped'.
      positions=sizes.get("positions", "relative"),
      scaling=sizes.get("scaling", "ped"),
      tied=sizes["universal"],
      tie_embeddings=sizes["tied_embedding"],
      dropout_rate=0.5,
  )
  assert config.init == "csordas"
  model = Seq2SeqTransformer(config)
  src = jnp.ones((1, 4), jnp.int32)
  stats = {}
  for seed in range(seeds):
    params = model.init(jax.random.PRNGKey(seed), src, None, src)["params"]
    for path, value in jax.tree_util.tree_flatten_with_path(params)[0]:
      key = tuple(p.key for p in path)
      v = np.asarray(value, np.float64)
      entry = stats.setdefault(
          key, {"shape": v.shape, "std": [], "absmax": [], "mean": []}
      )
      entry["std"].append(v.std())
      entry["absmax"].append(np.abs(v).max())
      entry["mean"].append(v.mean())
  return stats


@pytest.fixture(scope="module", params=GOLDEN_FILES)
def golden_and_ours(request):
  golden = json.loads((GOLDENS / request.param).read_text())
  return golden, _our_init_stats(golden)


def test_goldens_are_the_two_scan_models():
  sizes = [json.loads((GOLDENS / f).read_text())["sizes"] for f in GOLDEN_FILES]
  assert [s.get("positions", "relative") for s in sizes] == [
      "relative",
      "absolute",
  ]
  assert (
      sizes[1]["scaling"] == "ped" and sizes[1]["embedding_init"] == "kaiming"
  )


def test_every_parameter_is_mapped_both_ways(golden_and_ours):
  golden, ours = golden_and_ours
  mapped = [p for name in golden["parameters"] for p in our_paths(name)]
  assert sorted(mapped) == sorted(ours), (
      sorted(set(ours) - set(mapped)),
      sorted(set(mapped) - set(ours)),
  )


def test_initial_distributions_equal_theirs(golden_and_ours):
  golden, ours = golden_and_ours
  for name, theirs in golden["parameters"].items():
    t_std, t_max = np.mean(theirs["std"]), np.max(theirs["absmax"])
    for path in our_paths(name):
      o = ours[path]
      what = f"{name} -> {'/'.join(path)}"
      if "embedding" in name:  # our rows: words + 4 specials
        assert o["shape"][1] == theirs["shape"][1], what
      elif name == "output_map.bias":  # one per target row
        assert o["shape"] == (golden["sizes"]["tgt_words"] + SPECIALS,), what
      elif name.endswith("data_to_kv.weight"):  # their k and v stacked
        assert 2 * int(np.prod(o["shape"])) == int(
            np.prod(theirs["shape"])
        ), what
      else:
        assert int(np.prod(o["shape"])) == int(np.prod(theirs["shape"])), what
      o_std, o_max = np.mean(o["std"]), np.max(o["absmax"])
      if t_std == 0.0:  # constants: zeros, or LayerNorm ones
        assert o_std == 0.0 and o_max == pytest.approx(t_max), what
        continue
      size = int(np.prod(o["shape"]))
      tol = 0.05 if size >= 4096 else 0.2
      assert o_std == pytest.approx(t_std, rel=tol), (what, o_std, t_std)
      if "embedding" in name and golden["sizes"].get("embedding_init") == (
          "kaiming"
      ):
        continue  # Normal draws: no bound; the std above decides.
      # Uniform draws: the largest |value| of 5 seeds sits at the bound; the
      # embeddings' bound moves by < 1% with our 2 extra rows.
      assert o_max == pytest.approx(t_max, rel=0.03), (what, o_max, t_max)


@pytest.mark.slow
def test_flax_init_is_an_option():
  """init='flax' keeps Flax's defaults (zero FFN biases)."""
  config = Seq2SeqConfig(
      src_vocab_size=9,
      tgt_vocab_size=7,
      d_model=16,
      num_heads=2,
      ffn_dim=32,
      positions="relative",
      init="flax",
  )
  src = jnp.ones((1, 3), jnp.int32)
  params = Seq2SeqTransformer(config).init(
      jax.random.PRNGKey(0), src, None, src
  )["params"]
  assert not np.any(params["encoder"]["layers_0"]["ff"]["hidden"]["bias"])
  with pytest.raises(ValueError, match="init.*'csordas'"):
    Seq2SeqConfig(src_vocab_size=9, tgt_vocab_size=7, init="torch")
