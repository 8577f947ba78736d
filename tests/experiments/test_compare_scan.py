"""The SCAN comparison's settings translation, its curve parsing, the data
options of the entry point, and the SCAN step benchmark's missing-reference
message (no reference checkout needed)."""

import json

import pytest

from experiments.bench import scan_step as bench_scan_step
from experiments import reproductions
from experiments.compare import protocol
from experiments.compare import reference
from experiments.compare import registry
from experiments.compare import scan_relative_universal as scan
from relational_jax.training import config as config_lib
from relational_jax.training.seq2seq import config as seq2seq_config
from tests.experiments.test_migrate_workdir import load_migrate


def test_scan_settings_translate_field_by_field(tmp_path):
  hp = scan.AUTHORS
  budget = scan.BUDGETS["cpu"]
  c = scan.our_config(budget, seed=2, data_dir=str(tmp_path))
  seq2seq_config.validate(c, data=False)
  t, tr, d = c.transformer, c.train, c.data
  assert (d.dataset, d.split, d.cutoff) == (
      "scan",
      "length_cutoff",
      hp["scan.length_cutoff"],
  )
  assert d.scan_official_order and d.data_dir == str(tmp_path)
  assert (t.positions, t.tied) == ("relative", True)
  assert (
      t.d_model == hp["state_size"] and t.num_heads == hp["transformer.n_heads"]
  )
  assert t.ffn_dim == hp["transformer.ff_multiplier"] * hp["state_size"]
  assert t.num_encoder_layers == hp["transformer.encoder_n_layers"]
  assert t.num_decoder_layers == hp["transformer.decoder_n_layers"]
  assert t.tie_embeddings == hp["transformer.tied_embedding"]
  # Their flag (0.5) never reaches their Transformer, whose layers train
  # with 0.1 (scan.RESOLVED).
  assert hp["dropout"] == 0.5 and t.dropout_rate == 0.1
  assert tr.learning_rate == hp["lr"] and tr.clip == hp["grad_clip"]
  assert tr.batch_size == hp["batch_size"] and tr.schedule == "constant"
  assert tr.warmup_steps == hp["lr_warmup"]
  assert (tr.steps, tr.eval_every, tr.seed) == (
      budget.steps,
      budget.eval_every,
      2,
  )
  # Their code's behaviour, found by the fidelity goldens (scan.RESOLVED).
  assert (d.source_markers, d.target_start) == ("bos_eos", "eos")
  assert (t.attention_out_bias, t.output_bias, t.init) == (
      False,
      True,
      "csordas",
  )
  assert t.embedding_dropout < 0
  assert seq2seq_config.model_config(c).embedding_dropout_rate == 0.0
  # Everything that shapes training equals the reproduction's paper config.
  paper = config_lib.to_dict(reproductions.get(scan.REPRODUCTION).config())
  diff = config_lib.diff(paper, config_lib.to_dict(c))
  assert set(diff) <= {
      "data.data_dir",
      "data.max_eval_examples",
      "train.steps",
      "train.eval_every",
      "train.seed",
      "train.select_on",
      "train.progress",
      "train.eval_batch_size",
      "train.csordas_batch_size",
  }, diff
  # Both sides scored alike: ours in their evaluation batches.
  assert tr.csordas_batch_size == hp["test_batch_size"]


def test_scan_reference_flags_carry_every_value():
  flags = scan.reference_flags()
  assert flags[:2] == ["-profile", "trafo_scan"]
  parsed = dict(zip(flags[2::2], flags[3::2]))
  for name, value in scan.AUTHORS.items():
    if value == "":
      assert f"-{name}" not in parsed  # Left to their default.
    elif isinstance(value, bool):
      assert parsed[f"-{name}"] == str(int(value))
    else:
      assert parsed[f"-{name}"] == str(value), name
  smoke = dict(
      zip(
          *[iter(scan.reference_flags(scan.AUTHORS, scan.BUDGETS["smoke"])[2:])]
          * 2
      )
  )
  assert smoke["-batch_size"] == str(scan.BUDGETS["smoke"].batch_size)


@pytest.mark.parametrize(
    "name,value,match",
    [
        ("transformer.variant", "noscale", "relative_universal"),
        ("wd", 0.1, "wd=0.1"),
        ("lr_sched.type", "noam", "step"),
        ("label_smoothing", 0.1, "label_smoothing"),
    ],
)
def test_scan_untranslatable_values_are_refused(tmp_path, name, value, match):
  with pytest.raises(ValueError, match=match):
    scan.our_config(
        scan.BUDGETS["cpu"],
        0,
        str(tmp_path),
        dict(scan.AUTHORS, **{name: value}),
    )


