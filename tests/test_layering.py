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
