"""relational_jax: edge-centric transformers in JAX/Flax.

Layers (Flax linen, no Haiku or CLRS imports):
  RelationalAttention, NodeUpdate, EdgeUpdate, RelationalTransformerLayer
    (Relational Transformer, Diao & Loynd 2023, eq. 3-7 and 17-18)
  TriangularAttention (Edge Transformer, Bergen et al. 2021, eq. 4-9;
    pivot-chunked online softmax with a custom VJP)
  PivotalAttention (FloydNet, Yu, Zeng & Ye 2026; the same chunking)
Models:
  RelationalTransformer, RTConfig (a stack of RT layers, tied or untied)
  EdgeTransformer, ETConfig, EdgeTransformerLayer and ET inputs/heads
  FloydTransformer, FloydConfig, PivotalAttentionBlock (FloydNet)
Seq2seq: relational_jax.layers.positional_encoding (sinusoids, embedding
  scaling), .attention (multi-head and relative attention with decoding
  caches), .tree (tree positions), .relation_aware; relational_jax.models.
  seq2seq (Transformer encoder-decoder) and .et_seq2seq (ET encoder-decoder)
Data: relational_jax.data (SCAN generator and splits, TSV/COGS loaders, CLUTRR,
  For2Lam, Vocab; the official files shipped in relational_jax/data/official)
Training: relational_jax.training (the one trainer, configs, checkpoints)

Axis letters in array names (B batch, N nodes, D width, ...): one glossary,
in `relational_jax.layers.shapes`. LayerNorm epsilon is 1e-5 everywhere
(`ln_epsilon`), as the authors' Haiku and PyTorch code; Flax's default is
1e-6.
"""

from relational_jax.layers.relational import EdgeUpdate
from relational_jax.layers.relational import NodeUpdate
from relational_jax.layers.relational import RelationalAttention
from relational_jax.layers.relational import RelationalTransformerLayer
from relational_jax.layers.relational import attention_mask
from relational_jax.layers.pivotal import PivotalAttention
from relational_jax.layers.triangular import TriangularAttention
from relational_jax.layers.triangular import triangular_attention_core
from relational_jax.models.edge_transformer import ETConfig
from relational_jax.models.edge_transformer import EdgeClassifier
from relational_jax.models.edge_transformer import EdgeTransformer
from relational_jax.models.edge_transformer import EdgeTransformerLayer
from relational_jax.models.edge_transformer import GraphEdgeEmbedding
from relational_jax.models.edge_transformer import NodeClassifier
from relational_jax.models.edge_transformer import ParentPointerHead
from relational_jax.models.edge_transformer import SequenceEdgeEmbedding
from relational_jax.models.floyd import FloydConfig
from relational_jax.models.floyd import FloydTransformer
from relational_jax.models.floyd import PivotalAttentionBlock
from relational_jax.models.relational_transformer import RelationalTransformer
from relational_jax.models.relational_transformer import RTConfig

__version__ = "0.1.0"

__all__ = [
    "EdgeUpdate",
    "NodeUpdate",
    "RelationalAttention",
    "RelationalTransformerLayer",
    "attention_mask",
    "PivotalAttention",
    "TriangularAttention",
    "triangular_attention_core",
    "ETConfig",
    "FloydConfig",
    "FloydTransformer",
    "PivotalAttentionBlock",
    "EdgeClassifier",
    "EdgeTransformer",
    "EdgeTransformerLayer",
    "GraphEdgeEmbedding",
    "NodeClassifier",
    "ParentPointerHead",
    "SequenceEdgeEmbedding",
    "RelationalTransformer",
    "RTConfig",
]
