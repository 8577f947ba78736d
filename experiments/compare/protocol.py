"""What a comparison provides: the one interface of `compare/`.

A comparison trains our implementation and the authors' own code with
matched settings on the same data and puts the two learning curves side by
side. `Comparison` states everything the entry point
(`python -m experiments.compare NAME`) uses; each comparison module
(`clrs_rt.py`, `clutrr_et.py`, `cogs_graph_et.py`,
`scan_relative_universal.py`) subclasses it,
and `registry.COMPARISONS` names the instances. Nothing is discovered by
attribute names: a subclass that leaves out a part cannot be instantiated
(`TypeError` naming it), so the registry holds only complete comparisons.

Parts of a comparison:

* identity: `name` (the CLI's NAME), `repository` (the authors' GitHub
  owner/name) and `marker` (a file of their checkout that `--reference` must
  hold, `reference.require`);
* flags and budgets: `budgets` ({'paper', 'cpu', 'smoke': a frozen dataclass
  with at least `steps` and `seeds`}), and `reference_flags` (the authors'
  command line for a budget and seed);
* data: `prepare_data` writes (once) what both sides read, from the paths
  the entry point provides (`DataInputs`);
* the two sides: `run_ours` (in this process) and `run_theirs` (in the
  authors' Python), both resuming what their directory holds;
* reading the curves: `finished_ours` / `finished_theirs` (a finished run's
  evaluation points, or None), `metric_names` (the panels of the plot) and
  `describe` (the record of settings written into the JSON);
* matching: `match` (default: `curves.compare_sides`, the issue's rule).

`WrapperComparison` writes the two sides and the curve readers once for the
usual shape: our side one run of a registered task, theirs one run of a
wrapper script in `refs/` per seed.

A run is a list of evaluation points `{"step": int, "metrics": {name:
value}}` (`curves.Run`).
"""

import abc
import dataclasses
import json
import os
import subprocess
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from experiments.compare import curves
from relational_jax.layers.shapes import check_choice

Run = List[Dict]  # [{"step": int, "metrics": {name: float}}, ...]
Budget = Any  # A comparison's frozen Budget dataclass (steps, seeds, ...).


def run_reference(cmd: Sequence[str], log_path: str, **kwargs: Any) -> None:
  """Runs the authors' side `cmd` (their Python and a wrapper script), its
  output appended to `log_path`; `kwargs` go to `subprocess.run` (env,
  cwd). A failure is a RuntimeError holding the command and the log's
  tail."""
  with open(log_path, "a") as out:
    proc = subprocess.run(
        list(cmd), stdout=out, stderr=subprocess.STDOUT, check=False, **kwargs
    )
  if proc.returncode:
    with open(log_path) as f:
      tail = f.read()[-3000:]
    raise RuntimeError(
        f"the authors' side failed (exit {proc.returncode}): "
        f"{' '.join(cmd)}\n{tail}"
    )


def read_jsonl(path: str) -> List[Dict]:
  """The entries of a wrapper's curve.jsonl, in order ([] if absent)."""
  if not os.path.isfile(path):
    return []
  with open(path) as f:
    return [json.loads(line) for line in f if line.strip()]


MetricsOf = Callable[[Mapping], Dict[str, float]]  # An entry's metrics.
REFS = os.path.join(os.path.dirname(__file__), "refs")  # The wrappers.


def points(entries: Sequence[Mapping], metrics_of: MetricsOf) -> Run:
  """A run's evaluation points from its logged entries (each with "step")."""
  return [{"step": e["step"], "metrics": metrics_of(e)} for e in entries]


def finished(run: Run, steps: int) -> Optional[Run]:
  """`run` when its last point is at `steps` (it finished), else None."""
  return run if run and run[-1]["step"] == steps else None


def finished_history(
    workdir: str, steps: int, metrics_of: MetricsOf
) -> Optional[Run]:
  """Our finished run's points (`<workdir>/results.json`'s history), else
  None."""
  history = curves.finished_history(workdir, steps)
  return None if history is None else points(history, metrics_of)


