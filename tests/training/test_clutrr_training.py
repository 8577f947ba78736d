"""CLUTRR training: learns k = 2 end to end, exact resume, bad configs."""

import os

import numpy as np
import pytest

from relational_jax.training import clutrr
from relational_jax.training import config as config_lib
from relational_jax.training import reporting


def tiny_config(model="edge_transformer", steps=200):
  c = clutrr.default_config()
  c.model = model  # Tiny sizes for its section; the others keep defaults.
  if model == "edge_transformer":
    e = c.edge_transformer
    e.num_layers, e.num_heads, e.head_dim, e.dropout_rate = 2, 2, 8, 0.0
  elif model == "rat":
    r = c.rat
    r.num_layers, r.num_heads, r.d_model, r.dropout_rate = 2, 2, 16, 0.0
  elif model == "rt":
    t = c.rt
    t.num_layers, t.num_heads, t.head_dim, t.dropout_rate = 2, 2, 8, 0.0
    t.node_ffn_dim, t.edge_msg_dim, t.edge_ffn_dim = 32, 16, 32
  c.protocol.train_ks = (2,)
  c.protocol.num_train_per_k = 300
  c.protocol.generated_test_ks = (2, 4)
  c.protocol.holdout_fraction = 0.2  # Generated k = 2 tests: unseen graphs.
  c.protocol.num_generated_test_per_k = 8
  c.data.max_eval_examples = 48
  c.train.steps, c.train.batch_size, c.train.eval_every = steps, 32, 100
  c.train.warmup_steps, c.train.learning_rate = 10, 3e-3
  c.train.progress = False
  return c


@pytest.mark.slow
def test_edge_transformer_learns_k2(tmp_path, official_data):
  results = clutrr.train_and_evaluate(tiny_config(), str(tmp_path))
  acc = results["final"]["accuracies"]
  # The 38 official k = 2 test rows (all 62 k = 2 story graphs occur in a
  # few hundred generated training rows).
  assert acc["k2"] >= 0.95, acc
  assert set(acc) >= {"k2", "k10", "iid", "gen", "all"}
  assert results["evaluations"]["test"]["count_per_k"]["2"] > 0
  # 48 validation rows, still rising at step 200 (.69 at step 100).
  assert results["history"][-1]["val_accuracy"] >= 0.9
  saved = reporting.read_json(os.path.join(tmp_path, "results.json"))
  assert saved["final"] == results["final"]
  assert os.path.exists(os.path.join(tmp_path, "results_accuracy_by_k.png"))


@pytest.mark.slow
def test_resume_is_exact(tmp_path, official_data):
  config = tiny_config("rat", steps=40)
  config.train.eval_every = 20
  config.rat.dropout_rate = 0.1  # the dropout stream must resume too
  config.rat.num_layers = 1
  config.protocol.num_generated_test_per_k = 0
  config.data.max_eval_examples = 16
  config.train.eval_tests = True  # Learning curves on the test sets too.
  straight = clutrr.train_and_evaluate(config, str(tmp_path / "straight"))
  assert [sorted(e["tests"]) for e in straight["history"]] == [["test"]] * 2
  # The last point's test scores are the final (last-step) model's.
  assert straight["history"][-1]["tests"]["test"] == (
      straight["evaluations"]["test"]
  )
  config.train.stop_at_step = 20
  assert clutrr.train_and_evaluate(config, str(tmp_path / "resumed")) == {
      "stopped_at": 20
  }
  config.train.stop_at_step = 0
  resumed = clutrr.train_and_evaluate(config, str(tmp_path / "resumed"))
  assert resumed["final"] == straight["final"]
  assert resumed["history"] == straight["history"]
  a = clutrr.load_params(config, str(tmp_path / "straight"))
  b = clutrr.load_params(config, str(tmp_path / "resumed"))
  for x, y in zip(_leaves(a), _leaves(b)):
    np.testing.assert_array_equal(x, y)
  # Another model config in the same work dir is refused.
  config.rat.d_model = 32
  with pytest.raises(
      ValueError, match="cannot change on resume: rat.d_model: saved 16, now 32"
  ):
    clutrr.train_and_evaluate(config, str(tmp_path / "resumed"))


def _leaves(tree):
  import jax  # pylint: disable=g-import-not-at-top

  return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


@pytest.mark.parametrize(
    "path,value,match",
    [
        ("model", "gat", r"model 'gat'; valid choices are .*'rt', 'floyd'"),
        ("train.schedule", "cosine", "schedule"),
        ("train.select_on", "best", "select_on"),
        ("train.steps", 0, "train.steps must be >= 1"),
        ("protocol.val_fraction", 1.0, "val_fraction"),
        ("data.max_eval_examples", -5, r"max_eval_examples must be >= 0.*-5"),
        (
            "protocol.num_generated_test_per_k",
            -1,
            "num_generated_test_per_k must be >= 0, got -1",
        ),
        ("protocol.train_ks", (1, 2), "train_ks"),
        ("protocol.train_source", "nope.csv", "neither 'generated' nor a file"),
        ("data.test_files", ("missing.csv",), "missing.csv not found"),
        ("protocol.generated_test_ks", (3, 4), "shares k = \\[3\\]"),
        ("protocol.holdout_fraction", 1.0, "holdout_fraction must be in"),
        (
            "protocol.closure",
            "exact",
            r"protocol.closure 'exact'; valid choices are \['clutrr', 'sound'",
        ),
        ("head.layers", 3, "head.layers must be 1 or 2"),
        ("head.rt_readout", "pool", "rt_readout"),
        (
            "head.rt_node_init",
            "learned",
            r"head.rt_node_init='learned' is read by model 'rt' only, not by "
            r"model='edge_transformer'",
        ),
        ("edge_transformer.ablation", "keys", "ablation"),
        ("rat.num_heads", 7, "must divide d_model"),
        ("floyd.norm", "batchnorm", "norm 'batchnorm' is not supported"),
        ("floyd.head_dim", 0, "FloydConfig.head_dim must be a positive int"),
    ],
)
def test_bad_config_values_are_named(path, value, match, tmp_path):
  config = clutrr.default_config()
  section = path.split(".")[0]
  config.model = section if section in ("rat", "floyd") else config.model
  config = clutrr.config_lib.override(config, {path: value})
  with pytest.raises(ValueError, match=match):
    clutrr.validate(config)


