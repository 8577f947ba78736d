"""relational_jax.data.semparse: the shipped JOBS / GEO / ATIS files read as
trees and written back, malformed forms, the scoring (exact match, tree
match against a naive reference, variable renaming)."""

import collections
import itertools
import os
import re

import pytest

from relational_jax.data import paths
from relational_jax.data import semparse
from relational_jax.data import tsv as tsv_lib
from relational_jax.data.for2lam import Tree
from relational_jax.layers import tree as tree_lib

FILES = {
    "jobs": ("prolog", {"train": 500, "test": 140}),
    "geo": ("sexpr", {"train": 600, "test": 280}),
    "atis": ("sexpr", {"train": 4473, "dev": 497, "test": 448}),
}
SHIPPED = [
    (dataset, split, fmt, rows)
    for dataset, (fmt, splits) in FILES.items()
    for split, rows in splits.items()
]


def _path(dataset, split):
  return os.path.join(paths.SEMPARSE_DIR, dataset, f"{split}.tsv")


@pytest.mark.parametrize("dataset, split, fmt, rows", SHIPPED)
def test_every_shipped_row_round_trips(dataset, split, fmt, rows):
  """parse -> to_string gives the file's string on every row (ATIS train
  line 1106, `$0 ))`, with its glued parenthesis split off); the annotated
  DFS and BFS linearisations rebuild the same tree (layers.tree); every
  tree fits the tree positional encoding's depth k = 32 once binarised."""
  forms = semparse.load_logical_forms(_path(dataset, split), fmt)
  assert len(forms.trees) == len(forms.targets) == rows
  glued = []
  for i, (tree, text) in enumerate(zip(forms.trees, forms.targets)):
    written = semparse.to_string(tree, fmt)
    if written != text:
      glued.append(i)
      assert written == " ".join(semparse.tokenize(text))
    for order in tree_lib.ORDERS:
      tokens = semparse.tree_tokens(tree, order).split()
      rebuilt = tree_lib.tree_from_annotated(tokens, order)
      assert semparse.to_string(rebuilt, fmt) == written
    assert semparse.binarized_depth(tree) <= 32
  assert glued == ([1105] if (dataset, split) == ("atis", "train") else [])


def test_the_facts_of_the_shipped_files():
  """ATIS test.tsv names its variables its own way; train and dev use $0..$3
  only; JOBS has Prolog negation, disjunction and groups."""
  variables = {}
  for split in ("train", "dev", "test"):
    forms = semparse.load_logical_forms(_path("atis", split), "sexpr")
    variables[split] = collections.Counter(
        t
        for text in forms.targets
        for t in semparse.tokenize(text)
        if semparse.is_variable(t, "sexpr")
    )
    if split == "test":
      rows_v0 = sum("$v0" in text.split() for text in forms.targets)
      rows_x = sum("x" in text.split() for text in forms.targets)
  assert set(variables["train"]) == {"$0", "$1", "$2", "$3"}
  assert set(variables["dev"]) == {"$0", "$1", "$2"}
  assert {"$v0", "$v1", "$x", "$f", "$y", "$airline", "x", "$0"} <= set(
      variables["test"]
  )
  assert rows_v0 == 338 and rows_x == 3
  renamed = {
      (dataset, split): sum(
          semparse.rename_variables(t) != " ".join(semparse.tokenize(t))
          for t in semparse.load_logical_forms(
              _path(dataset, split), "sexpr"
          ).targets
      )
      for dataset, split, fmt, _ in SHIPPED
      if fmt == "sexpr"
  }
  assert renamed == {
      ("geo", "train"): 11,
      ("geo", "test"): 7,
      ("atis", "train"): 1,
      ("atis", "dev"): 0,
      ("atis", "test"): 384,
  }
  jobs = semparse.load_logical_forms(_path("jobs", "train"), "prolog")
  symbols = collections.Counter(
      s for t in jobs.trees for s, _ in semparse.linearize(t)
  )
  assert symbols[semparse.NOT] > 0 and symbols[semparse.DISJ] == 3
  assert symbols[semparse.GROUP] > 0