def wrapper_curve(out_dir: str, metrics_of: MetricsOf) -> Run:
  """The points of the wrapper's `<out_dir>/curve.jsonl` ([] if absent)."""
  return points(read_jsonl(os.path.join(out_dir, "curve.jsonl")), metrics_of)


def run_wrapper(
    python: str,
    script: str,
    flags: Sequence[str],
    out_dir: str,
    steps: int,
    metrics_of: MetricsOf,
    **kwargs: Any,
) -> Run:
  """Runs (or resumes) the wrapper `refs/<script>` in `python` (the
  authors' environment) with `flags` and `--out_dir`, unless its curve
  already reaches `steps`; returns the curve's points. The wrapper
  checkpoints into `out_dir` at every evaluation; its output is appended to
  `out_dir/log.txt`; `kwargs` go to `run_reference`."""
  done = finished(wrapper_curve(out_dir, metrics_of), steps)
  if done:
    return done
  os.makedirs(out_dir, exist_ok=True)
  cmd = [python, os.path.join(REFS, script), *flags, f"--out_dir={out_dir}"]
  run_reference(cmd, os.path.join(out_dir, "log.txt"), **kwargs)
  return wrapper_curve(out_dir, metrics_of)


@dataclasses.dataclass(frozen=True)
class DataInputs:
  """The paths the entry point hands to `Comparison.prepare_data`; each
  comparison reads the ones it needs (its docstring names them)."""

  test_csv: str  # clutrr_et: the official CLUTRR test file.
  shared_data: str  # Holds scan/tasks.txt and cogs/*.tsv.
  reference: str  # The authors' checkout.
  reference_python: str  # The Python of the authors' environment.


class Comparison(abc.ABC):
  """One comparison of ours with the authors' code (module docstring).

  A subclass sets `name`, `repository`, `marker` and `budgets` as class
  attributes and implements every abstract method."""

  @property
  @abc.abstractmethod
  def name(self) -> str:
    """The comparison's name: the CLI's NAME and the JSON's stem."""

  @property
  @abc.abstractmethod
  def repository(self) -> str:
    """The authors' repository, 'owner/name' on GitHub."""

  @property
  @abc.abstractmethod
  def marker(self) -> str:
    """A file (relative path) every checkout of `repository` holds."""

  @property
  @abc.abstractmethod
  def budgets(self) -> Mapping[str, Budget]:
    """{'paper', 'cpu', 'smoke': budget}; a budget has `steps`, `seeds`."""

  @abc.abstractmethod
  def reference_flags(self, budget: Budget, seed: int) -> List[str]:
    """The authors' flags for seed `seed` of `budget`."""

  @abc.abstractmethod
  def prepare_data(
      self, budget: Budget, scratch: str, inputs: DataInputs
  ) -> str:
    """Writes what both sides read under `scratch` (once); returns our
    side's data directory."""

  @abc.abstractmethod
  def run_ours(
      self, budget: Budget, seed: int, data_dir: str, workdir: str, log=print
  ) -> Run:
    """Trains (or resumes) our side in `workdir`; its evaluation points."""

  @abc.abstractmethod
  def run_theirs(
      self,
      budget: Budget,
      seed: int,
      reference: str,
      scratch: str,
      python: str,
      out_dir: str,
      threads: int = 1,
  ) -> Run:
    """Runs (or resumes, or reuses) the authors' side in `python` with
    `threads` threads; its evaluation points."""

  @abc.abstractmethod
  def finished_ours(self, budget: Budget, workdir: str) -> Optional[Run]:
    """A finished run of ours in `workdir`: its points, else None."""

  @abc.abstractmethod
  def finished_theirs(self, budget: Budget, out_dir: str) -> Optional[Run]:
    """A finished run of theirs in `out_dir`: its points, else None."""

  @abc.abstractmethod
  def metric_names(self) -> Sequence[str]:
    """The metrics plotted, one panel each."""

  @abc.abstractmethod
  def describe(self, budget: Budget) -> Dict:
    """The settings recorded in the JSON (repository, hyperparameters,
    their flags, budget, data, known differences)."""

  def match(
      self,
      ours: Mapping[str, Mapping[int, Mapping]],
      theirs: Mapping[str, Mapping[int, Mapping]],
  ) -> Dict:
    """The matching rule over two aggregated curves (`curves.aggregate`)."""
    return curves.compare_sides(ours, theirs)

  def budget(self, budget_name: str) -> Budget:
    """The budget named `budget_name`.

    Raises:
      ValueError: naming it and the valid budget names.
    """
    check_choice(budget_name, tuple(self.budgets), "budget")
    return self.budgets[budget_name]


