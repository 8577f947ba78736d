"""The comparison harness's own parts: curve aggregation and the matching
rule, matched-setting translation, the missing-reference message."""

import json
import math
import os
import subprocess
import sys

import pytest

from experiments.compare import clutrr_et
from experiments.compare import cogs_graph_et
from experiments.compare import curves
from experiments.compare import protocol
from experiments.compare import reference
from tests.experiments.test_migrate_workdir import load_migrate

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)


def _run(points):
  return [{"step": s, "metrics": m} for s, m in points]


def test_aggregate_mean_sd_range_per_step_and_metric():
  runs = [
      _run([(10, {"a": 0.1, "b": 1.0}), (20, {"a": 0.5})]),
      _run([(10, {"a": 0.3, "b": 3.0}), (20, {"a": 0.7})]),
      _run([(10, {"a": 0.2, "b": 2.0}), (20, {"a": 0.9})]),
  ]
  agg = curves.aggregate(runs)
  assert sorted(agg) == ["a", "b"] and sorted(agg["a"]) == [10, 20]
  a10 = agg["a"][10]
  assert a10["n"] == 3 and a10["values"] == [0.1, 0.3, 0.2]
  assert math.isclose(a10["mean"], 0.2) and math.isclose(a10["sd"], 0.1)
  assert (a10["min"], a10["max"]) == (0.1, 0.3)
  assert math.isclose(agg["b"][10]["mean"], 2.0)
  assert agg["a"][20]["sd"] == pytest.approx(0.2)


def test_aggregate_rejects_empty_and_malformed_runs():
  with pytest.raises(ValueError, match="at least one run"):
    curves.aggregate([])
  with pytest.raises(ValueError, match="'step' and 'metrics'"):
    curves.aggregate([[{"metrics": {"a": 1.0}}]])


def test_matching_rule_uses_the_larger_of_range_and_two_standard_errors():
  ours = curves.summarize([0.50, 0.60, 0.70])  # range 0.2, sd 0.1
  theirs = curves.summarize([0.74, 0.75, 0.76])  # range 0.02
  se = math.sqrt(0.1**2 / 3 + 0.01**2 / 3)
  assert curves.tolerance(ours, theirs) == pytest.approx(max(0.2, 2 * se))
  close = curves.compare_sides({"m": {5: ours}}, {"m": {5: theirs}})
  assert close["all_match"] and close["points"][0]["diff"] == pytest.approx(
      -0.15
  )
  far = curves.compare_sides(
      {"m": {5: ours}}, {"m": {5: curves.summarize([0.95, 0.96, 0.97])}}
  )
  assert not far["all_match"] and far["unmatched"] == [("m", 5)]
  # Two standard errors win when the ranges are narrow but seeds are few.
  a, b = curves.summarize([0.0, 1.0]), curves.summarize([0.5, 0.5])
  assert curves.tolerance(a, b) == pytest.approx(
      max(1.0, 2 * math.sqrt(0.5 / 2))
  )


def test_a_point_on_one_side_only_is_unmatched_not_skipped():
  s = curves.summarize([0.5])
  out = curves.compare_sides({"m": {1: s, 2: s}}, {"m": {1: s}})
  assert out["num_points"] == 2 and out["num_matched"] == 1
  assert out["points"][1]["missing"] == "theirs"


def test_plot_writes_a_png(tmp_path):
  s = curves.summarize([0.4, 0.6])
  comparison = curves.compare_sides({"m": {1: s, 2: s}}, {"m": {1: s, 2: s}})
  path = str(tmp_path / "c.png")
  curves.plot(comparison, ["m"], path, title="t")
  assert os.path.getsize(path) > 1000


def test_clutrr_et_settings_translate_field_by_field(tmp_path):
  hp = clutrr_et.AUTHORS
  budget = clutrr_et.BUDGETS["cpu"]
  c = clutrr_et.our_config(budget, seed=2, data_dir=str(tmp_path))
  et, t, p = c.edge_transformer, c.train, c.protocol
  assert et.num_layers == hp["num_message_rounds"]
  assert et.num_heads * et.head_dim == hp["dim"]
  assert et.num_heads == hp["num_heads"]
  assert et.ffn_dim == hp["ff_factor"] * hp["dim"]
  assert et.dropout_rate == hp["dropout"] and et.tied == hp["share_layers"]
  assert t.learning_rate == hp["lr"] and t.batch_size == hp["batch_size"]
  assert t.clip == hp["max_grad_norm"]
  assert t.warmup_steps == hp["num_warmup_steps"] and t.schedule == "linear"
  assert (t.steps, t.eval_every, t.seed) == (budget.steps, budget.eval_every, 2)
  assert t.eval_tests and p.val_fraction == 0.2
  assert p.train_source == "train.csv" and c.data.test_files == ("test.csv",)
  # The same values reach their train.py as flags.
  flags = clutrr_et.reference_flags()
  parsed = dict(zip(flags[::2], flags[1::2]))
  assert "--share_layers" in flags
  for name, value in hp.items():
    if name != "share_layers":
      assert parsed[f"--{name}"] == str(value), name
  with pytest.raises(ValueError, match="scheduler='constant'"):
    clutrr_et.our_config(
        budget, 0, str(tmp_path), dict(hp, scheduler="constant")
    )


