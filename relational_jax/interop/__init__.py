"""Load the authors' trained weights into our modules.

Each converter takes the authors' parameters as a plain mapping of name ->
numpy array and returns our parameter tree, ready for `module.apply`:

  rt_haiku        the RT authors' Haiku parameters
                  (github.com/CameronDiao/relational-transformer):
                  `convert_layer` -> RelationalTransformerLayer,
                  `convert_stack` -> RelationalTransformer(RTConfig),
                  `convert_processor` -> processors.RelationalTransformerProcessor,
                  `convert_clrs_net` -> processors.CarryModel (their whole
                  CLRS BaselineModel).
  et_torch        the ET authors' PyTorch state dicts
                  (github.com/bergen/EdgeTransformer):
                  `convert_attention` -> TriangularAttention,
                  `convert_layer` -> EdgeTransformerLayer,
                  `convert_stack` -> EdgeTransformer(ETConfig),
                  `convert_graph_encoder` (clutrr) and
                  `convert_sequence_encoder` (cogs) -> the 'embed' and 'et'
                  parameters of our CLUTRR / COGS graph models,
                  `convert_clutrr_et` (their whole clutrr model) ->
                  models.clutrr.ClutrrEdgeTransformer,
                  `convert_cogs_parser` (their whole cogs Parser) ->
                  models.cogs_graph.CogsGraphEdgeTransformer,
                  `convert_clutrr_rat` (their clutrr/rat.py RAT) ->
                  models.clutrr.ClutrrRAT,
                  `convert_cfq_seq2seq` (their CFQ encoder-decoder) ->
                  models.et_seq2seq.EdgeTransformerSeq2Seq.
  csordas_torch   Csordas et al.'s PyTorch state dicts
                  (github.com/RobertCsordas/transformer_generalization):
                  `convert_attention` -> (Relative)MultiHeadAttention,
                  `convert_model` -> Seq2SeqTransformer(Seq2SeqConfig) for
                  their relative and relative Universal Transformers.
  floyd_torch     the FloydNet authors' PyTorch state dicts
                  (github.com/ocx-lab/FloydNet):
                  `convert_block` -> models.floyd.PivotalAttentionBlock,
                  `convert_stack` -> FloydTransformer(FloydConfig) (their
                  model's `blocks.{l}`).
  g2g_torch       the Graph2Graph Transformer authors' PyTorch state dicts
                  (github.com/alirezamshi-zz/G2GTr):
                  `convert_attention` -> layers.relation_aware.
                  RelationAwareAttention (with `ATTENTION_OPTIONS`, their
                  graph-input BERT attention),
                  `convert_relation_classifier` -> PairwiseEdgeScorer (with
                  `SCORER_OPTIONS`, their Relation classifier).
  common          `flatten`, `select` (one sub-module of a checkpoint) and
                  `to_authors` (our tree, e.g. gradients, back under their
                  names).

A PyTorch state dict is passed as `{k: v.numpy() for k, v in sd.items()}`;
Haiku parameters as returned by `init` ({module: {name: array}}) or
flattened with '/'. Nothing here imports torch or Haiku. A name the
converter needs and does not find, or a name it does not know, raises
ValueError naming it; the few entries that are knowingly not converted
(unused projections, buffers ours recomputes) are listed in each module's
docstring. tests/fidelity runs the converted parameters against outputs of
the authors' own code. See docs/interop.md for examples.
"""

from relational_jax.interop import common
from relational_jax.interop import csordas_torch
from relational_jax.interop import et_torch
from relational_jax.interop import floyd_torch
from relational_jax.interop import g2g_torch
from relational_jax.interop import rt_haiku
from relational_jax.interop.common import flatten
from relational_jax.interop.common import select
from relational_jax.interop.common import to_authors

__all__ = [
    "common",
    "csordas_torch",
    "et_torch",
    "floyd_torch",
    "g2g_torch",
    "rt_haiku",
    "flatten",
    "select",
    "to_authors",
]