class WrapperComparison(Comparison):
  """A comparison whose our side is one run of the task `task`
  (`relational_jax.training.registry`) on `our_config`, and whose their side
  is one run per seed of `refs/<wrapper>` (`run_wrapper`), each logging
  evaluation entries that `our_metrics` / `their_metrics` read.

  The wrapper gets --reference, --scratch, --seed, --steps, --eval_every,
  --threads, the comparison's `wrapper_flags` and --authors_flags (their
  command line, `reference_flags`), in the environment `wrapper_env`."""

  @property
  @abc.abstractmethod
  def task(self) -> str:
    """Our side's task name in `relational_jax.training.registry`."""

  @property
  @abc.abstractmethod
  def wrapper(self) -> str:
    """Their side's script, a file name in `refs/`."""

  @abc.abstractmethod
  def our_config(self, budget: Budget, seed: int, data_dir: str) -> Any:
    """Our side's run configuration (a ConfigDict of `task`)."""

  @abc.abstractmethod
  def our_metrics(self, entry: Mapping) -> Dict[str, float]:
    """The metrics of one evaluation entry of our run's history."""

  def their_metrics(self, entry: Mapping) -> Dict[str, float]:
    """The metrics of one entry of the wrapper's curve.jsonl (default: as
    `our_metrics`, for wrappers logging our entries' form)."""
    return self.our_metrics(entry)

  def wrapper_flags(self, budget: Budget, scratch: str) -> List[str]:
    """The wrapper's flags beyond the common ones (default: none)."""
    del budget, scratch
    return []

  def wrapper_env(self, seed: int) -> Optional[Dict[str, str]]:
    """The wrapper's environment (default None: this process's)."""
    del seed
    return None

  def run_ours(
      self, budget: Budget, seed: int, data_dir: str, workdir: str, log=print
  ) -> Run:
    from relational_jax.training import registry  # pylint: disable=g-import-not-at-top

    results = registry.get(self.task).train_and_evaluate(
        self.our_config(budget, seed, data_dir), workdir, log=log
    )
    return points(results["history"], self.our_metrics)

  def run_theirs(
      self,
      budget: Budget,
      seed: int,
      reference: str,
      scratch: str,
      python: str,
      out_dir: str,
      threads: int = 1,
  ) -> Run:
    flags = [
        f"--reference={reference}",
        f"--scratch={scratch}",
        f"--seed={seed}",
        f"--steps={budget.steps}",
        f"--eval_every={budget.eval_every}",
        f"--threads={threads}",
        *self.wrapper_flags(budget, scratch),
        "--authors_flags=" + " ".join(self.reference_flags(budget, seed)),
    ]
    env = self.wrapper_env(seed)
    return run_wrapper(
        python,
        self.wrapper,
        flags,
        out_dir,
        budget.steps,
        self.their_metrics,
        **({} if env is None else {"env": env}),
    )

  def finished_ours(self, budget: Budget, workdir: str) -> Optional[Run]:
    return finished_history(workdir, budget.steps, self.our_metrics)

  def finished_theirs(self, budget: Budget, out_dir: str) -> Optional[Run]:
    return finished(wrapper_curve(out_dir, self.their_metrics), budget.steps)