def test_cogs_graph_et_settings_translate_field_by_field(tmp_path):
  hp = cogs_graph_et.AUTHORS
  budget = cogs_graph_et.BUDGETS["cpu"]
  c = cogs_graph_et.our_config(budget, seed=1, data_dir=str(tmp_path))
  et, t, d = c.edge_transformer, c.train, c.data
  assert et.num_layers == hp["num_message_rounds"]
  assert et.num_heads * et.head_dim == hp["dim"]
  assert et.num_heads == hp["num_heads"]
  assert et.ffn_dim == hp["ff_factor"] * hp["dim"]
  assert et.dropout_rate == et.attention_dropout_rate == hp["dropout"]
  # The function their code trains: untied, parent scores from x_ij; their
  # initialisation.
  assert not et.tied and not c.head.parent_from_column
  assert et.init == "bergen"
  assert t.optimizer == "adamw" and t.weight_decay == 0.01  # torch's AdamW.
  assert t.learning_rate == hp["lr"] and t.batch_size == hp["batch_size"]
  assert t.clip == hp["max_grad_norm"]
  assert t.warmup_steps == hp["num_warmup_steps"] and t.schedule == "linear"
  assert (t.steps, t.eval_every, t.seed) == (budget.steps, budget.eval_every, 1)
  assert t.eval_tests and d.val_file == "" and d.max_eval_examples == 0
  assert d.eval_files == ("dev.tsv", "test.tsv", "gen.tsv")
  flags = cogs_graph_et.reference_flags()
  parsed = dict(zip(flags[::2], flags[1::2]))
  assert parsed == {f"--{k}": str(v) for k, v in hp.items()}
  for name, value in (("optimizer", "Adam"), ("input_encoding", "positional")):
    with pytest.raises(ValueError, match=f"{name}=.*{value!r}"):
      cogs_graph_et.our_config(budget, 0, str(tmp_path), {**hp, name: value})


def test_cogs_graph_et_writes_the_same_rows_for_both_sides(tmp_path):
  from relational_jax.data import cogs_graph as data
  from relational_jax.data import paths

  src = tmp_path / "cogs"
  src.mkdir()
  for name, rows in (("train", 12), ("dev", 20), ("test", 20), ("gen", 30)):
    with open(os.path.join(paths.COGS_DIR, f"{name}.tsv")) as f:
      (src / f"{name}.tsv").write_text("".join(f.readlines()[:rows]))
  budget = cogs_graph_et.Budget(steps=1, eval_every=1, seeds=1, eval_examples=5)
  out = cogs_graph_et.prepare_data(budget, str(tmp_path / "s"), str(src))
  for name, rows in (("train", 12), ("dev", 5), ("test", 5), ("gen", 5)):
    tsv = os.path.join(out, f"{name}.tsv")
    with open(os.path.join(out, f"{name}_seqtag.jsonl")) as f:
      seqtag = [json.loads(line) for line in f]
    assert len(seqtag) == rows, name
    converted = data.canonical_jsonl(data.convert_file(tsv)).split("\n")
    assert seqtag == [json.loads(line) for line in converted]
    with open(tsv) as f:
      kept = f.readlines()
    with open(src / f"{name}.tsv") as f:
      original = f.readlines()
    assert all(line in original for line in kept)  # Rows of the file...
    assert kept == [l for l in original if l in kept]  # ...in its order.
  assert {g["distribution"] for g in seqtag} <= {
      line.split("\t")[2].strip() for line in original
  }
  # Written once: a second call keeps the files.
  stamp = os.path.getmtime(os.path.join(out, "gen.tsv"))
  cogs_graph_et.prepare_data(budget, str(tmp_path / "s"), str(src))
  assert os.path.getmtime(os.path.join(out, "gen.tsv")) == stamp


def test_reference_curve_log_is_parsed(tmp_path):
  log = tmp_path / "curve.jsonl"
  entry = {
      "step": 50,
      "loss": 1.0,
      "tests": {
          "test": {"all": 0.5, "per_k": {"2": 1.0, "3": 0.0}, "count_per_k": {}}
      },
  }
  log.write_text(json.dumps(entry) + "\n")
  read = lambda d: protocol.wrapper_curve(str(d), clutrr_et.metrics_of)
  assert read(tmp_path / "absent") == []
  points = read(tmp_path)
  assert points == [
      {"step": 50, "metrics": {"test_all": 0.5, "test_k2": 1.0, "test_k3": 0.0}}
  ]


