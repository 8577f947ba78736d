"""The authors' goldens and our side of each: load a golden, run ours on it.

Goldens: `scripts/make_peer_goldens.py` ran the authors' own code once, on
seeded random inputs and seeded random parameters, and stored inputs, their
parameters (under their own names) and their outputs in
tests/fidelity/goldens/*.npz (`GOLDEN_DIR`; goldens/README.json names the
reference commits and the differences last measured). `load(case)` reads
one; `RUNNERS[case](meta, inputs, params)` maps their parameters onto our
parameter trees with the library's converters (`relational_jax.interop`:
rt_haiku, et_torch, csordas_torch, floyd_torch, g2g_torch, where the mapping is
documented) and runs ours; `max_abs_diffs(case)` compares the two in fp32
(`TOLERANCE`; `WHOLE_MODEL_TOLERANCE` for `WHOLE_MODEL_CASES`). Used by
tests/fidelity/test_peer_goldens.py (ours equals the authors' code, case by
case), by
`experiments.bench.gpu_check` (the same at each matmul precision on an
accelerator) and by `scripts/make_peer_goldens.py --record`.

The cases: our RT layer, stack and CLRS processor against the RT authors'
Haiku code (github.com/CameronDiao/relational-transformer); our ET
triangular attention, layer and stacks (layout='released_code') against the
ET authors' PyTorch code (github.com/bergen/EdgeTransformer); our seq2seq
Transformer with its default (authors') options against Csordas et al.'s
TransformerEncDecModel (github.com/RobertCsordas/transformer_generalization;
relative and relative Universal, teacher forcing and greedy decoding); our
pivotal attention (`relational_jax.layers.pivotal.pivotal_attention`,
chunked) and FloydNet block (`relational_jax.models.floyd.
PivotalAttentionBlock`) against the FloydNet authors' PyTorch
`pivotal_attention` and `PivotalAttentionBlock` (github.com/ocx-lab/FloydNet),
outputs and the gradients of sum(y * dy) for every input, mask and parameter
(pivotal_*), and our `FloydTransformer` with a node mask inside their example
model (example/common/model.py FloydNet: adjacency embedding, blocks, graph /
node / edge heads; floyd_model_*); our relation-aware attention and pairwise edge scorer
(`relational_jax.layers.relation_aware`, with the options that give the
released code's function, `g2g_torch.ATTENTION_OPTIONS` / `SCORER_OPTIONS`)
against the Graph2Graph Transformer authors' graph-input attention (both of
their parsers' copies) and Relation classifier
(github.com/alirezamshi-zz/G2GTr; outputs and every gradient, g2g_*); our
CLUTRR RAT (`relational_jax.models.clutrr.ClutrrRAT`, tied and untied)
against the ET authors' RAT baseline (clutrr/rat.py; logits, loss and every
parameter's gradient, rat_clutrr*) and our CLUTRR Edge Transformer
(`ClutrrEdgeTransformer`) against their whole CLUTRR model (clutrr/model.py:
encoder and output MLP; logits, loss and every parameter's gradient,
et_clutrr) and our graph-COGS model (`CogsGraphEdgeTransformer`) against
their whole COGS parser (cogs/model.py `Parser`: parent scores, label
logits, loss, every gradient, et_cogs_parser); and our whole CLRS model
(processors.CarryModel configured by experiments/compare/clrs_rt.py's
our_config) against their BaselineModel
(rt_net_*: training loss and every gradient, with teacher forcing and with
noisy teacher forcing under a fixed force mask, and evaluation predictions;
differences scaled by the output's magnitude, see max_abs_diffs).

Dropout: their RT code runs hk.dropout at rate 0.0 (tfm_dropout_rate is fixed
at 0.0 in their RT processor); their ET modules were built with dropout 0.1
and run in eval() mode. Ours is built with dropout_rate 0.1 and run
deterministically (deterministic=True / is_training=False), so a match also
shows that our dropout is off at evaluation.

LayerNorm epsilon: both references use 1e-5 (hk.LayerNorm's and
torch.nn.LayerNorm's default); ours must too (`ln_epsilon`, default 1e-5).
"""

import dataclasses
import functools
import json
import pathlib

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax

from relational_jax.interop import csordas_torch
from relational_jax.interop import et_torch
from relational_jax.interop import floyd_torch
from relational_jax.interop import g2g_torch
from relational_jax.interop import rt_haiku
from relational_jax.interop import select
from relational_jax.interop import to_authors
from relational_jax.interop.common import Reader
from relational_jax.interop.common import torch_linear
from relational_jax.layers.pivotal import pivotal_attention
from relational_jax.layers.relation_aware import PairwiseEdgeScorer
from relational_jax.layers.relation_aware import RelationAwareAttention
from relational_jax.layers.relational import RelationalTransformerLayer
from relational_jax.layers.triangular import TriangularAttention
from relational_jax.models.clutrr import ClutrrEdgeTransformer
from relational_jax.models.clutrr import ClutrrRAT
from relational_jax.models.clutrr import RATConfig
from relational_jax.models.cogs_graph import CogsGraphEdgeTransformer
from relational_jax.models.cogs_graph import LABEL_FIELDS
from relational_jax.models.edge_transformer import EdgeTransformer
from relational_jax.models.edge_transformer import ETConfig
from relational_jax.models.edge_transformer import EdgeTransformerLayer
from relational_jax.models.edge_transformer import GraphEdgeEmbedding
from relational_jax.models.edge_transformer import SequenceEdgeEmbedding
from relational_jax.models.et_seq2seq import EdgeTransformerSeq2Seq
from relational_jax.models.et_seq2seq import ETSeq2SeqConfig
from relational_jax.models.floyd import FloydConfig
from relational_jax.models.floyd import FloydTransformer
from relational_jax.models.floyd import PivotalAttentionBlock
from relational_jax.models.relational_transformer import RelationalTransformer
from relational_jax.models.relational_transformer import RTConfig
from relational_jax.models.seq2seq import Seq2SeqConfig
from relational_jax.models.seq2seq import Seq2SeqTransformer
from relational_jax.training.clrs import fixed_data

