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

This package holds the `Reproduction` record, the budgets and the registry
(`REPRODUCTIONS`, `get`); one module per task defines its reproductions,
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

import dataclasses
import math
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

from relational_jax.training import config as config_lib

ConfigDict = config_lib.ConfigDict
BUDGETS = ("paper", "cpu", "smoke")


@dataclasses.dataclass(frozen=True)
class Reproduction:
  """One published number and how we aim at it.

  published: {key: value} in the paper's unit (CLRS: percent micro-F1 per
    algorithm, plus 'mean'; seq2seq: exact-match accuracy of the set named
    by `metric`).
  budgets: dotted-path overrides of `config()` per non-paper budget.
  published_stderr: {key: standard error} where the paper gives one beside a
    mean over `published_runs` runs (same keys and unit as `published`); one
    run of the authors' then spreads about sqrt(published_runs) x it.
  published_sd: {key: standard deviation over the `published_runs` runs}
    where the paper gives that instead (RT paper Table 18); one of
    published_stderr and published_sd, not both.
  results_copy: {budget: path} where `experiments.reproduce` keeps a copy of
    each finished run's results JSON (relative to the repository; '{name}'
    is the reproduction's name, '{seed}' '' for the config's own training
    seed and '__seed<S>' for seed S); budgets not named keep none.
  figures: budget -> the paths of the figures it drew from those copies
    (called after the runs; () where it draws none).
  """

  name: str
  task: str  # 'clrs' | 'seq2seq' | 'clutrr' | 'cogs_graph'
  paper: str
  where: str  # table / figure
  metric: str
  published: Mapping[str, float]
  config: Callable[[], ConfigDict]
  budgets: Mapping[str, Mapping[str, Any]]
  notes: str = ""
  published_stderr: Mapping[str, float] = dataclasses.field(
      default_factory=dict
  )
  published_sd: Mapping[str, float] = dataclasses.field(default_factory=dict)
  published_runs: int = 0
  results_copy: Mapping[str, str] = dataclasses.field(default_factory=dict)
  figures: Optional[Callable[[str], Sequence[str]]] = None

  def __post_init__(self):
    for budget, path in self.results_copy.items():
      if budget not in BUDGETS or "{seed}" not in path:
        raise ValueError(
            f"{self.name}: results_copy[{budget!r}] = {path!r}: keys are "
            f"budgets {list(BUDGETS)}, paths hold '{{seed}}'."
        )
    if self.published_stderr and self.published_sd:
      raise ValueError(
          f"{self.name}: give published_stderr or published_sd, not both."
      )
    for field in ("published_stderr", "published_sd"):
      errors = getattr(self, field)
      extra = set(errors) - set(self.published)
      if extra:
        raise ValueError(
            f"{self.name}: {field} keys {sorted(extra)} are not "
            f"published keys {sorted(self.published)}."
        )
      if errors and self.published_runs < 2:
        raise ValueError(
            f"{self.name}: {field} needs published_runs >= 2 (the "
            f"runs the mean is over), got {self.published_runs}."
        )

  def published_run_sd(self) -> Dict[str, float]:
    """{key: how far one of the authors' runs spreads around the published
    mean}: published_sd, or sqrt(published_runs) x standard error ({} if
    the paper gives no errors)."""
    if self.published_sd:
      return dict(self.published_sd)
    root = math.sqrt(self.published_runs)
    return {k: round(root * se, 4) for k, se in self.published_stderr.items()}

  def published_errors(self) -> Dict[str, Any]:
    """A record's published_stderr (where the paper gives it),
    published_runs and published_run_sd ({} where it gives no errors)."""
    if not (self.published_stderr or self.published_sd):
      return {}
    stderr = {"published_stderr": dict(self.published_stderr)}
    return {
        **(stderr if self.published_stderr else {}),
        "published_runs": self.published_runs,
        "published_run_sd": self.published_run_sd(),
    }

  def build(self, budget: str) -> ConfigDict:
    if budget not in BUDGETS:
      raise ValueError(
          f"Unknown budget {budget!r}; valid budgets are {list(BUDGETS)}."
      )
    return config_lib.override(self.config(), self.budgets.get(budget, {}))

  def copy_path(self, budget: str, seed_tag: str) -> Optional[str]:
    """The results copy of a run at `budget` ('' or '__seed<S>'), relative
    to the repository; None where this budget keeps none."""
    path = self.results_copy.get(budget)
    return path.format(name=self.name, seed=seed_tag) if path else None

  def headline(self) -> Tuple[str, float]:
    key = "mean" if "mean" in self.published else next(iter(self.published))
    return key, self.published[key]


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


# The task modules import `Reproduction` and `ConfigDict` from here, so they
# are imported after them. The registration order (For2Lam, then semantic
# parsing, last) is the
# listing's and the smoke record's.
# pylint: disable=g-import-not-at-top,g-bad-import-order,wrong-import-position
from experiments.reproductions import clrs  # noqa: E402
from experiments.reproductions import clutrr  # noqa: E402
from experiments.reproductions import cogs_graph  # noqa: E402
from experiments.reproductions import seq2seq  # noqa: E402

# pylint: enable=g-import-not-at-top,g-bad-import-order,wrong-import-position

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
