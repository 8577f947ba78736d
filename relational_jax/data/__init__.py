"""Offline seq2seq data: SCAN generation/splits, TSV loaders, vocabularies.

Pure Python + numpy (no JAX import).

* `relational_jax.data.scan` -- SCAN (Lake & Baroni, 2018) generated from
  its grammar, with the simple / length / add-primitive splits and the
  length-cutoff resplit of Csordas et al. (2021).
* `relational_jax.data.tsv` -- COGS/PCFG/CFQ-style TSV loaders.
* `relational_jax.data.for2lam` -- For2Lam program translation (FOR ->
  LAMBDA) generated from the grammars, with a rule-based compiler.
* `relational_jax.data.semparse` -- logical forms (s-expressions, Prolog
  calls) as trees and back, and their scoring (JOBS, GEO, ATIS of Shiv &
  Quirk's Table 1).
* `relational_jax.data.vocab` -- whitespace tokeniser and vocabulary.
* `relational_jax.data.clutrr` -- CLUTRR kinship graphs (Sinha et al., 2019):
  the official CSV schema (loader, writer, padded arrays).
* `relational_jax.data.clutrr_generator` -- new CLUTRR story graphs by
  CLUTRR's own procedure (family trees, their closure, the train/test
  holdout).
* `relational_jax.data.cogs_graph` -- COGS as per-token graphs (the graph
  form of Bergen et al., 2021).
"""

from relational_jax.data import scan, tsv, vocab
from relational_jax.data import clutrr
from relational_jax.data import clutrr_generator
from relational_jax.data import cogs_graph
from relational_jax.data import for2lam
from relational_jax.data import semparse
from relational_jax.data.scan import (
    ACTIONS as SCAN_ACTIONS,
    SPLITS as SCAN_SPLITS,
    generate as generate_scan,
    interpret as interpret_scan,
    length_cutoff_split,
    read_scan_file,
    split as scan_split,
)
from relational_jax.data.tsv import COGS_SPLITS, TsvExample, load_cogs, load_tsv
from relational_jax.data.vocab import (
    BOS,
    BOS_ID,
    EOS,
    EOS_ID,
    PAD,
    PAD_ID,
    SPECIAL_TOKENS,
    UNK,
    UNK_ID,
    Vocab,
    tokenize,
)

__all__ = [
    "clutrr",
    "clutrr_generator",
    "cogs_graph",
    "for2lam",
    "scan",
    "tsv",
    "vocab",
    "SCAN_ACTIONS",
    "SCAN_SPLITS",
    "generate_scan",
    "interpret_scan",
    "length_cutoff_split",
    "read_scan_file",
    "scan_split",
    "COGS_SPLITS",
    "TsvExample",
    "load_cogs",
    "load_tsv",
    *vocab.__all__,
]