@pytest.mark.parametrize(
    "fmt, text, message",
    [
        (
            "sexpr",
            "( and ( a $0 ) ( b $0 )",
            r"'\(' of token 1 is never closed",
        ),
        ("sexpr", "( a b ) )", r"tokens after the end .* from '\)'"),
        ("sexpr", ") a", r"unbalanced '\)'"),
        ("sexpr", "( ( a b ) c )", r"a list must start with an atom"),
        ("sexpr", "( f ) ", r"the list '\( f \)' has no argument"),
        ("prolog", "job ( ANS", r"ends where the '\)' closing the arguments"),
        ("prolog", ", job ( ANS )", r"expected a term, found ','"),
        ("prolog", "job ( ANS ) , ( loc ( ANS , l )", r"the '\)' closing"),
        ("prolog", "job ( ANS ) job ( ANS )", r"tokens after the end"),
    ],
)
def test_a_malformed_form_is_one_line_naming_file_line_and_fault(
    tmp_path, fmt, text, message
):
  path = tmp_path / "train.tsv"
  path.write_text(
      f"fine\t{'a' if fmt == 'sexpr' else 'job ( ANS )'}\n\nbad row\t{text}\n"
  )
  with pytest.raises(tsv_lib.DataFormatError) as e:
    semparse.load_logical_forms(str(path), fmt)
  line = str(e.value)
  assert "\n" not in line
  assert line.startswith(f"{path}, line 3: malformed {fmt} logical form: ")
  assert re.search(message, line), line


def test_an_unknown_format_names_the_choices():
  with pytest.raises(ValueError, match=r"'lisp'; valid choices are \['sexpr'"):
    semparse.parse("a", "lisp")


def test_prolog_precedence_groups_and_negation():
  tree = semparse.parse(
      "a ( X ) , \\+ ( b ( X ) , c ( X ) ) ; d ( X )", "prolog"
  )
  # ';' binds loosest, then ',', then the prefix '\+'.
  assert tree.symbol == ";" and [c.symbol for c in tree.children] == [",", "d"]
  conj = tree.children[0]
  assert [c.symbol for c in conj.children] == ["a", "\\+"]
  assert conj.children[1].children[0].symbol == "()"
  assert semparse.to_string(tree, "prolog") == (
      "a ( X ) , \\+ ( b ( X ) , c ( X ) ) ; d ( X )"
  )
  with pytest.raises(ValueError, match=r"'\\\\\+' has 2 child\(ren\)"):
    semparse.to_string(Tree("\\+", [Tree("a"), Tree("b")]), "prolog")


# --- Scoring. ----------------------------------------------------------------


def _permutations(tree, fmt):
  """Every tree reached by reordering the children of order-free operators
  (the naive reference: exponential)."""
  options = [list(_permutations(c, fmt)) for c in tree.children]
  for kids in itertools.product(*options):
    orders = (
        itertools.permutations(kids)
        if tree.symbol in semparse.ORDER_FREE[fmt]
        else [kids]
    )
    for order in orders:
      yield Tree(tree.symbol, list(order))


def _naive_tree_match(predicted, gold, fmt):
  try:
    pred = semparse.parse(semparse.rename_variables(predicted, fmt), fmt)
  except ValueError:
    return False
  gold = semparse.to_string(
      semparse.parse(semparse.rename_variables(gold, fmt), fmt), fmt
  )
  return any(
      semparse.to_string(t, fmt) == gold for t in _permutations(pred, fmt)
  )


