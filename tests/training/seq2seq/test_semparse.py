"""Logical forms through the generic TSV path: `data.target_format` (the tree
decoder on annotated linearisations, the sequence decoder on tokens), the
hold-out validation set, scoring on the logical forms and the predictions
files; the Table 1 reproductions' configs."""

import csv
import os

import numpy as np
import pytest

from experiments import reproductions
from relational_jax.data import semparse
from relational_jax.data import tsv as tsv_lib
from relational_jax.training import seq2seq
from relational_jax.training.seq2seq import config as config_lib
from relational_jax.training.seq2seq import evaluation
from relational_jax.training.seq2seq import loop
from tests.training.seq2seq.common import tiny

TRAIN = [
    ("river in s0", "( lambda $0 e ( and ( river:t $0 ) ( loc:t $0 s0 ) ) )"),
    (
        "state next s0",
        "( lambda $0 e ( and ( state:t $0 ) ( next_to:t $0 s0 ) ) )",
    ),
    ("capit of s0", "( capital:c s0 )"),
    ("citi in s0", "( lambda $0 e ( and ( city:t $0 ) ( loc:t $0 s0 ) ) )"),
    ("popul of s0", "( population:i s0 )"),
    ("largest state", "( argmax $0 ( state:t $0 ) ( size:i $0 ) )"),
]
TEST = [
    ("lake in s0", "( lambda $v0 e ( and ( lake:t $v0 ) ( loc:t $v0 s0 ) ) )"),
    ("capit of s0", "( capital:c s0 )"),
    ("smallest state", "( argmin $x ( state:t $x ) ( size:i $x ) )"),
]


def _write(directory, name, rows):
  directory.mkdir(exist_ok=True)
  (directory / name).write_text("".join(f"{s}\t{t}\n" for s, t in rows))


ATIS_TRAIN = [
    (
        "from denver to boston",
        (
            "( _lambda $0 e ( _and ( _from $0 denver:_ci ) ( _to $0 boston:_ci"
            " ) ) )"
        ),
    ),
    ("to denver", "( _lambda $0 e ( _to $0 denver:_ci ) )"),
    ("from boston", "( _lambda $0 e ( _from $0 boston:_ci ) )"),
    (
        "to boston on delta",
        (
            "( _lambda $0 e ( _and ( _to $0 boston:_ci ) ( _airline $0 dl:_al"
            " ) ) )"
        ),
    ),
]
ATIS_TEST = [
    (
        "from dallas to denver",
        (
            "( _lambda $v0 e ( _and ( _from $v0 dallas:_ci ) ( _to $v0"
            " denver:_ci ) ) )"
        ),
    ),
    ("to atlanta", "( _lambda $v0 e ( _to $v0 atlanta:_ci ) )"),
]
ATIS_LEXICON = (
    "denver :- NP : denver:ci\nboston :- NP : boston:ci\n"
    "dallas :- NP : dallas:ci\ndelta :- NP : dl:al\n"
)


@pytest.fixture
def atis_like(tmp_path):
  d = tmp_path / "atis_like"
  _write(d, "train.tsv", ATIS_TRAIN)
  _write(d, "test.tsv", ATIS_TEST)
  (tmp_path / "lexicon.txt").write_text(ATIS_LEXICON)
  return d


@pytest.fixture
def geo_like(tmp_path):
  d = tmp_path / "geo_like"
  _write(d, "train.tsv", TRAIN)
  _write(d, "test.tsv", TEST)
  return d


def _config(path, overrides=None):
  return tiny({
      "data.dataset": "tsv",
      "data.split": "",
      "data.data_path": str(path),
      "data.target_format": "sexpr",
      "data.scan_official_order": True,  # SCAN's only: the default.
      "data.max_eval_examples": 0,
      "data.source_markers": "none",
      "data.target_start": "bos",
      **(overrides or {}),
  })


TREE = {
    "transformer.positions": "tree",
    "transformer.tree_tokens": "arity",  # Logical forms: arity tokens.
    "transformer.tree_depth": 8,  # d_pos = d_model = 16 = n * k.
}


def test_target_format_reads_targets_as_trees(geo_like):
  c = _config(geo_like).data
  seq = seq2seq.load_data(c)
  assert seq.train[2] == ("capit of s0", "( capital:c s0 )")
  assert seq.gold["iid"] == [t for _, t in TEST] and seq.files == {
      "iid": "test"
  }
  tree = seq2seq.load_data(c, "dfs", "arity", tree_targets=True)
  with pytest.raises(ValueError, match="tree_tokens=.lcrs_null.*arity"):
    seq2seq.load_data(c, "dfs", "lcrs_null", tree_targets=True)
  assert tree.train[2] == ("capit of s0", "capital:c/1 s0/0")
  assert tree.evals["iid"][0][1].split()[:3] == ["lambda/3", "$v0/0", "e/0"]
  assert tree.tree_targets and tree.target_format == "sexpr"
  assert tree.gold == seq.gold  # The files' forms, whatever the target.
  # Text (the default): the targets as they are, no logical forms.
  text = seq2seq.load_data(
      _config(geo_like, {"data.target_format": "text"}).data
  )
  assert text.target_format == "text" and not text.gold