@pytest.mark.slow
def test_missing_reference_names_what_to_fetch(tmp_path):
  with pytest.raises(
      reference.MissingReferenceError, match="github.com/bergen/EdgeTransformer"
  ):
    reference.require("clutrr_et", None, clutrr_et.REPOSITORY, clutrr_et.MARKER)
  with pytest.raises(
      reference.MissingReferenceError, match="has no clutrr/train.py"
  ):
    reference.require(
        "clutrr_et", str(tmp_path), clutrr_et.REPOSITORY, clutrr_et.MARKER
    )
  proc = subprocess.run(
      [
          sys.executable,
          "-m",
          "experiments.compare",
          "clutrr_et",
          f"--workdir={tmp_path}/w",
          f"--output_dir={tmp_path}/o",
      ],
      cwd=REPO,
      capture_output=True,
      text=True,
      timeout=300,
      check=False,
  )
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert "No --reference given" in proc.stderr
  assert "fetch github:bergen/EdgeTransformer" in proc.stderr
  assert not os.path.exists(tmp_path / "o")


def test_unknown_comparison_and_budget_name_the_choices(tmp_path):
  from experiments.compare import __main__ as entry  # pylint: disable=g-import-not-at-top

  with pytest.raises(ValueError, match="clutrr_et"):
    entry.run(
        "nope", None, "cpu", str(tmp_path), str(tmp_path), "python", "x.csv"
    )
  with pytest.raises(ValueError, match="smoke"):
    entry.run(
        "clutrr_et",
        None,
        "huge",
        str(tmp_path),
        str(tmp_path),
        "python",
        "x.csv",
    )


def test_report_only_aggregates_the_seeds_both_sides_finished(tmp_path):
  from experiments.compare import __main__ as entry  # pylint: disable=g-import-not-at-top

  # The smoke budget: 4 steps, evaluated every 2.

  def tests(acc):
    return {"test": {"all": acc, "per_k": {"2": acc}, "count_per_k": {}}}

  work = tmp_path / "w"
  for seed, acc in ((0, 0.5), (1, 0.7)):
    (work / f"ours_seed{seed}").mkdir(parents=True)
    (work / f"ours_seed{seed}" / "results.json").write_text(
        json.dumps({
            "history": [
                {"step": 2, "tests": tests(acc - 0.1)},
                {"step": 4, "tests": tests(acc)},
            ]
        })
    )
  (work / "theirs_seed0").mkdir()
  (work / "theirs_seed0" / "curve.jsonl").write_text(
      "".join(
          json.dumps({"step": s, "tests": tests(a)}) + "\n"
          for s, a in ((2, 0.45), (4, 0.55))
      )
  )
  (work / "theirs_seed1").mkdir()  # Unfinished: stopped at step 2.
  (work / "theirs_seed1" / "curve.jsonl").write_text(
      json.dumps({"step": 2, "tests": tests(0.6)}) + "\n"
  )
  out = tmp_path / "out"
  result = entry.run(
      "clutrr_et",
      None,
      "smoke",
      str(work),
      str(out),
      "python",
      "unused.csv",
      report_only=True,
      log=lambda m: None,
  )
  assert result["seeds_finished"] == [0] and result["seeds"] == 2
  assert (out / "clutrr_et__smoke__partial.json").exists()
  assert (out / "clutrr_et__smoke__partial.png").exists()
  point = next(
      p
      for p in result["comparison"]["points"]
      if p["metric"] == "test_all" and p["step"] == 4
  )
  assert point["ours"]["values"] == [0.5] and point["theirs"]["values"] == [
      0.55
  ]
  with pytest.raises(ValueError, match="no seed .* is finished on both sides"):
    entry.run(
        "clutrr_et",
        None,
        "smoke",
        str(tmp_path / "empty"),
        str(out),
        "python",
        "unused.csv",
        report_only=True,
    )


