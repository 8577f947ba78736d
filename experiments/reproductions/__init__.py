"""Named reproductions: a paper's number, the config that aims at it, budgets.

A reproduction is a full config at the paper's budget plus the number it
targets (paper, table/figure, metric, value). Budgets scale only how long and
how much is evaluated:

  paper  the paper's protocol (steps, evaluation sets, seeds);
  cpu    the small budget of this repository's README numbers (a 2-core CPU);
  smoke  seconds, for tests: one algorithm, two steps, a few evaluation
         samples (and, for the O(N^3) Edge Transformer, a smaller batch;
         for For2Lam, one data split and a one-layer, 64-wide model); its
         numbers mean nothing.

`experiments.reproduce` runs one (or one per training seed, `--seeds`) and
writes the published number beside ours; where the record says so
(`results_copy`, `figures`: the CLUTRR reproductions) it also keeps a copy of
each run's results under results/ and redraws the reproduction's figures
from those copies.

This package holds the registry (`REPRODUCTIONS`, `get`; the `Reproduction`
record and the budgets are in `record`); one module per task defines its reproductions,
registered here in the order of `reproduce --list`:

  clrs        the RT paper's CLRS protocol: RT, MPNN, Triplet-GMPNN,
              FloydNet (each also as a `_modern` variant, the modern CLRS
              recipe); the generalists; and pair_models_clrs_<kind>
              (FloydNet, RT, ET under the same protocol);
  seq2seq     SCAN and COGS (Csordas et al. 2021, sequence COGS with the
              Edge Transformer), For2Lam and Table 1's semantic parsing on
              JOBS, GEO and ATIS (Shiv & Quirk 2019);
  clutrr      CLUTRR (Bergen et al. 2021): ET, its ablations, RAT, our RT
              and FloydNet;
  cogs_graph  the graph form of COGS (Bergen et al. 2021).
"""

from typing import Dict

from experiments.reproductions import clrs
from experiments.reproductions import clutrr
from experiments.reproductions import cogs_graph
from experiments.reproductions import seq2seq
from experiments.reproductions.record import BUDGETS
from experiments.reproductions.record import ConfigDict
from experiments.reproductions.record import Reproduction

REPRODUCTIONS: Dict[str, Reproduction] = {}


def get(name: str) -> Reproduction:
  if name not in REPRODUCTIONS:
    raise ValueError(
        f"Unknown reproduction {name!r}; valid names are "
        f"{sorted(REPRODUCTIONS)}."
    )
  return REPRODUCTIONS[name]


def _register(reproductions) -> None:
  for r in reproductions:
    if r.name in REPRODUCTIONS:
      raise ValueError(f"Reproduction {r.name!r} is registered twice.")
    REPRODUCTIONS[r.name] = r


# The registration order (For2Lam, then semantic parsing, last) is the
# listing's and the smoke record's.
_register(clrs.REPRODUCTIONS)
_register(seq2seq.SCAN_COGS)
_register(clutrr.REPRODUCTIONS)
_register(cogs_graph.REPRODUCTIONS)
_register(seq2seq.FOR2LAM)
_register(seq2seq.SEMPARSE)

# Names other modules use.
ALL_30 = clrs.ALL_30
CORE_8 = clrs.CORE_8
RT = clrs.RT
CSORDAS = seq2seq.CSORDAS
BERGEN = clutrr.BERGEN
SHIV_QUIRK = seq2seq.SHIV_QUIRK
