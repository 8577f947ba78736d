"""The comparisons' one interface (`protocol.Comparison`) and the registry,
the entry point's only way to find a comparison."""

import ast
import importlib
import inspect
import json
import os
import pkgutil
import sys

import pytest

import experiments.compare
from experiments.compare import __main__ as entry
from experiments.compare import clrs_rt
from experiments.compare import clutrr_et
from experiments.compare import cogs_graph_et as cogs
from experiments.compare import protocol
from experiments.compare import registry
from experiments.compare import scan_relative_universal as scan

ABSTRACT = sorted(protocol.Comparison.__abstractmethods__)
METHODS = [
    m
    for m in ABSTRACT
    if not isinstance(protocol.Comparison.__dict__[m], property)
]


def _params(fn):
  """Parameter (name, kind, default) of `fn`, without self."""
  return [
      (p.name, p.kind, p.default)
      for p in inspect.signature(fn).parameters.values()
      if p.name != "self"
  ]


def test_the_registry_names_the_four_comparisons():
  assert registry.names() == (
      "clrs_rt",
      "clutrr_et",
      "cogs_graph_et",
      "scan_relative_universal",
  )
  assert isinstance(registry.get("clrs_rt"), clrs_rt.ClrsRt)
  assert isinstance(registry.get("clutrr_et"), clutrr_et.ClutrrEt)
  assert isinstance(registry.get("cogs_graph_et"), cogs.CogsGraphEt)
  assert isinstance(
      registry.get("scan_relative_universal"), scan.ScanRelativeUniversal
  )


@pytest.mark.parametrize("name", sorted(registry.COMPARISONS))
def test_every_registered_comparison_satisfies_the_protocol(name):
  c = registry.COMPARISONS[name]
  assert isinstance(c, protocol.Comparison)
  assert not type(c).__abstractmethods__
  assert c.name == name
  module = importlib.import_module(type(c).__module__)
  assert (c.repository, c.marker) == (module.REPOSITORY, module.MARKER)
  assert c.repository.count("/") == 1 and c.marker
  assert {"paper", "cpu", "smoke"} <= set(c.budgets)
  for budget_name, budget in c.budgets.items():
    assert c.budget(budget_name) is budget
    assert isinstance(budget.steps, int) and isinstance(budget.seeds, int)
    flags = c.reference_flags(budget, 0)
    assert flags and all(isinstance(f, str) for f in flags)
    assert c.describe(budget)["repository"] == c.repository
  names = c.metric_names()
  assert names and all(isinstance(m, str) for m in names)
  # Every part is called as the protocol states it (names, kinds, defaults).
  for method in METHODS:
    assert _params(getattr(c, method)) == _params(
        getattr(protocol.Comparison, method)
    ), method


def test_a_comparison_missing_a_part_cannot_be_made():

  class NoTheirSide(protocol.Comparison):
    name, repository, marker, budgets = "x", "a/b", "m", {}
    reference_flags = prepare_data = run_ours = finished_ours = None
    finished_theirs = metric_names = describe = None

  with pytest.raises(TypeError, match="run_theirs"):
    NoTheirSide()


def test_unknown_names_raise_value_error_naming_the_choices(tmp_path):
  choices = (
      "['clrs_rt', 'clutrr_et', 'cogs_graph_et', 'scan_relative_universal']"
  )
  # `curves` is a module of experiments.compare, not a registered comparison.
  for name in ("nope", "curves", "protocol"):
    with pytest.raises(ValueError) as e:
      registry.get(name)
    assert f"comparison {name!r}" in str(e.value) and choices in str(e.value)
    with pytest.raises(ValueError, match=f"comparison '{name}'"):
      entry.run(
          name, None, "cpu", str(tmp_path), str(tmp_path), "python", "x.csv"
      )
  with pytest.raises(ValueError, match="budget 'huge'.*'smoke'"):
    registry.get("clutrr_et").budget("huge")