def test_entity_lexicon_anonymises_sentences_and_forms(atis_like):
  lexicon = str(atis_like.parent / "lexicon.txt")
  data = seq2seq.load_data(
      _config(atis_like, {"data.entity_lexicon": lexicon}).data
  )
  assert data.train[0] == (
      "from ci0 to ci1",
      "( _lambda $0 e ( _and ( _from $0 ci0 ) ( _to $0 ci1 ) ) )",
  )
  assert data.train[3][0] == "to ci0 on al0"
  # atlanta is not in this lexicon: written out.
  assert [s for s, _ in data.evals["iid"]] == ["from ci0 to ci1", "to atlanta"]
  assert data.sentences["iid"] == [s for s, _ in ATIS_TEST]
  assert data.gold["iid"] == [t for _, t in ATIS_TEST]
  assert data.entities["iid"] == [
      {"ci0": "dallas:_ci", "ci1": "denver:_ci"},
      {},
  ]
  assert any(
      "1 entity tokens of all sets left written" in n for n in data.notes
  )
  with pytest.raises(ValueError, match=r"needs data.target_format 'sexpr'"):
    config_lib.validate(
        _config(
            atis_like,
            {"data.entity_lexicon": lexicon, "data.target_format": "text"},
        )
    )
  with pytest.raises(ValueError, match=r"data.entity_lexicon: no file"):
    config_lib.validate(
        _config(atis_like, {"data.entity_lexicon": lexicon + ".missing"})
    )


def test_holdout_val_is_a_fixed_part_of_train(geo_like):
  data = seq2seq.load_data(_config(geo_like, {"data.holdout_val": 2}).data)
  kept, held = semparse.split_holdout(len(TRAIN), 2)
  assert data.evals["iid_val"] == [TRAIN[i] for i in held]
  assert data.train == [TRAIN[i] for i in kept]
  assert data.files["iid_val"] == "train_holdout"
  _write(geo_like, "dev.tsv", TEST)
  with pytest.raises(ValueError, match=r"dev.tsv is the validation set"):
    config_lib.validate(_config(geo_like, {"data.holdout_val": 2}))


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            {"data.target_format": "lisp"},
            r"data.target_format 'lisp'.*\['text', 'sexpr', 'prolog'\]",
        ),
        ({"data.holdout_val": -1}, r"data.holdout_val must be >= 0"),
    ],
)
def test_bad_data_options_name_the_choices(geo_like, overrides, message):
  with pytest.raises(ValueError, match=message):
    config_lib.validate(_config(geo_like, overrides))


def test_target_format_is_read_by_the_tsv_dataset_only():
  with pytest.raises(
      ValueError, match=r"data.target_format='sexpr' is read by dataset 'tsv'"
  ):
    config_lib.validate(tiny({"data.target_format": "sexpr"}))


def test_a_malformed_form_stops_the_run_naming_file_and_line(tmp_path):
  d = tmp_path / "bad"
  _write(d, "train.tsv", TRAIN[:2] + [("oops", "( capital:c s0")])
  _write(d, "test.tsv", TEST)
  with pytest.raises(tsv_lib.DataFormatError) as e:
    seq2seq.train_and_evaluate(_config(d), str(tmp_path / "run"))
  assert str(e.value).startswith(
      f"{d}/train.tsv, line 3: malformed sexpr logical form: the '(' of "
      "token 1 is never closed"
  )


def test_decoded_forms_and_their_scores():
  gold = [t for _, t in TEST]
  tokens = semparse.tree_tokens(semparse.parse(TRAIN[0][1], "sexpr")).split()
  text, ok = evaluation.decoded_logical_form(tokens, "sexpr", True)
  assert (text, ok) == (TRAIN[0][1], True)
  # Not one tree (a child missing): its tokens, and wrong.
  text, ok = evaluation.decoded_logical_form(tokens[:-1], "sexpr", True)
  assert text == " ".join(tokens[:-1]) and not ok
  # Sequence decoder: the tokens as they are.
  assert evaluation.decoded_logical_form(
      ["(", "a", "b", ")"], "sexpr", False
  ) == (
      "( a b )",
      True,
  )
  predicted = [
      # Variables renamed; conjuncts swapped: tree match only.
      "( lambda $0 e ( and ( loc:t $0 s0 ) ( lake:t $0 ) ) )",
      "( capital:c s0 )",
      "( argmin $0 ( state:t $0 ) ( size:i $0 ) )",
  ]
  scores = evaluation.logical_form_scores(predicted, gold, "sexpr")
  assert scores["exact"].tolist() == [False, True, True]
  assert scores["tree"].tolist() == [True, True, True]
  scores = evaluation.logical_form_scores(
      predicted, gold, "sexpr", [True, False, True]
  )
  assert scores["exact"].tolist() == [False, False, True]
  assert scores["tree"].tolist() == [True, False, True]