def test_num_train_per_k_is_refused_with_csv_rows():
  config = clutrr.config_lib.override(
      clutrr.default_config(),
      {
          "protocol.train_source": "validation.csv",
          "protocol.num_train_per_k": 100,
      },
  )
  with pytest.raises(
      ValueError,
      match=r"protocol.num_train_per_k=100 is never read: "
      r"protocol.train_source='validation.csv' reads its rows from the "
      r"CSV file. Leave it at its default 17500.",
  ):
    clutrr.validate(config)
  # The generated test set's off switch leaves its settings settable.
  clutrr.validate(
      clutrr.config_lib.override(
          clutrr.default_config(),
          {
              "protocol.train_source": "validation.csv",
              "protocol.num_generated_test_per_k": 0,
              "protocol.generated_test_ks": (5, 6),
              "protocol.closure": "sound",
          },
      )
  )


def test_selection_on_validation_needs_validation_rows():
  config = clutrr.config_lib.override(
      clutrr.default_config(),
      {"train.select_on": "val", "protocol.val_fraction": 0.0},
  )
  with pytest.raises(ValueError, match=r"select_on='val' needs validation"):
    clutrr.validate(config)


def test_batch_size_must_divide_over_devices(tmp_path, official_data):
  """On two (forced host) devices a batch of 3 is refused; a subprocess, as
  the device count is fixed when JAX starts."""
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top

  script = (
      "import jax, pytest\n"
      "assert len(jax.devices()) == 2\n"
      "from relational_jax.training import clutrr\n"
      "from tests.training.test_clutrr_training import tiny_config\n"
      "config = tiny_config(steps=1)\n"
      "config.train.batch_size = 3\n"
      "with pytest.raises(ValueError, match='not divisible'):\n"
      f"  clutrr.train_and_evaluate(config, {str(tmp_path)!r})\n"
      "print('REFUSED')\n"
  )
  env = dict(
      os.environ,
      JAX_PLATFORMS="cpu",
      XLA_FLAGS="--xla_force_host_platform_device_count=2",
  )
  repo = os.path.dirname(
      os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  )
  proc = subprocess.run(
      [sys.executable, "-c", script],
      cwd=repo,
      env=env,
      capture_output=True,
      text=True,
      timeout=600,
  )
  assert proc.returncode == 0 and "REFUSED" in proc.stdout, proc.stderr[-3000:]


def _entry(per_k, counts=None):
  counts = counts or {k: 10 for k in per_k}
  return {
      "all": float(np.mean(list(per_k.values()))),
      "per_k": per_k,
      "count_per_k": counts,
  }


def test_mean_over_runs_averages_per_k():
  mean = clutrr.mean_over_runs(
      [_entry({"2": 1.0, "6": 0.5}), _entry({"2": 0.8, "6": 0.7})]
  )
  np.testing.assert_allclose(
      [mean["per_k"]["2"], mean["per_k"]["6"]], [0.9, 0.6]
  )
  np.testing.assert_allclose(mean["std_per_k"]["6"], np.std([0.5, 0.7], ddof=1))
  assert mean["runs"] == 2 and mean["count_per_k"] == {"2": 10, "6": 10}
  one = clutrr.mean_over_runs([_entry({"6": 0.5})])
  assert one["per_k"] == {"6": 0.5} and one["std_per_k"] == {"6": 0.0}


def test_mean_over_runs_refuses_different_test_sets():
  with pytest.raises(ValueError, match="not the same test set"):
    clutrr.mean_over_runs(
        [_entry({"6": 0.5}), _entry({"6": 0.5}, counts={"6": 9})]
    )
  with pytest.raises(ValueError, match="no entries"):
    clutrr.mean_over_runs([])


def test_aggregate_averages_the_test_sets_all_seeds_share():
  """`reproduce --seeds`' CLUTRR summary: per test set the mean over runs;
  the validation rows follow the training seed, so they are left out."""
  runs = [
      {"evaluations": {"val": _entry({"2": 1.0}), "test": _entry({"6": 0.5})}},
      {
          "evaluations": {
              "val": _entry({"2": 0.0}, counts={"2": 9}),
              "test": _entry({"6": 0.7}),
          }
      },
  ]
  out = clutrr.aggregate(runs)
  assert list(out) == ["test"] and clutrr.SEED_PATH == "train.seed"
  np.testing.assert_allclose(out["test"]["per_k"]["6"], 0.6)