def test_reuse_reference_takes_an_earlier_comparisons_reference_seeds(tmp_path):
  from experiments.compare import __main__ as entry  # pylint: disable=g-import-not-at-top

  def point(step, acc):
    return {"step": step, "metrics": {"test_all": acc}}

  work = tmp_path / "w"
  for seed in (0, 1):
    (work / f"ours_seed{seed}").mkdir(parents=True)
    (work / f"ours_seed{seed}" / "results.json").write_text(
        json.dumps({
            "history": [
                {"step": s, "tests": {"test": {"all": 0.5, "per_k": {}}}}
                for s in (2, 4)
            ]
        })
    )
  earlier = {
      "name": "clutrr_et",
      "budget_name": "smoke",
      **clutrr_et.describe(clutrr_et.BUDGETS["smoke"]),
      "runs": {
          "theirs": {str(s): [point(2, 0.4), point(4, 0.6)] for s in (0, 1)}
      },
  }
  path = tmp_path / "earlier.json"

  def reuse():
    path.write_text(json.dumps(earlier))
    return entry.run(
        "clutrr_et",
        None,
        "smoke",
        str(work),
        str(tmp_path / "out"),
        "python",
        "unused.csv",
        report_only=True,
        reuse_reference=str(path),
        log=lambda m: None,
    )

  result = reuse()
  assert result["seeds_finished"] == [0, 1]
  assert result["reference_reused_from"] == str(path)
  assert result["runs"]["theirs"][1][-1] == point(4, 0.6)
  # A record worded by another version (the generator's module before its
  # rename) is refused until scripts/migrate_workdir.py converts it.
  earlier["data"] = earlier["data"].replace("clutrr_generator", "clutrr")
  with pytest.raises(ValueError, match="\\['data'\\] differ"):
    reuse()
  migrate = load_migrate()
  migrate.upgrade_comparison_record(str(path), log=lambda m: None)
  earlier = json.loads(path.read_text())
  again = reuse()
  assert again["runs"]["theirs"] == result["runs"]["theirs"]
  # Our side's description (a changed default of ours) does not touch theirs.
  earlier["ours"] = "clutrr: an earlier default of ours"
  assert reuse()["runs"]["theirs"] == result["runs"]["theirs"]
  # A record that differs from this comparison's (their flags) is refused.
  earlier["reference_flags"] = ["--lr", "0.5"]
  with pytest.raises(ValueError, match="\\['reference_flags'\\] differ"):
    reuse()


def test_chance_failure_rate_of_the_matching_rule():
  # Same distribution on both sides: the rule still fails now and then
  # (about 5% of points at 3 seeds), less often with more seeds.
  three = curves.chance_failure_rate(3, trials=20_000)
  assert 0.03 < three < 0.07
  assert curves.chance_failure_rate(5, trials=20_000) < three
  with pytest.raises(ValueError, match="seeds must be >= 2"):
    curves.chance_failure_rate(1)


def test_markdown_table_of_a_comparison():
  from experiments.compare import table  # pylint: disable=g-import-not-at-top

  ours = [
      [
          {"step": 10, "metrics": {"acc": 0.5}},
          {"step": 20, "metrics": {"acc": 0.7}},
      ],
      [
          {"step": 10, "metrics": {"acc": 0.7}},
          {"step": 20, "metrics": {"acc": 0.9}},
      ],
  ]
  theirs = [
      [
          {"step": 10, "metrics": {"acc": 0.1}},
          {"step": 20, "metrics": {"acc": 0.8}},
      ],
      [
          {"step": 10, "metrics": {"acc": 0.1}},
          {"step": 20, "metrics": {"acc": 0.8}},
      ],
  ]
  result = {
      "comparison": curves.compare_sides(
          curves.aggregate(ours), curves.aggregate(theirs)
      ),
      "seeds_finished": [0, 1],
  }
  text = table.markdown(result)
  lines = text.splitlines()
  assert lines[0] == "| step | acc: ours / theirs |"
  # Step 10: |0.6 - 0.1| = 0.5 > max(ranges 0.2, 0; 2 se) -> fails.
  assert lines[2] == "| 10 | 0.600 +- 0.141 / 0.100 +- 0.000 **x** |"
  assert lines[3] == "| 20 | 0.800 +- 0.141 / 0.800 +- 0.000 |"
  assert "1 of 2 points match" in text
  with pytest.raises(ValueError, match="unknown metrics \\['loss'\\]"):
    table.markdown(result, ["loss"])


def test_reference_commit_is_git_head_or_none(tmp_path):
  """The commit a results JSON names for the authors' checkout."""
  assert reference.commit(str(tmp_path)) is None  # not a git work tree
  git = [
      "git",
      "-C",
      str(tmp_path),
      "-c",
      "user.name=t",
      "-c",
      "user.email=t@t",
  ]
  subprocess.run(git + ["init", "-q"], check=True)
  (tmp_path / "f").write_text("x")
  subprocess.run(git + ["add", "f"], check=True)
  subprocess.run(git + ["commit", "-qm", "c"], check=True)
  head = subprocess.run(
      git + ["rev-parse", "HEAD"], check=True, capture_output=True, text=True
  ).stdout.strip()
  assert reference.commit(str(tmp_path)) == head and len(head) == 40