REPO = pathlib.Path(__file__).resolve().parents[2]
GOLDEN_DIR = REPO / "tests" / "fidelity" / "goldens"  # Data, not code.
TOLERANCE = 1e-5
# Whole models (WHOLE_MODEL_CASES: scaled differences, see max_abs_diffs).
# rt_net_*: gradients through several unrolled steps sum more fp32 roundings
# (measured: up to 8.5e-6 scaled); a real difference (e.g. dm-clrs 2.0.3's
# stop-gradient on fed-back scalar hints) is 2.6e-2. floyd_model_padded: the
# heads' sums over pairs reach |1000| (measured: 2.2e-5 scaled, their own
# fp32 run is 1.8e-5 from their float64 one; in float64, with the attention
# core's fp32 statistics made float64, ours equals theirs to 5e-14). The
# same code on another host measured 3.2e-5, and 5.3e-5 under the test
# suite's cheap XLA CPU flags (tests/conftest.py): the bound is 1e-4, still
# 260x below the real difference above.
WHOLE_MODEL_TOLERANCE = 1e-4
DROPOUT = 0.1  # ours; must be inactive when deterministic

RT_CASES = (
    "rt_layer",
    "rt_layer_no_edge_update",
    "rt_stack",
    "rt_processor_cat",
    "rt_processor_core",
)
RT_NET_CASES = ("rt_net_binary_search", "rt_net_bellman_ford")
ET_CASES = (
    "et_attention",
    "et_attention_value_ablation",
    "et_attention_attention_ablation",
    "et_layer",
    "et_stack_untied_sequence",
    "et_stack_tied_graph",
    "et_stack_untied_graph",
)
CS_CASES = (
    "cs_relative_universal",
    "cs_relative",
    "cs_absolute",
    "cs_absolute_ped",
    "cs_absolute_teu",
    "cs_universal_ped",
)
PIVOTAL_CASES = (
    "pivotal_fn",
    "pivotal_fn_bool_mask_cap",
    "pivotal_fn_additive_mask_scale",
    "pivotal_fn_rectangular",
    "pivotal_block_pre",
    "pivotal_block_post_rmsnorm_bias_gelu",
    "pivotal_block_pre_affine_silu_no_mix",
    "pivotal_block_post_none_no_ffn",
    "floyd_model_padded",
)
G2G_CASES = (
    "g2g_attention",
    "g2g_statetr_attention",
    "g2g_relation_classifier",
)
RAT_CASES = ("rat_clutrr", "rat_clutrr_untied")
ET_CLUTRR_CASES = ("et_clutrr", "et_cogs_parser")
ET_SEQ2SEQ_CASES = ("et_cfq_seq2seq", "et_cfq_seq2seq_untied")
CASES = (
    RT_CASES
    + ET_CASES
    + CS_CASES
    + RT_NET_CASES
    + PIVOTAL_CASES
    + G2G_CASES
    + RAT_CASES
    + ET_CLUTRR_CASES
    + ET_SEQ2SEQ_CASES
)
WHOLE_MODEL_CASES = RT_NET_CASES + ("floyd_model_padded",)


def available_cases():
  return [case for case in CASES if (GOLDEN_DIR / f"{case}.npz").exists()]


def load(case):
  """Returns (meta, inputs, params, outputs) of one golden."""
  with np.load(GOLDEN_DIR / f"{case}.npz") as data:
    groups = {"input": {}, "param": {}, "output": {}}
    for key in data.files:
      if key != "meta":
        group, name = key.split("/", 1)
        groups[group][name] = data[key]
    meta = json.loads(str(data["meta"]))
  return meta, groups["input"], groups["param"], groups["output"]


def _check_tree(mapped, initialised, what):
  """Our mapped tree must have exactly the keys and shapes of our init."""
  mapped_shapes = jax.tree_util.tree_map(np.shape, mapped)
  init_shapes = jax.tree_util.tree_map(np.shape, initialised)
  assert mapped_shapes == init_shapes, (
      f"{what}: the mapped parameter tree does not match our module's "
      f"parameters.\nmapped: {mapped_shapes}\nours:   {init_shapes}"
  )


def _check_against_init(mapped, module, *args):
  """`_check_tree` of `mapped` against the parameters of `module.init` on
  `args` (named by the module's class)."""
  _check_tree(
      mapped,
      module.init(jax.random.PRNGKey(0), *args)["params"],
      type(module).__name__,
  )


# ----------------------------------------------------------------------------
# RT (Haiku reference, clrs/_src/base_modules/Basic_Transformer_jax.py and
# the processor in clrs/_src/processors.py): relational_jax.interop.rt_haiku.
# ----------------------------------------------------------------------------


def rt_config(sizes, **overrides):
  """The `RTConfig` of a golden's RT `sizes` (the authors' layer widths)."""
  return RTConfig(
      num_layers=sizes.get("num_layers", 1),
      num_heads=sizes["heads"],
      head_dim=sizes["node_width"] // sizes["heads"],
      node_ffn_dim=sizes["node_hidden"],
      edge_msg_dim=sizes["edge_hidden1"],
      edge_ffn_dim=sizes["edge_hidden2"],
      dropout_rate=DROPOUT,
      **overrides,
  )


def _run_rt_layer(meta, inputs, params):
  sizes = meta["sizes"]
  edge_update = not sizes["disable_edge_updates"]
  cfg = rt_config(sizes)
  layer = RelationalTransformerLayer(
      num_heads=cfg.num_heads,
      head_dim=cfg.head_dim,
      node_ffn_dim=cfg.node_ffn_dim,
      edge_msg_dim=cfg.edge_msg_dim,
      edge_ffn_dim=cfg.edge_ffn_dim,
      edge_update=edge_update,
      dropout_rate=DROPOUT,
  )
  nodes, edges = jnp.asarray(inputs["nodes"]), jnp.asarray(inputs["edges"])
  ours = rt_haiku.convert_layer(
      select(params, "rt_layer0/rt_layer0/"),
      sizes["heads"],
      edge_update=edge_update,
  )
  _check_against_init(ours, layer, nodes, edges)
  n, e = layer.apply({"params": ours}, nodes, edges, deterministic=True)
  return {"nodes": n, "edges": e}


def _run_rt_stack(meta, inputs, params):
  sizes = meta["sizes"]
  cfg = rt_config(sizes, edge_dim=sizes["edge_width"])
  stack = RelationalTransformer(cfg)
  nodes, edges = jnp.asarray(inputs["nodes"]), jnp.asarray(inputs["edges"])
  ours = rt_haiku.convert_stack(params, cfg)
  _check_against_init(ours, stack, nodes, edges)
  n, e = stack.apply({"params": ours}, nodes, edges, deterministic=True)
  return {"nodes": n, "edges": e}