@pytest.mark.parametrize("model", ["seq2tree", "seq2seq", "seq2tree_anon"])
@pytest.mark.slow  # ~10 s each on an idle 2-core CPU, compile-bound.
def test_training_scores_logical_forms_and_writes_every_test_row(
    geo_like, atis_like, tmp_path, model
):
  """A tiny run: exact and tree match of every set in the results, and
  predictions_test.tsv holds one line per test row, in file order: the
  sentence and the gold form as in the file, the prediction (anonymised
  entities mapped back)."""
  anon = model.endswith("_anon")
  config = _config(
      atis_like if anon else geo_like,
      {
          "data.holdout_val": 2,
          "train.select_on": "iid_val",
          "train.steps": 2,
          "train.eval_every": 1,
          **(TREE if model.startswith("seq2tree") else {}),
          **(
              {"data.entity_lexicon": str(tmp_path / "lexicon.txt")}
              if anon
              else {}
          ),
      },
  )
  workdir = str(tmp_path / "run")
  results = seq2seq.train_and_evaluate(config, workdir, log=lambda _: None)
  accuracies = results["selection"]["accuracies"]
  assert set(accuracies) == {"iid", "iid_tree", "iid_val", "iid_val_tree"}
  assert results["predictions"] == {
      "iid": "predictions_test.tsv",
      "iid_val": "predictions_train_holdout.tsv",
  }
  with open(os.path.join(workdir, "predictions_test.tsv")) as f:
    rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
  assert [tuple(r[:2]) for r in rows] == (ATIS_TEST if anon else TEST)
  assert all(len(r) == 3 for r in rows)
  if anon:  # The first row's markers (ci0, ci1) are mapped back.
    assert not {"ci0", "ci1"} & set(rows[0][2].split())
  # The file is the selected state's decoding: its scores are the
  # selection's.
  for key, match in (
      ("iid", semparse.exact_match),
      ("iid_tree", semparse.tree_match),
  ):
    assert accuracies[key] == pytest.approx(
        np.mean([match(p, g, "sexpr") for _, g, p in rows])
    )
  assert any("sexpr logical forms" in n for n in results["data"]["notes"])
  # A saved checkpoint is scored the same way.
  saved = loop.evaluate_checkpoint(workdir, "best")["sets"]["iid"]
  assert saved["logical_form_exact_match"] == accuracies["iid"]
  assert saved["tree_match"] == accuracies["iid_tree"]


def test_table1_reproductions_are_the_papers_settings():
  """Sec. 5 and 5.2: 4 layers, d_model 256, d_ff 1024, d_pos 2048, k = 32,
  batch 128, dropout 0.1, clipping at 10; the published number beside a
  validation split for model selection."""
  published = {}
  for dataset, fmt, holdout in (
      ("jobs", "prolog", 50),
      ("geo", "sexpr", 60),
      ("atis", "sexpr", 0),
      ("atis_anon", "sexpr", 0),
  ):
    for model in ("seq2tree", "seq2seq"):
      r = reproductions.get(f"semparse_{dataset}_{model}")
      c = r.build("paper")
      assert bool(c.data.entity_lexicon) == dataset.endswith("_anon")
      t = c.transformer
      assert (t.d_model, t.ffn_dim, t.num_encoder_layers) == (256, 1024, 4)
      assert t.num_decoder_layers == 4 and t.dropout_rate == 0.1
      assert (c.train.batch_size, c.train.clip) == (128, 10.0)
      assert c.data.target_format == fmt and c.data.holdout_val == holdout
      assert c.train.select_on == "iid_val"
      assert os.path.isdir(c.data.data_path)
      if model == "seq2tree":
        assert (t.positions, t.tree_pos_width, t.tree_depth) == (
            "tree",
            2048,
            32,
        )
        assert not t.tree_encoder
      else:
        assert t.positions == "absolute"
      config_lib.validate(c)
      published[(dataset, model)] = r.published["iid"]
  assert published == {
      ("jobs", "seq2tree"): 0.843,
      ("jobs", "seq2seq"): 0.850,
      ("geo", "seq2tree"): 0.846,
      ("geo", "seq2seq"): 0.811,
      ("atis", "seq2tree"): 0.864,
      ("atis", "seq2seq"): 0.844,
      ("atis_anon", "seq2tree"): 0.864,
      ("atis_anon", "seq2seq"): 0.844,
  }
