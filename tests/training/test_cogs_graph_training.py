"""COGS graph training: fits real COGS rows, exact resume (and a changed
config refused), learning curves on every evaluation file, config errors."""

import os

import pytest

from relational_jax.training import cogs_graph as cg
from relational_jax.training import reporting

DATA = cg.DEFAULT_DATA_DIR


def _config(steps=80, **overrides):
  c = cg.default_config()
  et = c.edge_transformer
  et.num_layers, et.num_heads, et.head_dim = 2, 2, 16
  et.chunk_size = et.ffn_chunk_size = None
  et.dropout_rate = et.attention_dropout_rate = 0.0
  c.data.max_train_examples = 64
  c.data.eval_files = ("dev.tsv",)
  c.data.val_file = ""
  c.data.max_eval_examples = 16
  c.data.length_multiple = 16
  c.train.update(
      dict(
          steps=steps,
          batch_size=32,
          eval_batch_size=16,
          eval_every=20,
          warmup_steps=5,
          learning_rate=1e-2,
          weight_decay=0.0,
          progress=False,
      )
  )
  for k, v in overrides.items():
    cg.config_lib.set_path(c, k, v)
  return c


@pytest.mark.slow
def test_fits_real_rows_and_reports(tmp_path):
  results = cg.train_and_evaluate(_config(), str(tmp_path))
  last = results["history"][-1]
  assert last["train_accuracy"] >= 0.9, results["history"]
  assert last["loss"] < 0.2
  dev = results["evaluations"]["dev"]
  assert dev["count"] == 16 and set(results["final"]["accuracies"]) == {"dev"}
  assert sum(dev["count_per_category"].values()) == 16
  assert 0.0 <= dev["all"] <= 1.0
  saved = reporting.read_json(os.path.join(tmp_path, "results.json"))
  assert saved["final"] == results["final"]


@pytest.mark.slow
def test_exact_resume(tmp_path):
  small = {
      "train.eval_every": 3,
      "edge_transformer.num_layers": 1,
      "data.max_eval_examples": 4,
  }
  c = _config(steps=6, **small)
  full = cg.train_and_evaluate(c, str(tmp_path / "full"))
  stopped = cg.train_and_evaluate(
      _config(steps=6, **small, **{"train.stop_at_step": 3}),
      str(tmp_path / "split"),
  )
  assert stopped == {"stopped_at": 3}
  resumed = cg.train_and_evaluate(c, str(tmp_path / "split"))
  assert resumed["history"] == full["history"]
  assert resumed["final"] == full["final"]
  # Another config in the same work dir is refused.
  with pytest.raises(
      ValueError, match="cannot change on resume: train.batch_size"
  ):
    cg.train_and_evaluate(
        _config(steps=6, **small, **{"train.batch_size": 16}),
        str(tmp_path / "split"),
    )


def test_eval_tests_scores_every_file_at_every_evaluation(tmp_path):
  c = _config(
      steps=2,
      **{
          "train.eval_every": 1,
          "train.eval_tests": True,
          "edge_transformer.num_layers": 1,
          "data.eval_files": ("dev.tsv", "gen.tsv"),
          "data.max_eval_examples": 4,
      },
  )
  results = cg.train_and_evaluate(c, str(tmp_path))
  assert [e["step"] for e in results["history"]] == [1, 2]
  for entry in results["history"]:
    assert "val_accuracy" not in entry  # No data.val_file.
    assert set(entry["tests"]) == {"dev", "gen"}
    assert all(t["count"] == 4 for t in entry["tests"].values())
  # The last evaluation is the final model's.
  assert results["history"][-1]["tests"] == results["evaluations"]


def test_default_is_the_authors_dropout_and_init_with_the_papers_tied_layers():
  et = cg.default_config().edge_transformer
  # Their EdgeAttention drops the attention weights at --dropout too.
  assert et.dropout_rate == et.attention_dropout_rate == 0.1
  assert et.tied  # The paper's Base; their released code trains untied.
  assert et.init == "bergen"  # Their parameters' distributions.


def test_bad_configs(tmp_path):
  for path, value, match in (
      ("train.steps", 0, "train.steps"),
      ("train.select_on", "best", "select_on"),
      ("edge_transformer.num_heads", 0, "num_heads"),
      ("data.train_file", "missing.tsv", "not found"),
      ("head.max_distance", -1, "max_distance"),
      ("train.learning_rate", 0.0, "learning_rate"),
      ("data.eval_files", (), "data.eval_files is empty"),
      ("data.length_multiple", 0, "length_multiple must be >= 1, got 0"),
      ("data.max_eval_examples", -3, r"max_eval_examples must be >= 0.*-3"),
  ):
    with pytest.raises(ValueError, match=match):
      cg.train_and_evaluate(_config(**{path: value}), str(tmp_path / "x"))