def test_every_comparison_class_of_the_package_is_registered():
  registered = {type(c) for c in registry.COMPARISONS.values()}
  found = set()
  for info in pkgutil.iter_modules(experiments.compare.__path__):
    if info.name == "__main__":
      continue
    module = importlib.import_module(f"experiments.compare.{info.name}")
    for _, value in inspect.getmembers(module, inspect.isclass):
      if (
          issubclass(value, protocol.Comparison)
          and not inspect.isabstract(value)
          and value.__module__ == module.__name__
      ):
        found.add(value)
  assert found == registered


def test_the_entry_point_finds_comparisons_only_through_the_registry(
    tmp_path, monkeypatch
):
  # No probing of attributes or signatures in the entry point.
  source = inspect.getsource(entry)
  calls = {
      n.func.id
      for n in ast.walk(ast.parse(source))
      if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
  }
  assert not calls & {"getattr", "hasattr", "vars", "__import__"}
  assert "import inspect" not in source and "importlib" not in source
  for module in ("clrs_rt", "clutrr_et", "scan_relative_universal"):
    assert f"import {module}" not in source

  # A comparison that is not a module at all, registered under a new name,
  # is run by the entry point; its output JSON has the usual keys.
  class Fake(protocol.Comparison):
    name, repository, marker = "fake", "someone/fake", "README"
    budgets = {"cpu": clutrr_et.Budget(4, 2, 2, 10)}

    def reference_flags(self, budget, seed):
      return [f"--seed={seed}"]

    def prepare_data(self, budget, scratch, inputs):
      raise AssertionError("report_only prepares no data")

    def run_ours(self, budget, seed, data_dir, workdir, log=print):
      raise AssertionError("report_only trains nothing")

    def run_theirs(
        self, budget, seed, reference, scratch, python, out_dir, threads=1
    ):
      raise AssertionError("report_only trains nothing")

    def finished_ours(self, budget, workdir):
      return [{"step": 4, "metrics": {"acc": 0.5}}]

    def finished_theirs(self, budget, out_dir):
      return [{"step": 4, "metrics": {"acc": 0.5}}]

    def metric_names(self):
      return ("acc",)

    def describe(self, budget):
      return {"repository": self.repository, "budget": {"steps": 4}}

  monkeypatch.setattr(registry, "COMPARISONS", {"fake": Fake()})
  with pytest.raises(ValueError, match=r"valid choices are \['fake'\]"):
    entry.run(
        "clutrr_et", None, "cpu", str(tmp_path), str(tmp_path), "python", "x"
    )
  out = tmp_path / "out"
  result = entry.run(
      "fake",
      None,
      "cpu",
      str(tmp_path / "w"),
      str(out),
      "python",
      "x.csv",
      report_only=True,
      log=lambda m: None,
  )
  assert list(result) == [
      "name",
      "budget_name",
      "seeds",
      "seeds_finished",
      "repository",
      "budget",
      "comparison",
      "runs",
  ]
  assert result["seeds_finished"] == [0, 1]
  assert result["comparison"]["all_match"]
  assert json.loads((out / "fake.json").read_text())["name"] == "fake"
  assert os.path.exists(out / "fake.png")


def test_prepare_data_reads_the_inputs_each_comparison_names(tmp_path):
  missing = str(tmp_path / "absent")
  inputs = protocol.DataInputs(
      test_csv=os.path.join(missing, "test.csv"),
      shared_data=missing,
      reference=missing,
      reference_python="python",
  )
  with pytest.raises(FileNotFoundError, match="absent/test.csv"):
    registry.get("clutrr_et").prepare_data(
        clutrr_et.BUDGETS["smoke"], str(tmp_path / "s1"), inputs
    )
  with pytest.raises(FileNotFoundError, match="absent/cogs/train.tsv"):
    registry.get("cogs_graph_et").prepare_data(
        cogs.BUDGETS["smoke"], str(tmp_path / "s0"), inputs
    )
  with pytest.raises(FileNotFoundError, match="absent/scan/tasks.txt"):
    registry.get("scan_relative_universal").prepare_data(
        scan.BUDGETS["smoke"], str(tmp_path / "s2"), inputs
    )
  shared = tmp_path / "shared"
  (shared / "scan").mkdir(parents=True)
  (shared / "scan" / "tasks.txt").write_text("IN: jump OUT: I_JUMP\n")
  got = registry.get("scan_relative_universal").prepare_data(
      scan.BUDGETS["smoke"],
      str(tmp_path / "s3"),
      protocol.DataInputs("unused.csv", str(shared), missing, "python"),
  )
  assert got == str(shared)


