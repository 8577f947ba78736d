"""The import order of ARCHITECTURE.md holds: every internal import (module
level or inside a function) goes to the importer's own layer or one it may
use; a new package must be given its place here and there."""

import ast
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]

# Package -> the internal packages it may import (besides itself).
ALLOWED = {
    "relational_jax.parallel": (),
    "relational_jax.layers": (),
    "relational_jax.data": (),
    "relational_jax.models": ("relational_jax.layers", "relational_jax.data"),
    "relational_jax.interop": (
        "relational_jax.layers",
        "relational_jax.models",
    ),
    "processors": (
        "relational_jax.console",
        "relational_jax.layers",
        "relational_jax.models",
        "relational_jax.parallel",
    ),
    "relational_jax.training": (
        "relational_jax.layers",
        "relational_jax.models",
        "relational_jax.data",
        "relational_jax.parallel",
        "relational_jax.console",
        "processors",
    ),
    "experiments": (
        "relational_jax",
        "processors",
    ),
    # Top-level modules of the library package.
    "relational_jax.console": (),
    "relational_jax": (),
}
INTERNAL = ("relational_jax", "processors", "experiments")


def _package_of(module: str) -> str:
  """The longest key of ALLOWED that `module` is or lies under."""
  best = None
  for package in ALLOWED:
    if module == package or module.startswith(package + "."):
      if best is None or len(package) > len(best):
        best = package
  return best


def _imports(path: pathlib.Path, module: str):
  tree = ast.parse(path.read_text(), str(path))
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        yield alias.name, node.lineno
    elif isinstance(node, ast.ImportFrom):
      if node.level:  # Relative: resolve against this module's package.
        base = module.split(".")[: -node.level]
        name = ".".join(base + ([node.module] if node.module else []))
      else:
        name = node.module
      yield name, node.lineno
      for alias in node.names:  # `from pkg import submodule`
        yield f"{name}.{alias.name}", node.lineno


def _modules():
  for root in INTERNAL:
    for path in sorted((REPO / root).rglob("*.py")):
      parts = path.relative_to(REPO).with_suffix("").parts
      if parts[-1] == "__init__":
        parts = parts[:-1]
      yield path, ".".join(parts)


def _violations(path: pathlib.Path, module: str, own: str):
  """`<path>:<line>: <name>` of each import of `module` (in layer `own`)
  that its layer may not make."""
  allowed = (own,) + ALLOWED[own]
  for name, line in _imports(path, module):
    if not name or not name.startswith(INTERNAL) or name in INTERNAL:
      continue  # External, or a bare package (its members come next).
    target = _package_of(name)
    if target is None:  # e.g. `from relational_jax import layers`
      continue
    if not any(target == a or target.startswith(a + ".") for a in allowed):
      yield f"{path}:{line}: {name}"


def test_every_internal_import_follows_the_layering():
  violations, unplaced = [], []
  for path, module in _modules():
    own = _package_of(module)
    if own is None:
      unplaced.append(module)
      continue
    violations += _violations(path.relative_to(REPO), module, own)
  assert not unplaced, f"modules without a layer: {unplaced}"
  assert not violations, "imports against ARCHITECTURE.md's order:\n" + (
      "\n".join(violations)
  )


def test_no_library_or_experiment_module_imports_the_tests():
  """Library, processor and experiment code never imports from tests/
  (golden loaders and the like live in experiments/)."""
  found = [
      f"{path.relative_to(REPO)}:{line}: {name}"
      for path, module in _modules()
      for name, line in _imports(path, module)
      if name and (name == "tests" or name.startswith("tests."))
  ]
  assert not found, "imports of tests/:\n" + "\n".join(found)


def test_the_check_sees_a_violation(tmp_path):
  bad = tmp_path / "bad.py"
  bad.write_text(
      "import numpy\nfrom relational_jax.layers import shapes\n"
      "from relational_jax.training import trainer\n"
  )
  assert list(_violations(bad, "processors.bad", "processors")) == [
      f"{bad}:3: relational_jax.training",
      f"{bad}:3: relational_jax.training.trainer",
  ]


# The generic training modules: they import no task (registry finds the
# tasks by name at run time, `importlib`).
GENERIC_TRAINING = tuple(
    f"relational_jax.training.{m}"
    for m in (
        "checkpoints",
        "cli",
        "config",
        "engine",
        "errors",
        "metrics_log",
        "optim",
        "prng",
        "registry",
        "reporting",
        "task",
        "trainer",
        "workdir_lock",
    )
)
TASK_PACKAGES = (
    "processors",
    "relational_jax.training.clrs",
    "relational_jax.training.seq2seq",
    "relational_jax.training.clutrr",
    "relational_jax.training.cogs_graph",
)


def _graph():
  """{module: {internal modules it imports, at any depth of its code}}:
  `from pkg import name` is an import of `pkg.name` where that is a module,
  else of `pkg`."""
  modules = dict((m, p) for p, m in _modules())
  graph = {}
  for module, path in modules.items():
    edges = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
      if isinstance(node, ast.Import):
        edges.update(a.name for a in node.names)
      elif isinstance(node, ast.ImportFrom):
        if node.level:
          base = module.split(".")[: -node.level]
          if path.name == "__init__.py":
            base = module.split(".")[: len(module.split(".")) - node.level + 1]
          name = ".".join(base + ([node.module] if node.module else []))
        else:
          name = node.module
        for alias in node.names:
          sub = f"{name}.{alias.name}"
          edges.add(sub if sub in modules else name)
    graph[module] = {e for e in edges if e in modules and e != module}
  return graph


def _cycles(graph):
  """The strongly connected components of more than one module (Tarjan)."""
  index, low, stack, on, out = {}, {}, [], set(), []

  def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on.add(v)
    for w in sorted(graph.get(v, ())):
      if w not in index:
        visit(w)
        low[v] = min(low[v], low[w])
      elif w in on:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      component = []
      while True:
        w = stack.pop()
        on.discard(w)
        component.append(w)
        if w == v:
          break
      if len(component) > 1:
        out.append(sorted(component))

  for v in sorted(graph):
    if v not in index:
      visit(v)
  return out


def test_no_circle_of_imports_between_modules():
  """No module reaches itself through the imports of others (module level
  or inside functions: a circle broken by a late import is still one)."""
  cycles = _cycles(_graph())
  assert not cycles, "circles of imports:\n" + "\n".join(map(str, cycles))


def test_the_generic_training_code_imports_no_task():
  graph = _graph()
  found = [
      f"{m} imports {t}"
      for m in GENERIC_TRAINING
      for t in sorted(graph.get(m, ()))
      if t.startswith(TASK_PACKAGES)
  ]
  assert not found, "\n".join(found)


def test_the_circle_check_sees_a_circle():
  assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
      ["a", "b", "c"]
  ]
  assert _cycles({"a": {"b"}, "b": set()}) == []
