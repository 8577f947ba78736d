"""Tests for relational_jax.data.for2lam: the compiler's correctness (two
interpreters written here, from the languages' description in the module
docstring, not from the library), lengths, determinism, disjointness, and
the tree positions of the For2Lam pipeline."""

import sys

import numpy as np
import pytest

from relational_jax.data import for2lam
from relational_jax.data.vocab import Vocab
from relational_jax.layers import tree as tree_lib
from relational_jax.training.seq2seq import data as data_lib

Tree = for2lam.Tree


# ---------------------------------------------------------------------------
# Interpreters (test-only).


def _expr(node, env):
  s = node.symbol
  if s in ("+", "-", "<", ">", "=="):
    a, b = (_expr(c, env) for c in node.children)
    return {
        "+": a + b,
        "-": a - b,
        "<": int(a < b),
        ">": int(a > b),
        "==": int(a == b),
    }[s]
  if s.lstrip("-").isdigit():
    return int(s)
  return env[s]


def run_for(program, env):
  """FOR: statements update `env` in place; C-style for loops."""

  def block(node):
    for stmt in node.children:
      kind = stmt.symbol
      if kind == "=":
        env[stmt.children[0].symbol] = _expr(stmt.children[1], env)
      elif kind == "if":
        cond, then_b, else_b = stmt.children
        block(then_b if _expr(cond, env) else else_b)
      elif kind == "for":
        var, lo, hi, body = stmt.children
        env[var.symbol] = _expr(lo, env)
        while env[var.symbol] < _expr(hi, env):
          block(body)
          env[var.symbol] += 1
      else:
        raise AssertionError(kind)

  block(program)
  return env


def run_lambda(program, env):
  """LAMBDA with dynamic scope: returns the environment reached at `unit`.
  Environments are immutable dicts; functions live in them as
  ('fn', param, body)."""

  def ev(node, env):
    s = node.symbol
    if s == "unit":
      return env
    if s == "let":
      var, e, body = node.children
      return ev(body, {**env, var.symbol: _expr(e, env)})
    if s == "if":
      c, a, b = node.children
      return ev(a if _expr(c, env) else b, env)
    if s == "letrec":
      f, param, body, scope = node.children
      return ev(scope, {**env, f.symbol: ("fn", param.symbol, body)})
    if s == "app":
      f, arg = node.children
      _, param, body = env[f.symbol]
      return ev(body, {**env, param: _expr(arg, env)})
    raise AssertionError(s)

  return ev(program, env)


def _program_vars(env):
  return {k: v for k, v in env.items() if k in for2lam.VARIABLES}


@pytest.mark.parametrize("size", ["short", "long"])
def test_compiled_lambda_computes_the_for_programs_values(size):
  sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))
  rng = np.random.default_rng(1)
  pairs = for2lam.generate_pairs(size, 40, rng)
  kinds = set()
  for program, target in pairs:
    kinds |= {s for s, _ in for2lam.linearize(program)}
    for _ in range(3):
      inputs = {
          v: int(x) for v, x in zip(for2lam.VARIABLES, rng.integers(-5, 6, 5))
      }
      want = _program_vars(run_for(program, dict(inputs)))
      got = _program_vars(run_lambda(target, dict(inputs)))
      assert got == want, (
          for2lam.to_tokens(program),
          for2lam.to_tokens(target),
      )
  assert {"=", "if", "for"} <= kinds  # Every statement kind was exercised.


def test_compiler_rules_on_a_hand_written_program():
  # a = 1; for b in [0, 2): a = a + b; if a > 1 then c = 1 else (); d = c
  program = Tree(
      "block",
      [
          Tree("=", [Tree("a"), Tree("1")]),
          Tree(
              "for",
              [
                  Tree("b"),
                  Tree("0"),
                  Tree("2"),
                  Tree(
                      "block",
                      [
                          Tree(
                              "=",
                              [Tree("a"), Tree("+", [Tree("a"), Tree("b")])],
                          )
                      ],
                  ),
              ],
          ),
          Tree(
              "if",
              [
                  Tree(">", [Tree("a"), Tree("1")]),
                  Tree("block", [Tree("=", [Tree("c"), Tree("1")])]),
                  Tree("block", []),
              ],
          ),
          Tree("=", [Tree("d"), Tree("c")]),
      ],
  )
  target = for2lam.compile_program(program)
  assert " ".join(s for s, _ in for2lam.linearize(target)) == (
      "let a 1 letrec f0 b if < b 2 let a + a b app f0 + b 1 "
      "letrec f1 _ let d c unit if > a 1 let c 1 app f1 0 app f1 0 "
      "app f0 0"
  )
  env = run_lambda(target, {"a": 0, "b": 0, "c": 7, "d": 0, "e": 0})
  assert _program_vars(env) == {"a": 2, "b": 2, "c": 1, "d": 1, "e": 0}