def test_run_reference_logs_and_names_a_failure(tmp_path):
  log = str(tmp_path / "log.txt")
  protocol.run_reference([sys.executable, "-c", "print('step 1')"], log)
  with pytest.raises(RuntimeError) as failed:
    protocol.run_reference(
        [sys.executable, "-c", "print('step 2'); raise SystemExit(3)"], log
    )
  assert "the authors' side failed (exit 3)" in str(failed.value)
  assert str(failed.value).endswith("step 1\nstep 2\n")  # The log's tail.
  curve = tmp_path / "curve.jsonl"
  assert protocol.read_jsonl(str(curve)) == []
  curve.write_text('{"step": 1}\n\n{"step": 2}\n')
  assert protocol.read_jsonl(str(curve)) == [{"step": 1}, {"step": 2}]


def test_run_wrapper_runs_until_the_curve_reaches_its_steps(tmp_path):
  # A stand-in for the authors' Python: it records its arguments and
  # appends one evaluation point per call to <out_dir>/curve.jsonl.
  fake = tmp_path / "their_python"
  fake.write_text(
      f"#!{sys.executable}\nimport json, os, sys\nout = sys.argv[-1].split('=',"
      " 1)[1]\npath = os.path.join(out, 'curve.jsonl')\nn ="
      " len(open(path).readlines()) if os.path.exists(path) else 0\nprint('"
      " '.join(sys.argv[1:]))\nopen(path, 'a').write(json.dumps({'step': 10 *"
      " (n + 1), 'acc': n}) + '\\n')\n"
  )
  fake.chmod(0o755)
  out = str(tmp_path / "theirs")
  metrics_of = lambda e: {"acc": float(e["acc"])}
  run = lambda: protocol.run_wrapper(
      str(fake), "w.py", ["--seed=3"], out, 20, metrics_of
  )
  assert run() == [{"step": 10, "metrics": {"acc": 0.0}}]  # Killed early.
  assert protocol.finished(protocol.wrapper_curve(out, metrics_of), 20) is None
  finished = run()  # Resumed: the curve now reaches step 20.
  assert finished[-1] == {"step": 20, "metrics": {"acc": 1.0}}
  assert run() == finished  # Finished: not run again.
  log = (tmp_path / "theirs" / "log.txt").read_text().splitlines()
  assert log == [f"{protocol.REFS}/w.py --seed=3 --out_dir={out}"] * 2


