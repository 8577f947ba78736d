"""Parameter initialisers: Flax's or the authors' (seq2seq Transformer, RT).

`INITS` names the schemes a `Seq2SeqConfig.init` may take:

  'csordas'  Csordas et al.'s released code ([C21],
             RobertCsordas/transformer_generalization), i.e. PyTorch's
             `reset_parameters` of their layers:
               attention maps (q, k, v, output)  Xavier uniform over the
                 flattened D x (H*K) map, except in relative self-attention:
                 their `FixedRelativeMultiheadAttention` never calls its
                 `reset_parameters`, so its q, k, v, position and output
                 maps keep PyTorch's Linear default U(-1/sqrt(fan_in),
                 1/sqrt(fan_in)) (tests/fidelity/goldens/cs_init_scan.json
                 records their initial statistics);
               feed-forward  Xavier uniform, gain sqrt(2) (ReLU) on the
                 first map, gain 1 on the second; biases PyTorch's Linear
                 default U(-1/sqrt(fan_in), 1/sqrt(fan_in));
               untied output map  Xavier uniform, bias as PyTorch's Linear;
               embeddings  by the variant (their `transformer_mixin.py`):
                 relative positions Xavier uniform; absolute positions by
                 the scaling: TEU ('opennmt') Xavier uniform, PED
                 ('scaledinit') Kaiming normal N(0, 2/D), none PyTorch's
                 N(0, 1).
  'flax'     Flax's defaults: LeCun-normal kernels, zero biases; embeddings
             by `positional_encoding.embedding_init` ([C21] appendix D as
             the paper prints it).

`RT_INITS` names the schemes an `RTConfig.init` (the Relational
Transformer's layers) may take:

  'diao'     Diao & Loynd's released code (CameronDiao/relational-transformer,
             Haiku): every kernel is Haiku's `hk.Linear` default,
             TruncatedNormal(stddev = 1/sqrt(fan_in)) cut at +-2 stddev
             (std 0.88/sqrt(fan_in)), biases zero, where fan_in is the width
             of the input as *their* code concatenates it: a linear map that
             we apply per block (the edge update's W_4 over [e_ij, e_ji, n_i,
             n_j], the processor's edge input over [edge_fts, edge_hidden,
             graph_fts]) draws every block with the fan-in of the whole.
  'flax'     Flax's `lecun_normal` per kernel (std 1/sqrt(fan_in) of that
             kernel's own input), biases zero.

`ET_INITS` names the schemes an `ETConfig.init` (the Edge Transformer's
layers, and the embeddings and heads of the models built on them) may take:

  'bergen'   Bergen et al.'s released code (bergen/EdgeTransformer, PyTorch):
             their encoders' `_reset_parameters` draws every parameter of two
             or more dimensions Xavier uniform (the triangular attention's
             maps, the FFN, and the embeddings inside the encoder: CLUTRR's
             edge labels, COGS' relative positions); their biases keep
             PyTorch's Linear default U(-1/sqrt(fan_in), 1/sqrt(fan_in));
             the COGS word embedding, outside the encoder, PyTorch's N(0, 1);
             the output layers (COGS' per-field classifiers and parent
             scorer, CLUTRR's MLP) PyTorch's Linear defaults.
  'flax'     Flax's defaults: LeCun-normal kernels, zero biases, embeddings
             N(0, 1/D).

Xavier on a Flax `DenseGeneral` kernel is over the flattened 2-D map (Flax
initialises DenseGeneral kernels in their flattened shape), which is the
fan of their `torch.nn.Linear`.
"""

import math
from typing import Callable, Dict

import flax.linen as nn
import jax

from relational_jax.layers import positional_encoding as pe_lib
from relational_jax.layers import shapes

INITS = ("csordas", "flax")
RT_INITS = ("diao", "flax")
ET_INITS = ("bergen", "flax")
Initializer = Callable


def haiku_linear_kernel(fan_in: int) -> Initializer:
  """Haiku's `hk.Linear` default kernel initialiser for an input `fan_in`
  wide: TruncatedNormal(stddev=1/sqrt(fan_in)), cut at +-2 stddev (the
  stddev is the untruncated distribution's, as in Haiku)."""
  if fan_in < 1:
    raise ValueError(f"fan_in must be a positive int, got {fan_in!r}.")
  return nn.initializers.truncated_normal(stddev=1.0 / math.sqrt(fan_in))


def rt_kernel(init: str, fan_in: int) -> Initializer:
  """Kernel initialiser of an RT linear map (`RT_INITS`): with 'diao', the
  authors' Haiku default over the concatenated input `fan_in` wide; with
  'flax', LeCun normal over the kernel's own input axis."""
  shapes.check_choice(init, RT_INITS, "init")
  if init == "flax":
    return nn.linear.default_kernel_init
  return haiku_linear_kernel(fan_in)