def test_scan_budgets_have_three_seeds_and_curve_points():
  cpu = scan.BUDGETS["cpu"]
  assert cpu.seeds >= 3 and cpu.steps // cpu.eval_every >= 2
  assert cpu.eval_every == scan.BUDGETS["paper"].eval_every == 500


def test_scan_reference_curve_is_parsed(tmp_path):
  curve = tmp_path / "curve.jsonl"
  entry_ = {
      "step": 200,
      "loss": 0.3,
      "accuracy": {"iid": 0.5, "gen": 0.0},
      "sizes": {"train": 16458, "iid": 1828, "gen": 2624},
  }
  curve.write_text(json.dumps(entry_) + "\n")
  assert protocol.wrapper_curve(str(tmp_path), scan.their_metrics) == [
      {"step": 200, "metrics": {"iid": 0.5, "gen": 0.0}}
  ]
  assert scan.ScanRelativeUniversal().finished_theirs(
      scan.Budget(200, 100, 1), str(tmp_path)
  ) == [{"step": 200, "metrics": {"iid": 0.5, "gen": 0.0}}]
  assert (
      scan.ScanRelativeUniversal().finished_theirs(
          scan.Budget(400, 100, 1), str(tmp_path)
      )
      is None
  )


def test_scan_our_side_is_scored_as_theirs():
  entry_ = {"step": 500, "iid": 0.9, "gen": 0.5}
  entry_.update(iid_csordas=0.95, gen_csordas=0.6)
  assert scan.our_metrics(entry_) == {"iid": 0.95, "gen": 0.6}
  with pytest.raises(ValueError, match=r"step 500 has no \['iid_csordas'"):
    scan.our_metrics({"step": 500, "iid": 0.9, "gen": 0.5})


def test_scan_reference_records_without_scoring_are_converted_then_reused(
    tmp_path,
):
  """Their side was always scored by their code: a record from before
  SCORING was written down is refused until scripts/migrate_workdir.py
  converts it, then reused; another scoring is refused."""
  from experiments.compare import __main__ as entry  # pylint: disable=g-import-not-at-top

  comparison = registry.get("scan_relative_universal")
  points = [{"step": 4, "metrics": {"iid": 0.5, "gen": 0.1}}]
  earlier = {
      "name": comparison.name,
      "budget_name": "smoke",
      **scan.describe(scan.BUDGETS["smoke"]),
      "runs": {"theirs": {"0": points}},
  }
  del earlier["scoring"]
  path = tmp_path / "earlier.json"
  path.write_text(json.dumps(earlier))
  reuse = lambda: entry.reused_reference_runs(
      str(path), comparison.name, comparison, "smoke"
  )
  with pytest.raises(ValueError, match=r"\['scoring'\] differ"):
    reuse()
  load_migrate().upgrade_comparison_record(str(path), log=lambda m: None)
  assert reuse() == {0: points}
  path.write_text(json.dumps(dict(earlier, scoring="strict")))
  with pytest.raises(ValueError, match=r"\['scoring'\] differ"):
    reuse()


def test_scan_comparison_reads_its_data_path_from_the_inputs(tmp_path):
  comparison = registry.get("scan_relative_universal")
  assert isinstance(comparison, scan.ScanRelativeUniversal)
  inputs = protocol.DataInputs("t.csv", str(tmp_path), "ref", "python")
  with pytest.raises(FileNotFoundError, match="tasks.txt"):
    comparison.prepare_data(scan.BUDGETS["smoke"], str(tmp_path / "s"), inputs)
  with pytest.raises(FileNotFoundError, match="tasks.txt"):
    scan.prepare_data(scan.BUDGETS["smoke"], str(tmp_path / "s"), str(tmp_path))


def test_scan_prepare_data_links_the_official_file(tmp_path):
  shared = tmp_path / "shared"
  (shared / "scan").mkdir(parents=True)
  (shared / "scan" / "tasks.txt").write_text("IN: jump OUT: I_JUMP\n")
  out = scan.prepare_data(
      scan.BUDGETS["smoke"], str(tmp_path / "s"), str(shared)
  )
  assert out == str(shared)
  link = tmp_path / "s" / "cache" / "scan_resplit" / "tasks.txt"
  assert link.read_text() == "IN: jump OUT: I_JUMP\n"


def test_bench_scan_step_without_reference_says_what_to_fetch(tmp_path):
  with pytest.raises(
      reference.MissingReferenceError,
      match="fetch github:RobertCsordas/transformer_generalization",
  ):
    bench_scan_step.check_reference(None)
  with pytest.raises(reference.MissingReferenceError, match="has no main.py"):
    bench_scan_step.check_reference(str(tmp_path))
  (tmp_path / "main.py").write_text("")
  assert bench_scan_step.check_reference(str(tmp_path)) == str(tmp_path)