def _run_rt_processor(meta, inputs, params):
  import processors  # pylint: disable=g-import-not-at-top  (CLRS, Haiku)

  sizes = meta["sizes"]
  graph_vec = sizes["graph_vec"]
  cfg = rt_config(sizes)

  def fn(node_fts, edge_fts, graph_fts, adj_mat, hidden, e_hidden, g_hidden):
    processor = processors.RelationalTransformerProcessor(
        sizes["node_width"], cfg, graph_vec=graph_vec, name="rt"
    )
    return processor(
        node_fts,
        edge_fts,
        graph_fts,
        adj_mat,
        hidden,
        edge_hidden=e_hidden,
        graph_hidden=g_hidden,
        return_state=True,
        is_training=False,
    )

  transformed = hk.transform(fn)
  args = [
      jnp.asarray(inputs[k])
      for k in (
          "node_fts",
          "edge_fts",
          "graph_fts",
          "adj_mat",
          "hidden",
          "e_hidden",
          "g_hidden",
      )
  ]
  initialised = transformed.init(jax.random.PRNGKey(0), *args)
  top = {module.split("/", 1)[0] for module in initialised}
  assert len(top) == 1, f"one top-level processor module expected, got {top}"
  (top,) = top
  ours = rt_haiku.convert_processor(
      select(params, "rt/"),
      cfg,
      graph_vec=graph_vec,
      graph_features=inputs["graph_fts"].shape[-1],
      module=top,
  )
  _check_tree(
      ours,
      {k: dict(v) for k, v in initialised.items()},
      "RelationalTransformerProcessor",
  )
  state = transformed.apply(ours, jax.random.PRNGKey(1), *args)
  out = {"nodes": state.nodes, "edges": state.edges}
  if graph_vec == "core":
    out["graph"] = state.graph
  return out


# ----------------------------------------------------------------------------
# RT net: their whole CLRS model (clrs/_src/baselines.py BaselineModel with
# nets.py Net) vs our processors.CarryModel, configured by the comparison's
# own translation `experiments.compare.clrs_rt.our_config` (their run.py
# flags at tiny sizes); their parameters mapped by
# relational_jax.interop.rt_haiku.convert_clrs_net (their encoder and decoder
# names are ours too: dm-clrs 2.0.3 keeps the 2022 names).
# Compared: loss and every gradient with teacher forcing on (their noise 0,
# our hint_teacher_forcing 1); evaluation (repred) raw output logits and
# per-step hint logits; loss and gradients with their noise 0.5 (ours 0.5)
# under the same fixed force mask (the golden's `force_mask`; both sides'
# (batch,)-shaped `jax.random.bernoulli` draw replaced).
# ----------------------------------------------------------------------------


def _rt_net_model(meta, noise):
  import tempfile  # pylint: disable=g-import-not-at-top
  from experiments.compare import clrs_rt  # pylint: disable=g-import-not-at-top
  from relational_jax.training.clrs import loop  # pylint: disable=g-import-not-at-top

  sizes = meta["sizes"]
  hp = dict(
      clrs_rt.AUTHORS,
      num_layers=sizes["num_layers"],
      nb_heads=sizes["nb_heads"],
      head_size=sizes["head_size"],
      node_hid_size=sizes["node_hid_size"],
      edge_hid_size_1=sizes["edge_hid_size_1"],
      edge_hid_size_2=sizes["edge_hid_size_2"],
      use_ln=sizes["use_ln"],
      graph_vec=sizes["graph_vec"],
      ptr_from_edges=sizes["ptr_from_edges"],
      hint_teacher_forcing_noise=noise,
      dropout_prob=sizes["dropout_prob"],
      batch_size=sizes["batch"],
      eval_batch_size=sizes["batch"],
  )
  config = clrs_rt.our_config(
      clrs_rt.BUDGETS["smoke"], 0, meta["algorithm"], hp
  )
  return config, loop, tempfile


def _rt_net_processor_config(meta):
  """Our processor's RTConfig at the golden's sizes (for the converter)."""
  sizes = meta["sizes"]
  return RTConfig(
      num_layers=sizes["num_layers"],
      num_heads=sizes["nb_heads"],
      head_dim=sizes["head_size"],
      node_ffn_dim=sizes["node_hid_size"],
      edge_msg_dim=sizes["edge_hid_size_1"],
      edge_ffn_dim=sizes["edge_hid_size_2"],
      edge_update=not sizes["disable_edge_updates"],
      use_ln=sizes["use_ln"],
  )


def _rt_net_feedback(meta, inputs, split):
  spec = {k: tuple(v) for k, v in meta["spec"].items()}
  arrays = {k: v for k, v in inputs.items() if k.startswith(f"{split}/")}
  return fixed_data.FixedData(spec, arrays, None, 0).feedback(split), spec


class _FixedForceMask:
  """Replaces the (batch,)-shaped jax.random.bernoulli draw (the teacher-
  forcing mask) by a fixed mask; every other draw is left alone."""

  def __init__(self, mask):
    self.mask = tuple(mask)
    self.original = jax.random.bernoulli

  def __enter__(self):
    def bernoulli(key, p=0.5, shape=None):
      if shape is not None and tuple(shape) == (len(self.mask),):
        return jnp.asarray(self.mask)
      return self.original(key, p, shape)

    jax.random.bernoulli = bernoulli

  def __exit__(self, *exc):
    jax.random.bernoulli = self.original


