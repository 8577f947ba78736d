"""The `Reproduction` record and the budgets (`experiments.reproductions`
holds the registry; one module per task defines its reproductions)."""

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