def test_a_wrapper_comparison_runs_its_task_and_its_wrapper(
    tmp_path, monkeypatch
):
  # Our side: a stand-in task module, registered for this test only.
  (tmp_path / "stand_in_task.py").write_text(
      "import json, os\n"
      "from relational_jax.training import task\n"
      "class StandIn(task.Task):\n"
      "  def default_config(self):\n"
      "    return {}\n"
      "  def validate(self, config):\n"
      "    pass\n"
      "  def headline(self, results):\n"
      "    return {}\n"
      "  def train_and_evaluate(self, config, workdir, log=print):\n"
      "    history = [{'step': config['steps'], 'acc': 0.25}]\n"
      "    os.makedirs(workdir, exist_ok=True)\n"
      "    with open(os.path.join(workdir, 'results.json'), 'w') as f:\n"
      "      json.dump({'history': history}, f)\n"
      "    return {'history': history}\n"
      "TASK = StandIn()\n"
  )
  monkeypatch.syspath_prepend(str(tmp_path))
  from relational_jax.training import registry as tasks  # pylint: disable=g-import-not-at-top

  monkeypatch.setitem(tasks.TASKS, "stand_in", "stand_in_task")
  # Their side: a stand-in Python that logs its command line and the
  # environment's MARK, and writes one evaluation point.
  fake = tmp_path / "their_python"
  fake.write_text(
      f"#!{sys.executable}\nimport json, os, sys\n"
      "out = sys.argv[-1].split('=', 1)[1]\n"
      "print(' '.join(sys.argv[1:]), os.environ.get('MARK'))\n"
      "open(os.path.join(out, 'curve.jsonl'), 'a').write(json.dumps("
      "{'step': 20, 'accuracy': 0.5}) + '\\n')\n"
  )
  fake.chmod(0o755)

  class Tiny(protocol.WrapperComparison):
    name, repository, marker, budgets = "tiny", "a/b", "m", {}
    task, wrapper = "stand_in", "w.py"
    prepare_data = describe = None

    def metric_names(self):
      return ("acc",)

    def reference_flags(self, budget, seed):
      return ["-lr", "1", f"-seed{seed}"]

    def our_config(self, budget, seed, data_dir):
      return {"steps": budget.steps}

    def our_metrics(self, entry):
      return {"acc": float(entry["acc"])}

    def their_metrics(self, entry):
      return {"acc": float(entry["accuracy"])}

    def wrapper_flags(self, budget, scratch):
      return [f"--data={scratch}/d"]

    def wrapper_env(self, seed):
      return dict(os.environ, MARK=f"seed{seed}")

  c, budget = Tiny(), clutrr_et.Budget(20, 10, 1, 0)
  ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
  assert c.finished_ours(budget, ours) is None
  assert c.finished_theirs(budget, theirs) is None
  assert c.run_ours(budget, 0, "data", ours, log=None) == [
      {"step": 20, "metrics": {"acc": 0.25}}
  ]
  assert c.finished_ours(budget, ours) == [
      {"step": 20, "metrics": {"acc": 0.25}}
  ]
  point = [{"step": 20, "metrics": {"acc": 0.5}}]
  assert c.run_theirs(budget, 3, "REF", "SCR", str(fake), theirs, 2) == point
  assert c.finished_theirs(budget, theirs) == point
  assert (tmp_path / "theirs" / "log.txt").read_text().splitlines() == [
      f"{protocol.REFS}/w.py --reference=REF --scratch=SCR --seed=3 "
      "--steps=20 --eval_every=10 --threads=2 --data=SCR/d "
      f"--authors_flags=-lr 1 -seed3 --out_dir={theirs} seed3"
  ]


def test_the_wrapper_comparisons_name_their_task_wrapper_flags_and_env():
  c, g, s = (
      clutrr_et.ClutrrEt(),
      cogs.CogsGraphEt(),
      scan.ScanRelativeUniversal(),
  )
  assert (c.task, g.task, s.task) == ("clutrr", "cogs_graph", "seq2seq")
  for comparison in (c, g, s):
    assert os.path.isfile(os.path.join(protocol.REFS, comparison.wrapper))
  assert c.wrapper_flags(c.budgets["smoke"], "S") == ["--data_path=compare"]
  assert c.wrapper_env(7)["PYTHONHASHSEED"] == "7"  # Their label order.
  assert g.wrapper_flags(g.budgets["smoke"], "S") == []
  assert s.wrapper_flags(s.budgets["smoke"], "S") == [
      "--scan_file=" + os.path.join("S", "cache", "scan_resplit", "tasks.txt"),
      "--mode=train",
      "--max_eval_examples=16",
  ]
  assert g.wrapper_env(7) is None and s.wrapper_env(7) is None