def xavier_uniform(gain: float = 1.0) -> Initializer:
  """U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out)) (PyTorch's
  `xavier_uniform_`)."""
  return nn.initializers.variance_scaling(gain**2, "fan_avg", "uniform")


def torch_linear_bias(fan_in: int) -> Initializer:
  """PyTorch's `Linear` bias default: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
  bound = 1.0 / math.sqrt(fan_in)

  def init(key, shape, dtype=jax.numpy.float32):
    return jax.random.uniform(key, shape, dtype, -bound, bound)

  return init


def torch_linear_kernel() -> Initializer:
  """PyTorch's `Linear` weight default, kaiming_uniform(a=sqrt(5)):
  U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
  return nn.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform")


def attention_kernel(init: str, relative: bool) -> Initializer:
  """Kernel initialiser of the attention maps W_q, W_k, W_v, (W_R,) W_O of
  a relative (`relative=True`) or a plain multi-head attention."""
  shapes.check_choice(init, INITS, "init")
  if init == "flax":
    return nn.linear.default_kernel_init
  return torch_linear_kernel() if relative else xavier_uniform()


def feed_forward(
    init: str, d_model: int, ffn_dim: int
) -> Dict[str, Initializer]:
  """{hidden,out}_{kernel,bias} initialisers of the D -> F -> D block."""
  shapes.check_choice(init, INITS, "init")
  if init == "flax":
    return {
        "hidden_kernel": nn.linear.default_kernel_init,
        "hidden_bias": nn.initializers.zeros,
        "out_kernel": nn.linear.default_kernel_init,
        "out_bias": nn.initializers.zeros,
    }
  return {
      "hidden_kernel": xavier_uniform(math.sqrt(2.0)),
      "hidden_bias": torch_linear_bias(d_model),
      "out_kernel": xavier_uniform(),
      "out_bias": torch_linear_bias(ffn_dim),
  }


def _flax_linear() -> Dict[str, Initializer]:
  """kernel / bias initialisers of Flax's `nn.Dense`: LeCun normal, zeros."""
  return {
      "kernel": nn.linear.default_kernel_init,
      "bias": nn.initializers.zeros,
  }


def output_map(init: str, d_model: int) -> Dict[str, Initializer]:
  """kernel / bias initialisers of the untied D -> V output layer."""
  shapes.check_choice(init, INITS, "init")
  if init == "flax":
    return _flax_linear()
  return {"kernel": xavier_uniform(), "bias": torch_linear_bias(d_model)}


def embedding(
    init: str, scaling: str, positions: str, d_model: int
) -> Initializer:
  """Initialiser of a VxD token-embedding table (module docstring)."""
  shapes.check_choice(init, INITS, "init")
  shapes.check_choice(scaling, pe_lib.SCALINGS, "scaling")
  if init == "flax":
    return pe_lib.embedding_init(scaling, d_model)
  if positions == "relative" or scaling == "teu":
    return xavier_uniform()
  if scaling == "ped":
    return nn.initializers.normal(stddev=math.sqrt(2.0 / d_model))
  return nn.initializers.normal(stddev=1.0)


def et_linear(init: str, fan_in: int) -> Dict[str, Initializer]:
  """kernel / bias initialisers of a linear map inside an Edge Transformer
  layer whose input is `fan_in` wide (`ET_INITS`)."""
  shapes.check_choice(init, ET_INITS, "init")
  if init == "flax":
    return _flax_linear()
  return {"kernel": xavier_uniform(), "bias": torch_linear_bias(fan_in)}


def et_output(init: str, fan_in: int) -> Dict[str, Initializer]:
  """kernel / bias initialisers of an output layer on Edge Transformer
  states `fan_in` wide: PyTorch's Linear defaults under 'bergen'."""
  shapes.check_choice(init, ET_INITS, "init")
  if init == "flax":
    return _flax_linear()
  return {"kernel": torch_linear_kernel(), "bias": torch_linear_bias(fan_in)}


def et_embedding(init: str, inside_encoder: bool) -> Initializer:
  """Initialiser of an embedding table feeding an Edge Transformer: under
  'bergen' Xavier uniform for the tables their encoders own (edge labels,
  relative positions), PyTorch's N(0, 1) for a token embedding outside
  them; Flax's `nn.Embed` default under 'flax'."""
  shapes.check_choice(init, ET_INITS, "init")
  if init == "flax":
    return nn.linear.default_embed_init
  return xavier_uniform() if inside_encoder else nn.initializers.normal(1.0)
