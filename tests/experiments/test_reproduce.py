"""experiments.reproduce: the list, and every named reproduction at the smoke
budget, end to end (the published number is stored beside ours)."""

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from experiments import reproduce
from experiments import reproductions
from experiments.reproductions import clutrr as clutrr_reproductions
from relational_jax.training import config as config_lib

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
REQUIRED = (
    "rt_clrs_core8",
    "rt_clrs_all30",
    "mpnn_clrs_core8",
    "mpnn_clrs_all30",
    "triplet_gmpnn_clrs_all30",
    "scan_cutoff26_relative_universal",
    "scan_cutoff26_absolute_universal",
    "cogs_relative_transformer",
    "cogs_edge_transformer",
    "readme_main_job",
)


@pytest.mark.slow
def test_list_names_every_reproduction_with_its_paper_and_number():
  proc = subprocess.run(
      [sys.executable, "-m", "experiments.reproduce", "--list"],
      cwd=REPO,
      capture_output=True,
      text=True,
      timeout=300,
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert set(REQUIRED) <= set(reproductions.REPRODUCTIONS)
  for name in reproductions.REPRODUCTIONS:
    line = next(l for l in proc.stdout.splitlines() if l.startswith(name + " "))
    key, value = reproductions.get(name).headline()
    number = "no published number" if value is None else f"{key} {value}"
    assert line.endswith(number) and reproductions.get(name).where in line


def test_budgets_scale_only_length_evaluation_and_seeds():
  allowed = (
      "protocol.",
      "train.steps",
      "train.eval_every",
      "train.checkpoint_every",  # a save cadence, as eval_every
      "train.progress",
      "train.batch_size",
      "train.eval_batch_size",
      "data.max_eval_examples",
      "data.num_train",
      "data.num_test",
      "seeds",
      "algorithms",
      "results_path",  # where the results go (pair_models_clrs)
  )
  # Smoke runs of For2Lam may also share one data split (its short / long
  # variants of a model share one smoke run, see smoke_workdirs) and shrink
  # the model (test_for2lam_paper_configs_build checks the paper sizes); the
  # COGS Edge Transformer's smoke run has one layer a side, CLUTRR's one
  # layer (test_clutrr_paper_configs_build checks the paper sizes); COGS
  # smoke runs train on a few rows (the longest make every step long).
  smoke_only = (
      "data.split",
      "data.max_train_examples",
      "transformer.d_model",
      "edge_transformer.num_layers",
      "rat.num_layers",
      "rt.num_layers",
      "floyd.num_layers",
      "transformer.num_encoder_layers",
      "transformer.num_decoder_layers",
      "edge_transformer.et.num_layers",
      "edge_transformer.num_decoder_layers",
  )
  for r in reproductions.REPRODUCTIONS.values():
    for budget, overrides in r.budgets.items():
      for path in overrides:
        ok = allowed + (smoke_only if budget == "smoke" else ())
        assert path.startswith(ok), (r.name, budget, path)
      r.build(budget)  # every override names a real path
  with pytest.raises(
      ValueError, match=r"Unknown budget 'fast'; valid budgets are"
  ):
    reproductions.get("rt_clrs_core8").build("fast")
  with pytest.raises(
      ValueError, match=r"Unknown reproduction 'rt'; valid names are"
  ):
    reproductions.get("rt")


def test_set_overrides_parse_and_reach_the_record_and_the_work_dir():
  got = reproduce.parse_overrides([
      "transformer.tree_pe_norm=sinusoid",
      "train.steps=10",
      "protocol.train_ks=(2, 3)",
      "train.learning_rate=1e-3",
  ])
  assert got == {
      "transformer.tree_pe_norm": "sinusoid",
      "train.steps": 10,
      "protocol.train_ks": (2, 3),
      "train.learning_rate": 1e-3,
  }
  assert [reproduce.set_text(v) for v in got.values()] == [
      "sinusoid",
      "10",
      "(2, 3)",
      "0.001",
  ]
  assert reproduce.set_text("10") == "'10'"  # Stays a string when re-read.
  assert (
      reproduce.overrides_suffix({"transformer.tree_pe_norm": "sinusoid"})
      == "__transformer.tree_pe_norm=sinusoid"
  )
  assert reproduce.overrides_suffix({}) == ""
  with pytest.raises(ValueError, match="expected PATH=VALUE"):
    reproduce.parse_overrides(["transformer.tree_pe_norm"])
  with pytest.raises(
      ValueError, match="unknown config path 'transformer.nope'"
  ):
    reproduce.run(
        "for2lam_short_tree_dfs",
        "smoke",
        "/nonexistent",
        overrides={"transformer.nope": 1},
    )
  # A value of the wrong type names the path and the type it takes.
  for path, value, kind in (
      ("train.steps", "abc", "int"),
      ("protocol.train_ks", 2, "tuple"),
  ):
    with pytest.raises(
        ValueError, match=rf"config path '{path}' takes a {kind} \(now"
    ):
      reproduce.check("clutrr_et_k23", "smoke", {path: value})


def test_run_control_paths_make_no_variant():
  stop = {"train.stop_at_step": 5, "train.progress": False}
  assert reproduce._default_workdir("x", "smoke", stop) == (
      "runs/reproduce/x_smoke"
  )
  both = dict(stop, **{"train.steps": 9})
  assert reproduce.variant_overrides(both) == {"train.steps": 9}
  assert reproduce._default_workdir("x", "smoke", both) == (
      "runs/reproduce/x_smoke__train.steps=9"
  )


def test_paper_budgets_follow_the_papers():
  """The CLRS reproductions' paper budget is the RT paper's protocol (its
  authors' run.py) as a config of the library's CLRS task: n = 16 training
  samples from a set of 10,000, batch 4, 320,000 examples, validation every
  320, no clipping, hint noise 0.5, hard re-prediction, Haiku's default
  encoder init; their modern-recipe variant keeps the step budget."""
  for name, processor in (
      ("rt_clrs_core8", "rt"),
      ("mpnn_clrs_all30", "mpnn"),
      ("floyd_clrs_core8", "floyd"),
      ("triplet_gmpnn_clrs_all30", "triplet_gmpnn"),
  ):
    c = reproductions.get(name).build("paper")
    assert reproductions.get(name).task == "clrs"
    assert c.processor_type == processor
    assert c.seeds == tuple(range(42, 62))
    p, m, t = c.protocol, c.model, c.train
    assert (t.steps, t.eval_every, p.train_size) == (80_000, 80, 10_000)
    assert t.batch_size * t.steps == 320_000
    assert t.batch_size * t.eval_every == 320
    assert p.train_lengths == (16,) and p.test_lengths == (64,)
    assert t.clip == 0.0 and m.hint_teacher_forcing == 0.5
    assert (m.hint_repred_mode, m.encoder_init) == ("hard", "default")
    # The test set is scored where the best checkpoint is (not at every
    # validation); the cpu budget keeps the OOD curve.
    assert p.test_points == "new_best"
    cpu = reproductions.get(name).build("cpu").protocol
    assert cpu.test_points == "every_evaluation"
  rt = reproductions.get("rt_clrs_core8").build("paper")
  assert rt.rt.num_layers == 3
  assert rt.processor.nb_heads * rt.rt.head_dim == 192
  mpnn = reproductions.get("mpnn_clrs_core8").build("paper")
  assert (mpnn.model.hidden_dim, mpnn.model.carry_state) == (512, False)
  assert len(reproductions.get("rt_clrs_all30").build("paper").algorithms) == 30
  modern = reproductions.get("rt_clrs_core8_modern").build("paper")
  assert modern.train.batch_size * modern.train.steps == 320_000
  assert modern.protocol.train_lengths == (4, 7, 11, 13, 16)
  scan = reproductions.get("scan_cutoff26_relative_universal").build("paper")
  assert scan.train.steps == 50_000 and scan.transformer.positions == "relative"


def test_table5_standard_errors_are_stored_beside_its_means():
  """Bergen et al. report mean +- standard error of 10 runs (sec. 4);
  every Table 5 reproduction stores both, keyed alike."""
  table5 = [
      r
      for r in reproductions.REPRODUCTIONS.values()
      if r.where.startswith("Table 5")
  ]
  assert len(table5) == 8  # 4 models x (k = 2, 3 and k = 2, 3, 4 training).
  for r in table5:
    assert (
        set(r.published_stderr)
        == set(r.published)
        == {f"k{k}" for k in range(6, 11)}
    ), r.name
    assert r.published_runs == 10, r.name
  et = reproductions.get("clutrr_et_k23")
  assert et.published_stderr["k6"] == 0.02 and et.published["k6"] == 0.82
  assert reproductions.get("clutrr_et_value_ablation_k234").published_stderr[
      "k9"
  ] == pytest.approx(0.037)
  assert et.published_run_sd()["k10"] == pytest.approx(0.0885, abs=1e-4)
  assert et.published_errors()["published_runs"] == 10
  assert reproductions.get("clutrr_rat_k23").published_errors() == {}


def test_table18_deviations_are_stored_beside_table19_means():
  """The RT paper gives each Table 19 mean's sd over its 20 seeds in Table
  18: a run of ours is read against it (RT and MPNN; no mean's sd)."""
  core8 = reproductions.get("rt_clrs_core8")
  errors = core8.published_errors()
  assert errors["published_runs"] == 20 and "published_stderr" not in errors
  assert set(errors["published_run_sd"]) == set(core8.published) - {"mean"}
  assert errors["published_run_sd"]["bellman_ford"] == 1.5  # 94.24 +- 1.5
  assert core8.published["bellman_ford"] == 94.24
  mpnn = reproductions.get("mpnn_clrs_all30").published_run_sd()
  assert len(mpnn) == 30 and mpnn["jarvis_march"] == 29.3
  assert reproductions.get("pair_models_clrs_floyd").published_run_sd() == {
      "bellman_ford": 1.5,
      "binary_search": 6.7,
  }
  for name in ("floyd_clrs_core8", "triplet_gmpnn_clrs_all30"):
    assert reproductions.get(name).published_errors() == {}, name


def test_csordas_table3_deviations_are_stored_beside_its_means():
  """Csordas et al. Table 3: mean +- sd of 5 seeds."""
  for name, mean, sd in (
      ("scan_cutoff26_relative_universal", 1.00, 0.00),
      ("scan_cutoff26_absolute_universal", 0.21, 0.01),
      ("cogs_relative_transformer", 0.81, 0.01),
  ):
    r = reproductions.get(name)
    assert r.published == {"gen": mean}, name
    assert r.published_errors() == {
        "published_runs": 5,
        "published_run_sd": {"gen": sd},
    }, name


@pytest.mark.parametrize(
    "field, errors, runs, match",
    [
        (
            "published_stderr",
            {"k11": 0.01},
            10,
            r"keys \['k11'\] are not published keys",
        ),
        ("published_stderr", {"k6": 0.01}, 1, "needs published_runs >= 2"),
        ("published_sd", {"k11": 0.1}, 10, r"published_sd keys \['k11'\]"),
        ("published_sd", {"k6": 0.1}, 1, "published_sd needs published_runs"),
    ],
)
def test_reproduction_rejects_errors_it_cannot_place(
    field, errors, runs, match
):
  base = dataclasses.replace(
      reproductions.get("clutrr_et_k23"), published_stderr={}
  )
  with pytest.raises(ValueError, match=match):
    dataclasses.replace(base, **{field: errors, "published_runs": runs})


def test_reproduction_takes_standard_errors_or_deviations_not_both():
  with pytest.raises(ValueError, match="published_stderr or published_sd"):
    dataclasses.replace(
        reproductions.get("clutrr_et_k23"), published_sd={"k6": 0.1}
    )


def test_clutrr_paper_configs_build():
  """Bergen et al. Table 1 sizes at the paper budget (the smoke runs have
  one layer); k = 2, 3, 4 trains on 15k generated rows (sec. 4.1)."""
  for name in (
      "clutrr_et_k23",
      "clutrr_et_k234",
      "clutrr_rat_k234",
      "clutrr_rt_k234",
      "clutrr_floyd_k23",
  ):
    c = reproductions.get(name).build("paper")
    assert (
        c.edge_transformer.num_layers,
        c.rat.num_layers,
        c.rt.num_layers,
        c.floyd.num_layers,
    ) == (8, 8, 8, 8), name
  # FloydNet (no published CLUTRR setting): ET's width, depth and training.
  floyd = reproductions.get("clutrr_floyd_k23")
  c = floyd.build("paper")
  assert c.model == "floyd" and c.floyd.num_heads * c.floyd.head_dim == 200
  assert c.train == reproductions.get("clutrr_et_k23").build("paper").train
  assert set(floyd.published.values()) == {None}
  k234 = reproductions.get("clutrr_et_k234").build("paper")
  assert tuple(k234.protocol.train_ks) == (2, 3, 4)
  assert 3 * k234.protocol.num_train_per_k == 15_000
  assert k234.train.steps == 50 * 30  # 12k training rows, batch 400.
  k23 = reproductions.get("clutrr_et_k23").build("paper")
  assert tuple(k23.protocol.train_ks) == (2, 3)
  assert k23.train.steps == 50 * 70  # 28k training rows, batch 400.
  assert k23.train.checkpoint_every == 70  # An epoch: hours-long runs.
  # The authors' data: every story graph trained, generated tests beyond.
  assert k23.protocol.holdout_fraction == k234.protocol.holdout_fraction == 0
  assert tuple(k23.protocol.generated_test_ks) == tuple(range(4, 11))
  assert tuple(k234.protocol.generated_test_ks) == tuple(range(5, 11))
  cpu = reproductions.get("clutrr_et_k234").build("cpu").protocol
  assert cpu.holdout_fraction == 0.2 and min(cpu.generated_test_ks) == 2
  assert reproductions.get("clutrr_et_untied_k234").published["k6"] == 0.982


def test_for2lam_paper_configs_build():
  """Shiv & Quirk sec. 5.1.1 sizes: the paper-budget models validate and
  their parameters have the paper's widths (traced, not compiled)."""
  import jax
  import jax.numpy as jnp
  from relational_jax.training.seq2seq import config as seq2seq_config
  from relational_jax.training.seq2seq import loop

  for name in (
      "for2lam_long_tree_dfs",
      "for2lam_short_tree_bfs",
      "for2lam_long_seq",
  ):
    c = reproductions.get(name).build("paper")
    t = c.transformer
    assert (t.d_model, t.num_encoder_layers, t.num_decoder_layers) == (
        256,
        4,
        4,
    )
    assert c.train.batch_size == 128 and c.train.clip == 10.0
    assert (c.data.num_train, c.data.num_test) == (100_000, 10_000)
    # icecaps's defaults: the warm-up schedule, LCRS trees with _NULL.
    assert (c.train.schedule, c.train.warmup_steps) == ("noam", 4000)
    assert c.train.learning_rate == pytest.approx((256 * 4000) ** -0.5)
    assert t.tree_tokens == "lcrs_null"
    _, model = loop.build_model(c, 40, 50, 80, 150)
    src, tgt = jnp.zeros((1, 80), jnp.int32), jnp.zeros((1, 150), jnp.int32)
    extras = {}
    if t.positions == "tree":
      assert (t.ffn_dim, t.tree_pos_width, t.tree_depth) == (512, 2048, 32)
      assert t.tree_encoder and t.tree_alignment == "output"
      extras = {
          "src_tree_pos_BxSxP": jnp.zeros((1, 80, 64)),
          "tgt_tree_pos_BxTxP": jnp.zeros((1, 150, 64)),
      }
    else:
      assert t.ffn_dim == 1024
    params = jax.eval_shape(
        model.init, jax.random.key(0), src, None, tgt, **extras
    )["params"]
    if t.positions == "tree":
      assert params["encoder"]["tree_pe"]["to_d_model"]["kernel"].shape == (
          2048,
          256,
      )
      assert params["decoder"]["tree_pe"]["encoding"]["theta"].shape == (32,)
    assert seq2seq_config.resolved_split(c.data) in ("short", "long")


@pytest.fixture(scope="module")
def smoke_workdirs(tmp_path_factory):
  """One work dir per distinct smoke config: reproductions whose smoke runs
  are the same config (e.g. rt_clrs_core8 and rt_clrs_all30 both smoke-test
  activity_selector) share it, so the second resumes the finished run."""
  root, dirs = tmp_path_factory.mktemp("smoke"), {}

  def get(name):
    config = reproductions.get(name).build("smoke")
    config = config_lib.override(config, SMOKE_OVERRIDES.get(name, {}))
    return dirs.setdefault(config.to_json(sort_keys=True), str(root / name))

  return get


# Smoke runs cut further where compiling dominates (none at present).
SMOKE_OVERRIDES = {}


# Smoke runs that another one stands for (each compiles for up to minutes):
# the `_modern` variants run the CLRS loop as readme_main_job does, the RT
# among their processors (the others train in the protocol smoke runs);
# mpnn_generalist_3 stands for the generalists (the RT generalist trains in
# tests/training/clrs/test_generalist.py); the CLUTRR k234 variants are
# their k23 models on another split, which clutrr_et_k234 reads;
# pair_models_clrs_et is ET under the protocol, in the floyd and rt smoke
# runs' code (pair_models_clrs_floyd and _rt are their smoke configs); the
# Table 1 semantic-parsing runs are one model on three TSV directories:
# semparse_jobs_seq2tree (Prolog trees, the tree decoder, a hold-out
# validation set) and semparse_atis_anon_seq2seq (s-expressions, the
# sequence decoder, dev.tsv, entities anonymised) stand for the eight.
SMOKE_NAMES = sorted(
    n
    for n in reproductions.REPRODUCTIONS
    if not (
        n.endswith(("_modern", "_generalist_3"))
        or (n.startswith("clutrr_") and n.endswith("_k234"))
        or n == "pair_models_clrs_et"
        or n.startswith("semparse_")
    )
    or n
    in (
        "mpnn_generalist_3",
        "clutrr_et_k234",
        "semparse_jobs_seq2tree",
        "semparse_atis_anon_seq2seq",
    )
)


@pytest.mark.parametrize("name", SMOKE_NAMES)
@pytest.mark.slow
def test_every_reproduction_runs_at_smoke_budget(name, smoke_workdirs):
  workdir = smoke_workdirs(name)
  overrides = SMOKE_OVERRIDES.get(name)
  record = reproduce.run(name, "smoke", workdir, lambda m: None, overrides)
  assert record["published"] == dict(reproductions.get(name).published)
  stderr = dict(reproductions.get(name).published_stderr)
  assert record.get("published_stderr", {}) == stderr
  run_sd = reproductions.get(name).published_run_sd()
  assert record.get("published_run_sd", {}) == run_sd
  key, _ = reproductions.get(name).headline()
  # A 'mean' beside a published one only where the smoke run has the paper
  # budget's algorithms.
  algorithms = [
      set(reproductions.get(name).build(b).get("algorithms", ()))
      for b in ("smoke", "paper")
  ]
  covered = "mean" not in record["published"] or algorithms[0] == algorithms[1]
  if reproductions.get(name).task == "clrs":
    assert record["ours"] and all(
        0.0 <= v <= 100.0 for v in record["ours"].values()
    )
    assert ("mean" in record["ours"]) == covered
  else:
    assert set(record["ours"]) & {"gen", "iid"}
  with open(os.path.join(workdir, "reproduction.json")) as f:
    saved = json.load(f)
  assert saved["name"] == name and saved["published"] == record["published"]
  with open(record["results_path"]) as f:
    assert json.load(f)["reproduction"]["ours"] == record["ours"]
  # Resumed with the same work dir, a finished run continues (nothing to do)
  # and gives the same numbers.
  again = reproduce.run(name, "smoke", workdir, lambda m: None, overrides)
  assert again["ours"] == record["ours"]


@pytest.mark.slow
def test_a_planned_stop_ends_cleanly_and_the_same_command_resumes(tmp_path):
  """`--set=train.stop_at_step=N` checkpoints, returns the step it stopped
  at (no results yet), and the same call then finishes the run."""
  workdir = str(tmp_path / "run")
  stop = {"train.stop_at_step": 1}
  record = reproduce.run(
      "clutrr_rat_k23", "smoke", workdir, log=lambda m: None, overrides=stop
  )
  assert record == {
      "name": "clutrr_rat_k23",
      "budget": "smoke",
      "stopped_at": 1,
  }
  assert not os.path.exists(os.path.join(workdir, "reproduction.json"))
  done = reproduce.run(
      "clutrr_rat_k23",
      "smoke",
      workdir,
      log=lambda m: None,
      overrides={"train.stop_at_step": 0},
  )
  assert set(done["ours"]) & {"gen", "iid"}
  # A stop is no variant: not in the record, the results copied as usual.
  assert "overrides" not in done and "stop_at_step" not in done["command"]


def test_pair_models_clrs_is_the_protocol_for_each_pair_state_processor():
  """pair_models_clrs_<kind>: FloydNet, RT and ET under the RT paper's
  protocol on bellman_ford and binary_search, 3 seeds, the OOD curve; cpu:
  640 steps, evaluation every 80 on the first 128 samples of each set."""
  for processor in ("floyd", "rt", "et"):
    r = reproductions.get(f"pair_models_clrs_{processor}")
    paper, cpu = r.build("paper"), r.build("cpu")
    assert r.task == "clrs" and paper.processor_type == processor
    assert paper.algorithms == ("bellman_ford", "binary_search")
    assert paper.seeds == cpu.seeds == (42, 43, 44)
    assert (paper.train.steps, paper.protocol.train_size) == (80_000, 10_000)
    assert paper.protocol.test_points == "every_evaluation"
    assert (cpu.train.steps, cpu.train.eval_every) == (640, 80)
    assert cpu.protocol.max_eval_samples == 128
    assert cpu.results_path == (
        f"results/reproductions/pair_models_clrs_{processor}_cpu__results.json"
    )
    # Its smoke run is that processor's protocol smoke run.
    if processor != "et":
      same = reproductions.get(f"{processor}_clrs_core8").build("smoke")
      assert r.build("smoke").to_json(sort_keys=True) == same.to_json(
          sort_keys=True
      )


def test_scan26_paper_runs_are_copied_and_drawn_side_by_side(tmp_path):
  from experiments.reproductions import seq2seq as seq2seq_reproductions  # pylint: disable=g-import-not-at-top

  names = seq2seq_reproductions.SCAN26_MODELS
  for name in names:
    assert reproductions.get(name).copy_path("paper", "") == (
        f"results/scan_cutoff26/{name}_paper.json"
    )
    assert reproductions.get(name).copy_path("cpu", "") is None
  assert seq2seq_reproductions.scan26_figure("paper", str(tmp_path)) == ()
  for name, gen in zip(names, (0.9, 0.2)):
    record = {
        "history": [{"step": 1000, "gen": gen / 2}, {"step": 2000, "gen": gen}],
        "reproduction": {"published": dict(reproductions.get(name).published)},
    }
    (tmp_path / f"{name}_paper.json").write_text(json.dumps(record))
  (png,) = seq2seq_reproductions.scan26_figure("paper", str(tmp_path))
  assert png == str(tmp_path / "scan_cutoff26_paper.png")
  assert os.path.getsize(png) > 1000


def test_clutrr_figure3_averages_each_models_seeds(tmp_path):
  def write(name, seed, per_k):
    entry = {"all": 0.0, "per_k": per_k, "count_per_k": {k: 5 for k in per_k}}
    with open(tmp_path / name, "w") as f:
      json.dump(
          {"config": {"train": {"seed": seed}}, "evaluations": {"test": entry}},
          f,
      )

  write("clutrr_et_k23_paper.json", 42, {"6": 0.8, "10": 0.6})
  write("clutrr_et_k23_paper__seed43.json", 43, {"6": 0.6, "10": 0.4})
  write("clutrr_et_k23_paper__seed7.json", 7, {"6": 0.7, "10": 0.5})
  write("clutrr_rat_k23_paper.json", 42, {"6": 0.5, "10": 0.3})
  write("clutrr_rat_k23.json", 42, {"6": 0.1, "10": 0.1})  # cpu: not drawn.
  out = clutrr_reproductions.figure3("k23", "paper", str(tmp_path))
  assert out == str(tmp_path / "figure3_paper.png") and os.path.exists(out)
  with open(tmp_path / "figure3_paper.json") as f:
    models = json.load(f)["models"]
  assert sorted(models) == ["clutrr_et_k23", "clutrr_rat_k23"]
  et = models["clutrr_et_k23"]
  assert et["seeds"] == [42, 7, 43]
  np.testing.assert_allclose(
      [et["mean_per_k"]["6"], et["mean_per_k"]["10"]], [0.7, 0.5]
  )
  assert et["published"]["k10"] == 0.581
  # Table 5's standard error of 10 runs, one run's spread, ours against it.
  assert et["published_stderr"]["k10"] == 0.028 and et["published_runs"] == 10
  assert et["published_run_sd"]["k10"] == pytest.approx(0.028 * 10**0.5, 1e-3)
  assert et["ours_minus_published_in_run_sd"] == {
      "k6": pytest.approx((0.7 - 0.82) / 0.0632, abs=0.01),
      "k10": pytest.approx((0.5 - 0.581) / 0.0885, abs=0.01),
  }
  assert "published_stderr" not in models["clutrr_rat_k23"]  # Figure 3 only.
  assert models["clutrr_rat_k23"]["mean_per_k"] == {"6": 0.5, "10": 0.3}


@pytest.mark.parametrize(
    "setting, budget, error, match",
    [
        ("k2", "paper", ValueError, "valid settings are"),
        ("k23", "smoke", ValueError, "valid budgets are"),
        ("k234", "paper", FileNotFoundError, "no clutrr_<model>_k234_paper"),
    ],
)
def test_clutrr_figure3_names_bad_values(
    tmp_path, setting, budget, error, match
):
  with pytest.raises(error, match=match):
    clutrr_reproductions.figure3(setting, budget, str(tmp_path))


def test_a_mean_over_some_published_items_is_not_the_published_mean():
  """A run of some of a reproduction's algorithms keeps its per-algorithm
  numbers but not their mean, which would stand beside the published mean
  over all of them."""
  published = {"bellman_ford": 94.24, "binary_search": 81.48, "mean": 87.86}
  core = ("bellman_ford", "binary_search")
  some = {"rt/bellman_ford": 95.6, "bellman_ford": 95.6, "mean": 95.6}
  assert reproduce._comparable(published, some, ("bellman_ford",), core) == {
      "rt/bellman_ford": 95.6,
      "bellman_ford": 95.6,
  }
  every = {"bellman_ford": 95.6, "binary_search": 80.0, "mean": 87.8}
  assert reproduce._comparable(published, every, core[::-1], core) == every
  # A published mean alone (FloydNet's CLRS-30): the same rule.
  assert "mean" not in reproduce._comparable(
      {"mean": 96.6}, {"mean": 90.0}, ("bellman_ford",), core
  )
  assert reproduce._comparable({"gen": 1.0}, {"gen": 0.9}) == {"gen": 0.9}