def _run_rt_net(meta, inputs, params):
  train, spec = _rt_net_feedback(meta, inputs, "train")
  evaluation, _ = _rt_net_feedback(meta, inputs, "eval")
  out = {}
  key = jax.random.PRNGKey(7)
  for noise, prefix in ((0.0, ""), (0.5, "noisy_")):
    config, loop, tempfile = _rt_net_model(meta, noise)
    with tempfile.TemporaryDirectory() as tmp:
      model = loop.build_model(config, spec, train, tmp)
      # Our parameter shapes, as CarryModel.init makes them (abstractly).
      shapes = jax.eval_shape(
          functools.partial(
              model.net_fn.init,
              features_list=[train.features],
              repred=True,
              algorithm_index=-1,
              return_hints=False,
              return_all_outputs=False,
          ),
          jax.random.PRNGKey(43),
      )
      tops = {
          m.split("/")[1]
          for m in shapes
          if not m.startswith(rt_haiku.ENCODERS_DECODERS)
      }
      assert len(tops) == 1, f"one processor module expected, got {tops}"
      (top,) = tops
      convert = functools.partial(
          rt_haiku.convert_clrs_net,
          config=_rt_net_processor_config(meta),
          spec=spec,
          graph_vec=meta["sizes"]["graph_vec"],
          ptr_from_edges=meta["sizes"]["ptr_from_edges"],
          processor_module=top,
      )
      ours = convert(params)
      _check_tree(
          ours,
          {
              k: {n: np.zeros(v.shape, v.dtype) for n, v in group.items()}
              for k, group in shapes.items()
          },
          "CarryModel",
      )
      ours = jax.tree_util.tree_map(jnp.asarray, ours)
      loss_and_grad = jax.jit(
          jax.value_and_grad(model._loss),  # pylint: disable=protected-access
          static_argnums=3,
      )
      if noise:
        with _FixedForceMask(meta["sizes"]["force_mask"]):
          loss, grads = loss_and_grad(ours, key, train, 0)
      else:
        loss, grads = loss_and_grad(ours, key, train, 0)
        output_preds, hint_preds = jax.jit(
            functools.partial(
                model.net_fn.apply,
                repred=True,
                algorithm_index=0,
                return_hints=True,
                return_all_outputs=False,
            )
        )(ours, key, [evaluation.features])
        for name, value in output_preds.items():
          out[f"eval_output/{name}"] = value
        for name in hint_preds[0]:
          out[f"eval_hint/{name}"] = jnp.stack([h[name] for h in hint_preds])
    out[f"{prefix}loss"] = loss
    # Our gradients under their names (every one of theirs must be there:
    # max_abs_diffs compares the sets of names).
    for name, value in to_authors(convert, params, grads).items():
      out[f"{prefix}grad/{name}"] = value
  return out


# ----------------------------------------------------------------------------
# ET (PyTorch reference, cogs/model.py and clutrr/model.py):
# relational_jax.interop.et_torch.
# ----------------------------------------------------------------------------


def _run_et_attention(meta, inputs, params, chunk_size=2, **impl_options):
  """`impl_options`: TriangularAttention's impl, block_size, interpret."""
  sizes = meta["sizes"]
  module = TriangularAttention(
      num_heads=sizes["heads"],
      ablation=sizes["ablation"],
      chunk_size=chunk_size,
      **impl_options,
  )
  x = jnp.asarray(inputs["x"])
  ours = et_torch.convert_attention(
      params, sizes["heads"], ablation=sizes["ablation"]
  )
  _check_against_init(ours, module, x)
  return {"y": module.apply({"params": ours}, x)}


def _run_et_layer(meta, inputs, params, chunk_size=2):
  sizes = meta["sizes"]
  assert sizes["ff_factor"] == 4, "ours: ffn_dim=None is 4 x D"
  module = EdgeTransformerLayer(
      num_heads=sizes["heads"],
      layout="released_code",
      chunk_size=chunk_size,
      dropout_rate=DROPOUT,
  )
  x = jnp.asarray(inputs["x"])
  ours = et_torch.convert_layer(params, sizes["heads"])
  _check_against_init(ours, module, x)
  return {"y": module.apply({"params": ours}, x, deterministic=True)}


def _et_stack(meta):
  sizes = meta["sizes"]
  assert sizes["ff_factor"] == 4, "ours: ffn_dim=None is 4 x D"
  return EdgeTransformer(
      ETConfig(
          num_layers=sizes["num_layers"],
          num_heads=sizes["heads"],
          head_dim=sizes["width"] // sizes["heads"],
          tied=sizes["tied"],
          layout="released_code",
          dropout_rate=DROPOUT,
      )
  )


def _run_et_stack_sequence(meta, inputs, params):
  sizes = meta["sizes"]
  max_distance = sizes["max_relative_distance"]
  embed = SequenceEdgeEmbedding(
      vocab_size=sizes["vocab"],
      features=sizes["width"],
      max_distance=max_distance,
  )
  stack = _et_stack(meta)
  converted = et_torch.convert_sequence_encoder(
      params, stack.config, token_embedding=inputs["token_table"]
  )
  embed_params, ours = converted["embed"], converted["et"]
  tokens = jnp.asarray(inputs["tokens"])
  _check_against_init(embed_params, embed, tokens)
  x = embed.apply({"params": embed_params}, tokens)
  _check_against_init(ours, stack, x)
  return {"y": stack.apply({"params": ours}, x, deterministic=True)}


def _run_et_stack_graph(meta, inputs, params):
  """Padded graphs: their mask drops triangles (i, l, j) with any padded node,
  ours drops padded pivots l only, so rows and columns of padded nodes differ
  by design and only the real x real block of each graph is compared."""
  sizes = meta["sizes"]
  embed = GraphEdgeEmbedding(
      num_labels=sizes["num_labels"], features=sizes["width"]
  )
  labels = jnp.asarray(inputs["labels"])
  stack = _et_stack(meta)
  converted = et_torch.convert_graph_encoder(params, stack.config)
  embed_params, ours = converted["embed"], converted["et"]
  _check_against_init(embed_params, embed, labels)
  x = embed.apply({"params": embed_params}, labels)
  node_mask = jnp.asarray(~inputs["padding"])
  _check_against_init(ours, stack, x, node_mask)
  return {"y": stack.apply({"params": ours}, x, node_mask, deterministic=True)}


# ----------------------------------------------------------------------------
# Csordas et al.'s TransformerEncDecModel (relative variants; absolute with
# scale_mode none / down / opennmt) -> our Seq2SeqTransformer (positions
# 'relative' or 'absolute', scaling none / ped / teu), defaults otherwise:
# relational_jax.interop.csordas_torch.
# ----------------------------------------------------------------------------