def test_sets_are_deterministic_disjoint_and_sized():
  sets = for2lam.generate_sets("short", 60, 20, seed=3, tokens="arity")
  assert sets == for2lam.generate_sets("short", 60, 20, seed=3, tokens="arity")
  assert sets != for2lam.generate_sets("short", 60, 20, seed=4, tokens="arity")
  train_src = {s for s, _ in sets["train"]}
  assert len(train_src) == 60 and len(sets["test"]) == 20
  assert not train_src & {s for s, _ in sets["test"]}
  lo, hi = for2lam.LENGTHS["short"]
  for src, tgt in sets["train"] + sets["test"]:
    assert lo <= len(src.split()) <= hi
    program = tree_lib.tree_from_annotated(src.split(), "dfs")
    target = tree_lib.tree_from_annotated(tgt.split(), "dfs")
    assert for2lam.to_tokens(for2lam.compile_program(program)) == tgt
    assert (
        max(for2lam.binarized_depth(program), for2lam.binarized_depth(target))
        <= 32
    )
    _, positions = tree_lib.tree_positions(target, "dfs", k=64)
    assert for2lam.binarized_depth(target) == max(  # Deepest used slot.
        int(np.max(np.nonzero(p)[0], initial=-1)) // 2 + 1 for p in positions
    )
  bfs = for2lam.generate_sets(
      "short", 60, 20, seed=3, target_order="bfs", tokens="arity"
  )
  for (src, tgt), (src_b, tgt_b) in zip(sets["train"], bfs["train"]):
    assert src == src_b
    assert tree_lib.tree_from_annotated(tgt_b.split(), "bfs") == (
        tree_lib.tree_from_annotated(tgt.split(), "dfs")
    )


def test_lcrs_null_tokens_are_the_authors():
  """The default tokens: the same programs as 'arity', written as icecaps
  writes LCRS trees (tree.linearize_lcrs_null, checked against their code by
  tests/fidelity/test_tree_pe_golden.py)."""
  arity = for2lam.generate_sets("short", 20, 5, seed=3, tokens="arity")
  for order in ("dfs", "bfs"):
    null = for2lam.generate_sets("short", 20, 5, seed=3, target_order=order)
    for (src, tgt), (src_n, tgt_n) in zip(arity["train"], null["train"]):
      program = tree_lib.tree_from_annotated(src.split(), "dfs")
      target = tree_lib.tree_from_annotated(tgt.split(), "dfs")
      assert src_n == " ".join(tree_lib.linearize_lcrs_null(program, "dfs"))
      assert tgt_n == " ".join(tree_lib.linearize_lcrs_null(target, order))
      arities = [tree_lib.split_annotation(t)[1] for t in tgt_n.split()]
      tree_lib.node_positions(arities, order, 32, lcrs=False)  # One tree.


def test_long_programs_fit_their_length_and_depth():
  pairs = for2lam.generate_pairs(
      "long", 10, np.random.default_rng(0), max_depth=32
  )
  for program, target in pairs:
    assert 60 <= for2lam.num_nodes(program) <= 80
    assert for2lam.binarized_depth(target) <= 32


def test_bad_arguments_raise():
  with pytest.raises(ValueError, match="For2Lam program size 'medium'"):
    for2lam.generate_sets("medium", 2, 2)
  with pytest.raises(ValueError, match="target order 'inorder'"):
    for2lam.generate_sets("short", 2, 2, target_order="inorder")
  with pytest.raises(ValueError, match="a FOR program is a 'block' node"):
    for2lam.compile_program(Tree("=", [Tree("a"), Tree("1")]))


@pytest.mark.parametrize("tokens", ["lcrs_null", "arity"])
def test_pipeline_tree_positions_of_source_and_target(tokens):
  """Source tokens take their node's position in the DFS order of the
  binarised source tree; decoder inputs are aligned as Shiv & Quirk sec. 4
  (start token zero, each fed-back node its own position). 'lcrs_null':
  the nodes of the authors' binary trees (`tree.lcrs_null_nodes`)."""
  general = for2lam.generate_sets("short", 4, 1, seed=0, tokens="arity")
  pairs = for2lam.generate_sets("short", 4, 1, seed=0, tokens=tokens)["train"]
  src_vocab = Vocab.build(s for s, _ in pairs)
  tgt_vocab = Vocab.build(t for _, t in pairs)
  k = 32
  args = {
      "arities": data_lib.target_arities(tgt_vocab),
      "order": "dfs",
      "k": k,
      "src_arities": data_lib.target_arities(src_vocab, "source"),
      "tokens": tokens,
  }
  enc = data_lib.encode_set(pairs, src_vocab, tgt_vocab, 40, 60, args)
  extras = enc.tree_extras(np.arange(4))

  def positions(annotated):
    tree = tree_lib.tree_from_annotated(annotated.split(), "dfs")
    if tokens == "arity":
      return tree_lib.tree_positions(tree, "dfs", k=k)[1]
    paths = [p for _, _, p in tree_lib.lcrs_null_nodes(tree, "dfs")]
    return tree_lib.positions_from_paths(paths, 2, k)

  for row, ((src, tgt), (g_src, g_tgt)) in enumerate(
      zip(pairs, general["train"])
  ):
    tokens_s = src.split()
    np.testing.assert_array_equal(
        extras["src_tree_pos"][row, : len(tokens_s)], positions(g_src)
    )
    assert not extras["src_tree_pos"][row, len(tokens_s) :].any()  # Padding.
    nodes = tgt.split()
    got = extras["tgt_tree_pos"][row]
    assert not got[0].any()  # The start token.
    np.testing.assert_array_equal(got[1 : 1 + len(nodes)], positions(g_tgt))
    assert not got[1 + len(nodes) :].any()
  if tokens != "arity":
    return
  # A training target that is not one tree is refused.
  bad = data_lib.encode_set(
      [("block/0", "let/3 a/0")], src_vocab, tgt_vocab, 2, 3, args
  )
  with pytest.raises(ValueError, match="target row 0: .* missing"):
    bad.tree_extras([0])
