"""What a task is: the one contract every task (CLRS, seq2seq, CLUTRR, graph
COGS, a user's own) implements, and what it hands the engine.

A task is a subclass of `Task` with one instance (`TASK` in its module,
named in `registry.TASKS`). Its required parts are abstract methods; its
optional parts are members with defaults:

  default_config()          the run config, with a `train` section;
  validate(config, **opts)  ValueError naming a bad value and the choices;
  headline(results)         the numbers a reproduction compares with the
                            published ones;
  train_and_evaluate(config, workdir, log, **opts)
                            trains (or resumes) and evaluates; a task whose
                            config is one run returns `engine.run(self, ...)`,
                            which calls `build`; a task whose config holds
                            several runs (CLRS: one per algorithm and seed)
                            runs the engine's parts itself;
  build(config, mesh, workdir, log, **opts) -> Built
                            what `engine.run` trains and evaluates (default:
                            refused, for the tasks that do not use it);
  resume_conflicts(saved, config, **opts)
                            {path: (saved, now)} of the fields that forbid
                            resuming (default: those outside
                            RESUMABLE_CHANGES);
  results_path(config, workdir)
                            `config.results_path` or <workdir>/results.json;
  aggregate(results_list)   its summary of one config's runs over seeds
                            (default: None, the mean and sd of `headline`
                            only);
  RESUMABLE_CHANGES         config paths a resumed run may change;
  SEED_PATH                 the config path of its one training seed
                            (`experiments.reproduce --seeds`), None if its
                            config holds several.

`opts` are a task's run options beyond its config (seq2seq: the caller's
own model, data or optimiser; CLRS: a processor factory).
"""

import abc
import dataclasses
import os
from typing import Any, Callable, ClassVar, Dict, Optional, Sequence, Tuple

from relational_jax.training import config as config_lib
from relational_jax.training import trainer

ConfigDict = config_lib.ConfigDict


@dataclasses.dataclass
class Built:
  """What a task's `build` hands `engine.run`.

  task: the trainer's `Trainee` (state, checkpointed stream, step,
    evaluation).
  description: the progress bar's label.
  header: the results' first fields (e.g. model name, data sizes).
  final: (params, run record, selected) -> the results' evaluation fields,
    `final` among them (`final['accuracies']`: the headline numbers).
  summary: results -> the one line logged at the end.
  plot: (results, results path) -> None, a figure beside the results.
  record_only: `final` reads the run record alone (e.g. the numbers of its
    evaluation history): it gets params=None and selected=None, and no
    state is restored.
  """

  task: trainer.Trainee
  description: str
  header: Dict[str, Any]
  final: Callable[[Any, trainer.RunRecord, Any], Dict[str, Any]]
  summary: Callable[[Dict[str, Any]], str]
  plot: Optional[Callable[[Dict[str, Any], str], None]] = None
  record_only: bool = False


def results_path(config: ConfigDict, workdir: str) -> str:
  """Every task's results JSON: `config.results_path`, or
  `<workdir>/results.json` when it is ''."""
  return config.results_path or os.path.join(workdir, "results.json")


class Task(abc.ABC):
  """A training task (module docstring)."""

  RESUMABLE_CHANGES: ClassVar[Tuple[str, ...]] = ()
  SEED_PATH: ClassVar[Optional[str]] = None

  @abc.abstractmethod
  def default_config(self) -> ConfigDict:
    """The run config, with a `train` section."""

  @abc.abstractmethod
  def validate(self, config: ConfigDict, **options) -> None:
    """Raises ValueError naming a bad value and the valid choices."""

  @abc.abstractmethod
  def headline(self, results: Dict) -> Dict[str, float]:
    """The numbers a reproduction compares with the published ones."""

  @abc.abstractmethod
  def train_and_evaluate(
      self, config: ConfigDict, workdir: str, log=print, **options
  ) -> Dict[str, Any]:
    """Trains (or resumes) `config` in `workdir`; its results, or
    {'stopped_at': step} after a planned stop."""

  def build(
      self, config: ConfigDict, mesh, workdir: str, log, **options
  ) -> Built:
    """What `engine.run` trains and evaluates."""
    raise NotImplementedError(
        f"{type(self).__name__} trains through its own train_and_evaluate, "
        "not engine.run."
    )

  def resume_conflicts(
      self, saved: Dict, config: ConfigDict, **options
  ) -> Dict[str, Tuple]:
    """{path: (saved, now)} of the fields of the saved config record that
    forbid resuming under `config`: those outside RESUMABLE_CHANGES."""
    del options
    return config_lib.resume_conflicts(
        saved, config_lib.to_dict(config), free=self.RESUMABLE_CHANGES
    )

  def results_path(self, config: ConfigDict, workdir: str) -> str:
    """`config.results_path`, or `<workdir>/results.json` when it is ''."""
    return results_path(config, workdir)

  def aggregate(self, results: Sequence[Dict]) -> Optional[Dict]:
    """Its own summary of one config's runs over seeds; None: none."""
    del results
    return None