def _run_cs_model(meta, inputs, params):
  """Teacher forcing and greedy decoding (fed every step's argmax, for
  greedy_len steps, as their run_greedy), from the inputs their interface
  builds: [SOS] src [EOS] on the encoder, [SOS/EOS] y on the decoder."""
  sizes = meta["sizes"]
  config = Seq2SeqConfig(
      src_vocab_size=sizes["src_rows"],
      tgt_vocab_size=sizes["tgt_rows"],
      d_model=sizes["width"],
      num_heads=sizes["heads"],
      ffn_dim=sizes["ffn"],
      num_encoder_layers=sizes["num_layers"],
      num_decoder_layers=sizes["num_layers"],
      # Goldens before the absolute ones hold neither (relative, none).
      positions=sizes.get("positions", "relative"),
      scaling=sizes.get("scaling", "none"),
      tied=sizes["universal"],
      tie_embeddings=sizes["tied_embedding"],
      dropout_rate=DROPOUT,
  )
  model = Seq2SeqTransformer(config)
  src_eos = inputs["src_eos"]
  num_b = src_eos.shape[0]
  src = np.concatenate(
      [np.full((num_b, 1), sizes["encoder_sos"]), src_eos], axis=1
  ).astype(np.int32)
  src_mask = np.arange(src.shape[1])[None] < (inputs["src_len"] + 2)[:, None]
  sos = sizes["decoder_sos_eos"]
  tgt_in = np.concatenate(
      [np.full((num_b, 1), sos), inputs["tgt_eos"][:, :-1]], axis=1
  ).astype(np.int32)
  ours = csordas_torch.convert_model(params, config)
  _check_against_init(ours, model, src, src_mask, tgt_in)
  variables = {"params": ours}
  logits = model.apply(variables, src, src_mask, tgt_in)
  memory, memory_mask = model.apply(
      variables, src, src_mask, method=Seq2SeqTransformer.encode
  )
  cache = model.init_cache(num_b, sizes["greedy_len"])
  last = np.full((num_b, 1), sos, np.int32)
  steps = []
  for _ in range(sizes["greedy_len"]):
    step_logits, cache = model.apply(
        variables,
        memory,
        memory_mask,
        last,
        cache,
        method=Seq2SeqTransformer.decode_step,
    )
    steps.append(step_logits[:, 0])
    last = np.asarray(jnp.argmax(step_logits, axis=-1), np.int32)
  greedy_logits = jnp.stack(steps, axis=1)
  tokens = np.asarray(jnp.argmax(greedy_logits, axis=-1), np.int32)
  # Their out_len: steps before the first SOS/EOS (all steps if none).
  ended = tokens == sos
  lengths = np.where(ended.any(1), ended.argmax(1), tokens.shape[1]).astype(
      np.int32
  )
  return {
      "logits": logits,
      "greedy_logits": greedy_logits,
      "greedy_tokens": tokens,
      "greedy_len": lengths,
  }


# ----------------------------------------------------------------------------
# FloydNet (PyTorch reference, src/floydnet/functional.py and transformer.py):
# our pivotal attention (chunked: 2 pivots per chunk, which does not divide
# the golden's 5) and block; gradients of sum(y * dy) by jax.vjp, the block's
# under their parameter names (relational_jax.interop.floyd_torch).
# ----------------------------------------------------------------------------

_PIVOTAL_NAMES = ("q_ik", "k_ij", "k_jk", "v_ij", "v_jk")


def _run_pivotal_fn(meta, inputs, params, chunk_size=2, **impl_options):
  """`impl_options`: pivotal_attention's impl, block_size, interpret."""
  del params
  mask = inputs.get("attn_mask")
  additive = mask is not None and mask.dtype != np.bool_
  args = [jnp.asarray(inputs[n]) for n in _PIVOTAL_NAMES]
  if additive:
    args.append(jnp.asarray(mask))

  def fn(*args):
    attn_mask = args[5] if additive else mask
    return pivotal_attention(
        *args[:5],
        attn_mask=attn_mask,
        chunk_size=chunk_size,
        **meta["options"],
        **impl_options,
    )

  y, vjp = jax.vjp(fn, *args)
  grads = vjp(jnp.asarray(inputs["dy"]))
  out = {"y": y}
  for name, grad in zip(_PIVOTAL_NAMES + ("attn_mask",), grads):
    out[f"grad/{name}"] = grad
  return out


def _floyd_config(meta):
  sizes, options = meta["sizes"], meta["options"]
  return FloydConfig(
      num_layers=1,
      num_heads=sizes["heads"],
      head_dim=sizes["width"] // sizes["heads"],
      ffn_expansion_ratio=options.get("ffn_expansion_ratio", 4),
      dropout_rate=DROPOUT,
      use_bias=options.get("bias", False),
      norm_position=options.get("norm_position", "pre"),
      activation=options.get("activation_fn", "relu"),
      norm=options.get("norm_fn", "layernorm"),
      symmetric_mix=options.get("enable_symmetric_mix", True),
      use_ffn=options.get("enable_ffn", True),
      chunk_size=2,
  )


def _run_pivotal_block(meta, inputs, params):
  """Their attn_mask is passed as it is (our attn_mask argument); see
  tests/layers/test_pivotal.py for our node mask against it."""
  config = _floyd_config(meta)
  block = PivotalAttentionBlock.from_config(config)
  x = jnp.asarray(inputs["x"])
  mask = inputs.get("attn_mask")
  convert = lambda p: floyd_torch.convert_block(p, config)
  ours = convert(params)
  _check_against_init(ours, block, x, None, mask)
  ours = jax.tree_util.tree_map(jnp.asarray, ours)
  apply = lambda p, x: block.apply(
      {"params": p}, x, None, mask, deterministic=True
  )
  y, vjp = jax.vjp(apply, ours, x)
  grad_params, grad_x = vjp(jnp.asarray(inputs["dy"]))
  out = {"y": y, "grad/x": grad_x}
  for name, value in to_authors(convert, params, grad_params, ".").items():
    out[f"grad/{name}"] = value
  return out


def _floyd_model_convert(params, config):
  """Their FloydNet model's state dict -> {'stack': our FloydTransformer's
  params (floyd_torch.convert_stack), 'emb_adj': the 2 x D table, 'head_{g,
  v,e}': Dense trees}; every name of theirs is used."""
  reader = Reader(params, "FloydNet model", ".")
  tree = {
      "emb_adj": reader.take("emb_adj.weight", (2, config.edge_width)),
      **{f"head_{h}": torch_linear(reader, f"head_{h}.net") for h in "gve"},
  }
  blocks = {
      k: reader.take(k) for k in reader.names() if k.startswith("blocks.")
  }
  reader.finish()
  tree["stack"] = floyd_torch.convert_stack(blocks, config)
  return tree