GEO_GOLD = (
    "( lambda $0 e ( and ( state:t $0 ) ( exists $1 ( and ( river:t $1 ) ("
    " loc:t $1 $0 ) ) ) ) )"
)
CASES = [
    ("sexpr", GEO_GOLD, GEO_GOLD, True),
    # Conjuncts swapped at both levels (nested: Dong & Lapata's top-down
    # sort of unsorted strings would miss the inner one with the outer).
    (
        "sexpr",
        (
            "( lambda $0 e ( and ( exists $1 ( and ( loc:t $1 $0 ) ( river:t $1"
            " ) ) ) ( state:t $0 ) ) )"
        ),
        GEO_GOLD,
        True,
    ),
    # Arguments of a predicate are ordered.
    (
        "sexpr",
        (
            "( lambda $0 e ( and ( state:t $0 ) ( exists $1 ( and ( river:t $1"
            " ) ( loc:t $0 $1 ) ) ) ) )"
        ),
        GEO_GOLD,
        False,
    ),
    # A conjunct missing, or doubled.
    (
        "sexpr",
        "( and ( a $0 ) ( b $0 ) )",
        "( and ( a $0 ) ( b $0 ) ( b $0 ) )",
        False,
    ),
    (
        "sexpr",
        "( and ( b $0 ) ( a $0 ) ( b $0 ) )",
        "( and ( a $0 ) ( b $0 ) ( b $0 ) )",
        True,
    ),
    # ATIS's _and / _or; variables renamed in order of first appearance.
    (
        "sexpr",
        "( _lambda $0 e ( _or ( _to $0 b:_ci ) ( _from $0 a:_ci ) ) )",
        "( _lambda $v0 e ( _or ( _from $v0 a:_ci ) ( _to $v0 b:_ci ) ) )",
        True,
    ),
    ("sexpr", "( lambda $0 e ( and ( a $0 )", GEO_GOLD, False),  # No tree.
    # Prolog: ',' and ';' order-free, call arguments ordered.
    (
        "prolog",
        "language ( ANS , languageid0 ) , job ( ANS )",
        "job ( ANS ) , language ( ANS , languageid0 )",
        True,
    ),
    (
        "prolog",
        "job ( ANS ) , language ( languageid0 , ANS )",
        "job ( ANS ) , language ( ANS , languageid0 )",
        False,
    ),
    (
        "prolog",
        "job ( ANS ) , ( ( loc ( ANS , l1 ) ) ; ( loc ( ANS , l0 ) ) )",
        "job ( ANS ) , ( ( loc ( ANS , l0 ) ) ; ( loc ( ANS , l1 ) ) )",
        True,
    ),
]


@pytest.mark.parametrize("fmt, predicted, gold, same", CASES)
def test_tree_match_equals_the_naive_reference(fmt, predicted, gold, same):
  assert semparse.tree_match(predicted, gold, fmt) == same
  assert _naive_tree_match(predicted, gold, fmt) == same
  # Exact match: the same tokens (after renaming) only.
  renamed = lambda s: semparse.rename_variables(s, fmt)
  assert semparse.exact_match(predicted, gold, fmt) == (
      renamed(predicted) == renamed(gold)
  )


def test_variables_renamed_in_order_of_first_appearance():
  atis_test = (
      "( _lambda $v0 e ( _exists $x ( _and ( _flight $x ) ( _to $x $v0 ) ) ) )"
  )
  assert semparse.rename_variables(atis_test) == (
      "( _lambda $0 e ( _exists $1 ( _and ( _flight $1 ) ( _to $1 $0 ) ) ) )"
  )
  assert semparse.rename_variables("( _lambda x e ( _airline x ) )") == (
      "( _lambda $0 e ( _airline $0 ) )"
  )
  # Train's own names may move: $1 first becomes $0.
  assert semparse.rename_variables("( argmax $1 ( a $1 ) ( b $1 $0 ) )") == (
      "( argmax $0 ( a $0 ) ( b $0 $1 ) )"
  )
  # Prolog forms keep theirs.
  assert semparse.rename_variables("f ( A , ANS )", "prolog") == "f ( A , ANS )"
  assert semparse.exact_match(
      atis_test,
      "( _lambda $0 e ( _exists $1 ( _and ( _flight $1 ) ( _to $1 $0 ) ) ) )",
      "sexpr",
  )