def _run_floyd_model(meta, inputs, params, **config_options):
  """Their example model: x = E_adj[adj] on real pairs (zero elsewhere),
  our FloydTransformer with the node mask (their attn_mask
  ~pair_mask[:, None, :, None, :] and the pair-mask product after each
  block), then their heads: linear maps of sum_ij x_ij (g), sum_j x_ij +
  x_ji (v) and x_ij (e). The embedding and heads are a lookup and three
  linear maps, written here; the golden checks the stack end to end, padded,
  with every parameter's gradient. `config_options`: FloydConfig fields
  (e.g. impl='pallas_fused')."""
  sizes = meta["sizes"]
  config = FloydConfig(
      num_layers=sizes["depth"],
      num_heads=sizes["heads"],
      head_dim=sizes["width"] // sizes["heads"],
      dropout_rate=DROPOUT,
      activation=meta["options"]["activation_fn"],
      norm=meta["options"]["norm_fn"],
      use_ffn=meta["options"]["enable_ffn"],
      chunk_size=2,
  )
  config = dataclasses.replace(config, **config_options)
  stack = FloydTransformer(config)
  node_BxN = jnp.asarray(inputs["node_mask"])
  pair_BxNxNx1 = (node_BxN[:, :, None] & node_BxN[:, None, :])[..., None]
  adj_BxNxN = jnp.asarray(inputs["adj"])
  convert = lambda p: _floyd_model_convert(p, config)
  ours = jax.tree_util.tree_map(jnp.asarray, convert(params))
  x0 = jnp.zeros(adj_BxNxN.shape + (config.edge_width,))
  _check_tree(
      ours["stack"],
      stack.init(jax.random.PRNGKey(0), x0, node_BxN)["params"],
      "FloydTransformer",
  )
  head = lambda p, z: z @ p["kernel"] + p["bias"]

  def apply(p):
    x_BxNxNxD = jnp.where(pair_BxNxNx1, p["emb_adj"][adj_BxNxN], 0.0)
    x_BxNxNxD = stack.apply(
        {"params": p["stack"]}, x_BxNxNxD, node_BxN, deterministic=True
    )
    return {
        "pred_g": head(p["head_g"], x_BxNxNxD.sum(axis=(1, 2))),
        "pred_v": head(
            p["head_v"], x_BxNxNxD.sum(axis=1) + x_BxNxNxD.sum(axis=2)
        ),
        "pred_e": head(p["head_e"], x_BxNxNxD),
    }

  preds, vjp = jax.vjp(apply, ours)
  (grads,) = vjp({k: jnp.asarray(inputs[f"dy_{k[-1]}"]) for k in preds})
  out = dict(preds)
  for name, value in to_authors(convert, params, grads, ".").items():
    out[f"grad/{name}"] = value
  return out


# ----------------------------------------------------------------------------
# G2G (PyTorch reference, senttr/parser/utils/graph.py, statetr/model.py,
# senttr/parser/parser.py): RelationAwareAttention and PairwiseEdgeScorer
# with the released code's options, their parameters by
# relational_jax.interop.g2g_torch; gradients of sum(y * dy) by jax.vjp,
# the parameters' under their names (statetr's relation tables left out:
# padding_idx=0 gives their row 0 no gradient).
# ----------------------------------------------------------------------------


def _vjp_outputs(apply, ours, x, x_name, dy, convert, params, left_out=()):
  y, vjp = jax.vjp(apply, ours, x)
  grad_params, grad_x = vjp(jnp.asarray(dy))
  out = {"y": y, f"grad/{x_name}": grad_x}
  for name, value in to_authors(convert, params, grad_params, ".").items():
    if name not in left_out:
      out[f"grad/{name}"] = value
  return out


def _run_g2g_attention(meta, inputs, params):
  sizes = meta["sizes"]
  attention = RelationAwareAttention(
      d_model=sizes["width"],
      num_heads=sizes["heads"],
      num_relations=sizes["relations"],
      dropout_rate=DROPOUT,
      **g2g_torch.ATTENTION_OPTIONS,
  )
  x = jnp.asarray(inputs["x"])
  relations = jnp.asarray(inputs["relations"])
  mask = jnp.asarray(inputs["mask"])
  convert = lambda p: g2g_torch.convert_attention(p, sizes["heads"])
  ours = convert(params)
  _check_against_init(ours, attention, x, relations, mask)
  apply = lambda p, x: attention.apply(
      {"params": p}, x, relations, mask, deterministic=True
  )
  return _vjp_outputs(
      apply,
      jax.tree_util.tree_map(jnp.asarray, ours),
      x,
      "x",
      inputs["dy"],
      convert,
      params,
      meta["grads_left_out"],
  )


def _run_g2g_classifier(meta, inputs, params):
  sizes = meta["sizes"]
  scorer = PairwiseEdgeScorer(
      num_labels=sizes["labels"],
      hidden_dim=sizes["width"],
      **g2g_torch.SCORER_OPTIONS,
  )
  h = jnp.asarray(inputs["h"])
  convert = g2g_torch.convert_relation_classifier
  ours = convert(params)
  _check_against_init(ours, scorer, h)
  apply = lambda p, h: scorer.apply({"params": p}, h)
  return _vjp_outputs(
      apply,
      jax.tree_util.tree_map(jnp.asarray, ours),
      h,
      "h",
      inputs["dy"],
      convert,
      params,
  )


# ----------------------------------------------------------------------------
# The ET authors' CFQ encoder-decoder (cfq-semantic-parsing/model.py) -> our
# EdgeTransformerSeq2Seq with first_token_vectors=True:
# relational_jax.interop.et_torch.convert_cfq_seq2seq. Teacher-forced logits
# (their decoder inputs: the labels shifted right after their start token,
# -100 read as pad; no target mask, as theirs) and their loss.
# ----------------------------------------------------------------------------


def et_cfq_config(sizes) -> ETSeq2SeqConfig:
  """Our config of an et_cfq_seq2seq golden's `sizes` (their EdgeConfig)."""
  d = sizes["width"]
  return ETSeq2SeqConfig(
      src_vocab_size=sizes["vocab"],
      tgt_vocab_size=sizes["vocab"],
      et=ETConfig(
          num_layers=sizes["num_layers"],
          num_heads=sizes["heads"],
          head_dim=d // sizes["heads"],
          ffn_dim=sizes["expand_ff"] * d,
          tied=sizes["tied"],
          layout="released_code",
          dropout_rate=DROPOUT,
      ),
      num_decoder_layers=sizes["num_layers"],
      max_distance=sizes["max_rel_len"],
      pad_id=sizes["pad"],
      first_token_vectors=True,
  )


def _run_et_cfq_seq2seq(meta, inputs, params):
  sizes = meta["sizes"]
  config = et_cfq_config(sizes)
  model = EdgeTransformerSeq2Seq(config)
  src = jnp.asarray(inputs["src"])
  src_mask = jnp.asarray(inputs["attention_mask"]).astype(bool)
  labels = jnp.asarray(inputs["labels"])
  start = jnp.full((labels.shape[0], 1), sizes["start"], labels.dtype)
  tgt_in = jnp.concatenate([start, labels[:, :-1]], axis=1)
  tgt_in = jnp.where(tgt_in == -100, sizes["pad"], tgt_in)
  ours = jax.tree_util.tree_map(
      jnp.asarray, et_torch.convert_cfq_seq2seq(params, config)
  )
  _check_against_init(ours, model, src, src_mask, tgt_in)
  logits = model.apply({"params": ours}, src, src_mask, tgt_in)
  real = labels != -100
  ce = _cross_entropy(logits, jnp.where(real, labels, 0))
  return {"logits": logits, "loss": jnp.sum(ce * real) / jnp.sum(real)}


def _cross_entropy(logits, labels):
  """Cross-entropy of integer labels (their CrossEntropyLoss, per token)."""
  log_p = jax.nn.log_softmax(logits, axis=-1)
  return -jnp.take_along_axis(log_p, labels[..., None], axis=-1)[..., 0]


# ----------------------------------------------------------------------------
# The ET authors' CLUTRR RAT (clutrr/rat.py) -> our ClutrrRAT (defaults but
# for the golden's sizes): relational_jax.interop.et_torch.
# convert_clutrr_rat. Logits, their loss (mean cross-entropy) and its
# gradients under their names: the relation tables' by the VJP of
# et_torch.rat_relation_table (embedding and the two maps), every other
# parameter's by to_authors.
# ----------------------------------------------------------------------------


def rat_tree_without_tables(tree):
  """A `ClutrrRAT` parameter tree without its composed relation tables
  (every layer's attention rel_key / rel_value)."""
  return {
      k: (
          v
          if k == "head"
          else {
              **v,
              "attention": {
                  a: w
                  for a, w in v["attention"].items()
                  if a not in ("rel_key", "rel_value")
              },
          }
      )
      for k, v in tree.items()
  }


def _clutrr_case(model, convert, params, inputs):
  """Our CLUTRR `model` on a CLUTRR golden: (their parameters converted,
  checked against our init; loss_fn(tree) -> (their loss: the mean
  cross-entropy of the query labels, the logits))."""
  args = (
      jnp.asarray(inputs["labels"]),
      jnp.asarray(inputs["query"]),
      jnp.asarray(~inputs["padding_mask"]),
  )
  targets = jnp.asarray(inputs["query_labels"])
  ours = convert(params)
  _check_tree(
      ours,
      model.init(jax.random.PRNGKey(0), *args)["params"],
      type(model).__name__,
  )

  def loss_fn(tree):
    logits = model.apply({"params": tree}, *args, deterministic=True)
    log_p = jax.nn.log_softmax(logits)
    loss = -jnp.mean(jnp.take_along_axis(log_p, targets[:, None], axis=1))
    return loss, logits

  return ours, loss_fn


def _run_rat_clutrr(meta, inputs, params):
  """Their mask drops pairs with a padded node on either side (a padded
  node's row attends uniformly), ours padded keys only: equal on every real
  node, and the head reads real nodes only, so logits and gradients are
  compared whole."""
  sizes = meta["sizes"]
  assert sizes["ff_factor"] == 4, "ours: ffn_dim=None is 4 x D"
  config = RATConfig(
      num_layers=sizes["num_layers"],
      num_heads=sizes["heads"],
      d_model=sizes["width"],
      tied=sizes["tied"],
      dropout_rate=DROPOUT,
  )
  convert = lambda p: et_torch.convert_clutrr_rat(p, config)
  ours, with_tables_loss = _clutrr_case(
      ClutrrRAT(config), convert, params, inputs
  )
  names = et_torch.RAT_RELATION_NAMES
  layers = [k for k in ours if k != "head"]

  def tables(embedding, key_w, key_b, value_w, value_b):
    return (
        et_torch.rat_relation_table(embedding, key_w, key_b, config.num_heads),
        et_torch.rat_relation_table(
            embedding, value_w, value_b, config.num_heads
        ),
    )

  def loss_fn(tree, relation_params):
    rel_key, rel_value = tables(*relation_params)
    tree = {
        k: (
            v
            if k == "head"
            else {
                **v,
                "attention": {
                    **v["attention"],
                    "rel_key": rel_key,
                    "rel_value": rel_value,
                },
            }
        )
        for k, v in tree.items()
    }
    return with_tables_loss(tree)

  relation_params = tuple(jnp.asarray(params[n]) for n in names)
  # The converter's tables are rat_relation_table's (identity label rows).
  for layer in layers:
    for name, table in zip(("rel_key", "rel_value"), tables(*relation_params)):
      np.testing.assert_allclose(
          ours[layer]["attention"][name], table, rtol=0, atol=1e-6
      )
  (loss, logits), (grad_tree, grad_relation) = jax.jit(
      jax.value_and_grad(loss_fn, argnums=(0, 1), has_aux=True)
  )(jax.tree_util.tree_map(jnp.asarray, ours), relation_params)
  out = {"logits": logits, "loss": loss}
  for name, value in to_authors(
      lambda p: rat_tree_without_tables(convert(p)),
      params,
      rat_tree_without_tables(grad_tree),
      ".",
  ).items():
    out[f"grad/{name}"] = value
  for name, value in zip(names, grad_relation):
    out[f"grad/{name}"] = value
  return out


def _run_et_clutrr(meta, inputs, params, **config_options):
  """Their whole CLUTRR Edge Transformer: logits, loss and every
  parameter's gradient. Their mask drops triangles with a padded node,
  ours padded pivots only (`_run_et_stack_graph`): real pairs never read a
  padded one either way and the head reads a real pair, so all are
  compared whole. `config_options`: ETConfig fields (e.g.
  impl='pallas_fused')."""
  config = dataclasses.replace(_et_stack(meta).config, **config_options)
  convert = lambda p: et_torch.convert_clutrr_et(p, config)
  ours, loss_fn = _clutrr_case(
      ClutrrEdgeTransformer(config), convert, params, inputs
  )
  (loss, logits), grads = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))(
      jax.tree_util.tree_map(jnp.asarray, ours)
  )
  out = {"logits": logits, "loss": loss}
  for name, value in to_authors(convert, params, grads, ".").items():
    out[f"grad/{name}"] = value
  return out


def cogs_parser_model(meta) -> CogsGraphEdgeTransformer:
  """Our model of the golden et_cogs_parser (its sizes; parent scores on
  x_ij, as their parser)."""
  sizes = meta["sizes"]
  return CogsGraphEdgeTransformer(
      _et_stack(meta).config,
      vocab_size=sizes["vocab"],
      label_sizes=tuple(sizes["label_sizes"]),
      max_distance=sizes["max_relative_distance"],
      parent_from_column=False,
  )