def test_holdout_is_a_fixed_disjoint_draw():
  kept, held = semparse.split_holdout(600, 60)
  assert len(held) == 60 and sorted(kept + held) == list(range(600))
  assert semparse.split_holdout(600, 60) == (kept, held)
  with pytest.raises(ValueError, match=r"0 < size < 10"):
    semparse.split_holdout(10, 10)


# --- ATIS entity anonymisation through the lexicon. --------------------------


def test_lexicon_is_read_with_every_phrase_of_an_entity(tmp_path):
  lexicon = semparse.read_lexicon(
      os.path.join(paths.SEMPARSE_DIR, "atis", "lexicon.txt")
  )
  assert len(lexicon) == 570  # 981 lines: several phrases an entity.
  assert {"atlanta", "atlanta georgia"} <= set(lexicon["atlanta:ci"])
  assert "atlanta" in lexicon["atl:ap"]
  assert lexicon["800:ti"][:2] == ["8 in the morning", "8 o'clock am"]
  assert lexicon["800:ti"][-1] == "8am"  # Longest first, then by name.
  bad = tmp_path / "lexicon.txt"
  bad.write_text("denver :- NP : denver:ci\n\nboston NP boston\n")
  with pytest.raises(tsv_lib.DataFormatError) as e:
    semparse.read_lexicon(str(bad))
  assert str(e.value).startswith(
      f"{bad}, line 3: expected 'phrase :- NP : value:type'"
  )


def test_anonymize_marks_entities_in_sentence_and_form_and_maps_back():
  lexicon = {
      "denver:ci": ["denver"],
      "boston:ci": ["boston"],
      "bos:ap": ["boston logan", "logan"],
      "9:dn": ["ninth"],
  }
  sentence, form, entities = semparse.anonymize(
      "flights from boston logan to denver on the ninth",
      "( _lambda $0 e ( _and ( _from $0 bos:_ap ) ( _to $0 denver:_ci )"
      " ( _day_number $0 9:_dn ) ( _stop $0 dallas:_ci ) ) )",
      lexicon,
  )
  assert sentence == "flights from ap0 to ci0 on the dn0"
  # dallas has no phrase in the sentence: written out.
  assert form == (
      "( _lambda $0 e ( _and ( _from $0 ap0 ) ( _to $0 ci0 )"
      " ( _day_number $0 dn0 ) ( _stop $0 dallas:_ci ) ) )"
  )
  assert entities == {"ap0": "bos:_ap", "ci0": "denver:_ci", "dn0": "9:_dn"}
  assert semparse.deanonymize(form, entities).endswith("dallas:_ci ) ) )")
  assert "bos:_ap" in semparse.deanonymize(form, entities)


@pytest.mark.parametrize(
    "split, marked, left",
    [
        ("train", 12273, 74),
        ("dev", 1347, 9),
        ("test", 1117, 1),
    ],
)
def test_atis_anonymised_round_trips_on_every_row(split, marked, left):
  """Every ATIS row anonymised parses, and maps back to the file's form;
  how many entities the lexicon finds (distinct per row) and leaves."""
  lexicon = semparse.read_lexicon(
      os.path.join(paths.SEMPARSE_DIR, "atis", "lexicon.txt")
  )
  forms = semparse.load_logical_forms(_path("atis", split), "sexpr")
  found = kept = 0
  for source, text in zip(forms.sources, forms.targets):
    sentence, form, entities = semparse.anonymize(source, text, lexicon)
    semparse.parse(form, "sexpr")
    assert semparse.deanonymize(form, entities) == " ".join(
        semparse.tokenize(text)
    )
    assert all(m in sentence.split() for m in entities)
    found += len(entities)
    kept += len(
        {t for t in form.split() if ":_" in t and not t.startswith("_")}
    )
  assert (found, kept) == (marked, left)