def _run_et_cogs_parser(meta, inputs, params):
  """Their whole COGS parser: our `CogsGraphEdgeTransformer` with
  parent_from_column=False. Their parent scores put -1e3 on every pair with
  a padded node, ours -1e9 on padded candidates: ours take their fill (the
  softmax over a real row is the same); the label logits of padded tokens
  are zeroed on both sides (their padded rows are not ours, and no loss
  reads them). The loss: each head's cross-entropy averaged over the real
  tokens, summed, as theirs."""
  model = cogs_parser_model(meta)
  config = model.config
  tokens = jnp.asarray(inputs["tokens"])
  real_BxN = jnp.asarray(~inputs["padding_mask"])
  targets = {"parent": inputs["parent"], **{f: inputs[f] for f in LABEL_FIELDS}}
  convert = lambda p: et_torch.convert_cogs_parser(p, config)
  ours = convert(params)
  _check_against_init(ours, model, tokens, real_BxN)

  def loss_fn(tree):
    logits = model.apply({"params": tree}, tokens, real_BxN, deterministic=True)
    loss = 0.0
    for head, target in targets.items():
      target_BxN = jnp.where(real_BxN, jnp.asarray(target), 0)
      ce_BxN = optax.softmax_cross_entropy_with_integer_labels(
          logits[head], target_BxN
      )
      loss += jnp.sum(ce_BxN * real_BxN) / jnp.sum(real_BxN)
    pair_BxNxN = real_BxN[:, :, None] & real_BxN[:, None, :]
    out = {"parent": jnp.where(pair_BxNxN, logits["parent"], -1e3)}
    for field in LABEL_FIELDS:
      out[field] = logits[field] * real_BxN[:, :, None]
    return loss, out

  (loss, out), grads = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))(
      jax.tree_util.tree_map(jnp.asarray, ours)
  )
  out["loss"] = loss
  # Their relation table's last two rows (ids of another input mode) are
  # not converted, so `to_authors` maps the rest; the table's gradient is
  # ours with its rows reversed (`et_torch`) and zeros there.
  without_table = lambda t: {
      **t,
      "embed": {
          k: v for k, v in t["embed"].items() if k != "relative_position"
      },
  }
  for name, value in to_authors(
      lambda p: without_table(convert(p)), params, without_table(grads), "."
  ).items():
    out[f"grad/{name}"] = value
  table = "encoder.spatial_relations_builder.rel_embeddings.weight"
  ours_table = np.asarray(grads["embed"]["relative_position"]["embedding"])
  theirs_table = np.zeros(params[table].shape, ours_table.dtype)
  theirs_table[: len(ours_table)] = ours_table[::-1]
  out[f"grad/{table}"] = theirs_table
  return out


RUNNERS = {
    "rt_layer": _run_rt_layer,
    "rt_layer_no_edge_update": _run_rt_layer,
    "rt_stack": _run_rt_stack,
    "rt_processor_cat": _run_rt_processor,
    "rt_processor_core": _run_rt_processor,
    "et_attention": _run_et_attention,
    "et_attention_value_ablation": _run_et_attention,
    "et_attention_attention_ablation": _run_et_attention,
    "et_layer": _run_et_layer,
    "et_stack_untied_sequence": _run_et_stack_sequence,
    "et_stack_tied_graph": _run_et_stack_graph,
    "et_stack_untied_graph": _run_et_stack_graph,
    "cs_relative_universal": _run_cs_model,
    "cs_relative": _run_cs_model,
    "cs_absolute": _run_cs_model,
    "cs_absolute_ped": _run_cs_model,
    "cs_absolute_teu": _run_cs_model,
    "cs_universal_ped": _run_cs_model,
    "rt_net_binary_search": _run_rt_net,
    "rt_net_bellman_ford": _run_rt_net,
    **{c: _run_pivotal_fn for c in PIVOTAL_CASES if c.startswith("pivotal_fn")},
    **{
        c: _run_pivotal_block
        for c in PIVOTAL_CASES
        if c.startswith("pivotal_block")
    },
    "floyd_model_padded": _run_floyd_model,
    "g2g_attention": _run_g2g_attention,
    "g2g_statetr_attention": _run_g2g_attention,
    "g2g_relation_classifier": _run_g2g_classifier,
    "rat_clutrr": _run_rat_clutrr,
    "et_cfq_seq2seq": _run_et_cfq_seq2seq,
    "et_cfq_seq2seq_untied": _run_et_cfq_seq2seq,
    "rat_clutrr_untied": _run_rat_clutrr,
    "et_clutrr": _run_et_clutrr,
    "et_cogs_parser": _run_et_cogs_parser,
}


def max_abs_diffs(case, scaled=False, **runner_options):
  """{output name: max |ours - theirs|} for one golden (fp32); with
  `scaled`, divided by max(1, max |theirs|) of that output (the whole
  models' outputs and gradients reach |5| to |1000|, where fp32 rounding of
  differently ordered sums grows with the magnitude). `runner_options` go
  to the case's runner (e.g. impl='pallas_fused' for the attention cores)."""
  meta, inputs, params, theirs = load(case)
  with jax.default_matmul_precision("float32"):
    ours = RUNNERS[case](meta, inputs, params, **runner_options)
  assert set(ours) == set(theirs), (case, sorted(ours), sorted(theirs))
  diffs = {}
  for name, reference in theirs.items():
    value = np.asarray(ours[name])
    expected = (
        reference.dtype
        if np.issubdtype(reference.dtype, np.integer)
        else np.float32
    )  # integer outputs: tokens, lengths
    assert value.dtype == expected, (case, name, value.dtype)
    assert value.shape == reference.shape, (
        case,
        name,
        value.shape,
        reference.shape,
    )
    if "padding" in inputs:  # compare each graph's real x real block
      lengths = (~inputs["padding"]).sum(axis=1)
      diffs[name] = float(  # np.max: a NaN in any graph shows.
          np.max([
              np.max(np.abs(value[b, :m, :m] - reference[b, :m, :m]))
              for b, m in enumerate(lengths)
          ])
      )
    else:
      diffs[name] = float(
          np.max(
              np.abs(value.astype(np.float64) - reference.astype(np.float64))
          )
      )
    if scaled:
      diffs[name] /= max(1.0, float(np.max(np.abs(reference))))
  return diffs
