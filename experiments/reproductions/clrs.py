"""CLRS reproductions: the RT paper's protocol (Diao & Loynd 2023, appendix
D; the RT authors' run.py, `relational_jax.training.clrs.rt_protocol`) and
its Table 19 numbers for RT and the MPNN, plus Triplet-GMPNN (Ibarz et al.
2022) and FloydNet (Yu, Zeng & Ye 2026) under the same protocol; each also as
a `<name>_modern` variant (the modern CLRS recipe); the generalists
(`<processor>_generalist_3`); the README's main job: all of them configs of
the CLRS task ('clrs'), as are `pair_models_clrs_<kind>`: FloydNet, RT and
ET side by side under the protocol.
"""

from typing import Any, Callable, Dict

from experiments.reproductions.record import ConfigDict
from experiments.reproductions.record import Reproduction
from relational_jax.training.clrs import config as clrs_config
from relational_jax.training.clrs import data as clrs_data
from relational_jax.training.clrs import rt_protocol

RT = "Diao & Loynd 2023 (Relational Transformer)"
FLOYD = "Yu, Zeng & Ye 2026 (FloydNet), under the RT paper's protocol"
# The FloydNet paper (arXiv 2601.19094) reports its CLRS-30 mean only.
_FLOYD_CLRS30_MEAN = 96.64
_FLOYD_NOTES = (
    "The FloydNet paper reports only its CLRS-30 mean test score (96.64), "
    "no per-algorithm numbers; the authors' CLRS protocol is not in their "
    "released code, so the model runs here under the RT paper's protocol "
    "with the floyd section's defaults (ET's width: 12 heads x 16 = 192, 3 "
    "pivotal attention blocks)."
)
# Table 19: mean test micro-F1 at n = 64 over 20 seeds.
_RT_TABLE19 = {
    "activity_selector": 87.72,
    "articulation_points": 34.15,
    "bellman_ford": 94.24,
    "bfs": 99.14,
    "binary_search": 81.48,
    "bridges": 37.88,
    "bubble_sort": 38.22,
    "dag_shortest_paths": 96.61,
    "dfs": 39.23,
    "dijkstra": 91.20,
    "find_maximum_subarray_kadane": 66.52,
    "floyd_warshall": 31.59,
    "graham_scan": 74.15,
    "heapsort": 32.96,
    "insertion_sort": 89.43,
    "jarvis_march": 94.57,
    "kmp_matcher": 0.03,
    "lcs_length": 83.32,
    "matrix_chain_order": 91.89,
    "minimum": 95.28,
    "mst_kruskal": 64.91,
    "mst_prim": 85.77,
    "naive_string_matcher": 65.01,
    "optimal_bst": 74.40,
    "quickselect": 19.18,
    "quicksort": 39.42,
    "segments_intersect": 84.94,
    "strongly_connected_components": 28.59,
    "task_scheduling": 82.93,
    "topological_sort": 80.62,
}
_MPNN_TABLE19 = {
    "activity_selector": 95.45,
    "articulation_points": 46.21,
    "bellman_ford": 95.42,
    "bfs": 99.78,
    "binary_search": 38.00,
    "bridges": 61.29,
    "bubble_sort": 13.14,
    "dag_shortest_paths": 97.33,
    "dfs": 13.85,
    "dijkstra": 92.18,
    "find_maximum_subarray_kadane": 16.14,
    "floyd_warshall": 28.81,
    "graham_scan": 95.31,
    "heapsort": 27.08,
    "insertion_sort": 50.30,
    "jarvis_march": 59.31,
    "kmp_matcher": 2.35,
    "lcs_length": 54.42,
    "matrix_chain_order": 85.53,
    "minimum": 90.73,
    "mst_kruskal": 70.84,
    "mst_prim": 86.43,
    "naive_string_matcher": 1.83,
    "optimal_bst": 66.48,
    "quickselect": 3.07,
    "quicksort": 17.95,
    "segments_intersect": 94.46,
    "strongly_connected_components": 12.58,
    "task_scheduling": 83.36,
    "topological_sort": 54.93,
}
ALL_30 = tuple(sorted(_RT_TABLE19))

# Table 18: the standard deviation of the test score over the same 20
# seeds (percentage points), RT and MPNN columns.
_RT_TABLE18 = {
    "activity_selector": 2.7,
    "articulation_points": 14.6,
    "bellman_ford": 1.5,
    "bfs": 0.7,
    "binary_search": 6.7,
    "bridges": 11.8,
    "bubble_sort": 13.0,
    "dag_shortest_paths": 1.6,
    "dfs": 10.5,
    "dijkstra": 5.8,
    "find_maximum_subarray_kadane": 3.7,
    "floyd_warshall": 7.6,
    "graham_scan": 7.4,
    "heapsort": 14.8,
    "insertion_sort": 9.0,
    "jarvis_march": 2.2,
    "kmp_matcher": 0.1,
    "lcs_length": 4.1,
    "matrix_chain_order": 1.2,
    "minimum": 2.0,
    "mst_kruskal": 11.8,
    "mst_prim": 7.9,
    "naive_string_matcher": 32.3,
    "optimal_bst": 2.6,
    "quickselect": 17.3,
    "quicksort": 13.2,
    "segments_intersect": 2.6,
    "strongly_connected_components": 15.2,
    "task_scheduling": 1.8,
    "topological_sort": 17.5,
}
_MPNN_TABLE18 = {
    "activity_selector": 1.3,
    "articulation_points": 6.1,
    "bellman_ford": 1.9,
    "bfs": 0.2,
    "binary_search": 5.0,
    "bridges": 17.8,
    "bubble_sort": 5.0,
    "dag_shortest_paths": 1.6,
    "dfs": 2.7,
    "dijkstra": 4.3,
    "find_maximum_subarray_kadane": 2.9,
    "floyd_warshall": 4.7,
    "graham_scan": 1.4,
    "heapsort": 7.1,
    "insertion_sort": 9.1,
    "jarvis_march": 29.3,
    "kmp_matcher": 1.1,
    "lcs_length": 2.7,
    "matrix_chain_order": 2.3,
    "minimum": 3.4,
    "mst_kruskal": 5.9,
    "mst_prim": 5.1,
    "naive_string_matcher": 1.7,
    "optimal_bst": 3.5,
    "quickselect": 1.6,
    "quicksort": 3.9,
    "segments_intersect": 2.5,
    "strongly_connected_components": 5.2,
    "task_scheduling": 0.9,
    "topological_sort": 5.8,
}
_TABLE19_SEEDS = 20
_TABLE18 = {"rt": _RT_TABLE18, "mpnn": _MPNN_TABLE18}


def _run_sd(processor, published) -> Dict[str, Any]:
  """Table 18's sd for each published algorithm of `processor` (none for
  the mean, nor for processors Table 18 does not have)."""
  if processor not in _TABLE18:
    return {}
  sd = {a: _TABLE18[processor][a] for a in published if a != "mean"}
  return {"published_sd": sd, "published_runs": _TABLE19_SEEDS}


def _subset(table, algorithms, mean=None):
  out = {a: table[a] for a in algorithms}
  out["mean"] = (
      mean
      if mean is not None
      else round(sum(out.values()) / len(algorithms), 2)
  )
  return out


def _clrs_protocol(config: ConfigDict) -> ConfigDict:
  """The modern-recipe variants' budget, the RT paper's (appendix D):
  320,000 training examples (batch 4: 80,000 steps), validation every 320
  examples, best-validation checkpoint tested at n = 64, CLRS
  evaluation-set sizes, 20 seeds."""
  config.train.batch_size = 4
  config.train.steps = 80_000
  config.train.eval_every = 80
  config.train.eval_batch_size = 32
  config.protocol.test_lengths = (64,)
  config.protocol.max_eval_samples = 0
  config.seeds = tuple(range(20))
  return config


def _rt_config(algorithms) -> Callable[[], ConfigDict]:
  def make():
    c = _clrs_protocol(clrs_config.default_config())  # Table 2 sizes.
    c.algorithms = tuple(algorithms)
    c.train.learning_rate = 2.5e-4
    return c

  return make


def _floyd_config(algorithms) -> Callable[[], ConfigDict]:
  """FloydNet in our network (carried pair state, pointers from edges), at
  the defaults of the config's floyd section, RT's learning rate."""

  def make():
    c = _rt_config(algorithms)()
    c.processor_type = "floyd"
    return c

  return make


def _baseline_config(algorithms, kind, hidden, lr) -> Callable[[], ConfigDict]:
  """A CLRS baseline under the same protocol, stock CLRS network."""

  def make():
    c = _clrs_protocol(clrs_config.default_config())
    c.algorithms = tuple(algorithms)
    c.processor_type = kind
    c.model.hidden_dim = hidden
    c.train.learning_rate = lr
    c.model.carry_state = False
    c.model.ptr_from_edges = False
    return c

  return make


def _clrs_budgets(algorithms) -> Dict[str, Dict[str, Any]]:
  return {
      # 600 steps of batch 4 (2,400 examples), validation every 50 steps,
      # evaluation sets capped at 256 samples, 1 seed.
      "cpu": {
          "train.steps": 600,
          "train.eval_every": 50,
          "protocol.max_eval_samples": 256,
          "seeds": (42,),
      },
      "smoke": {
          "algorithms": (algorithms[0],),
          "train.steps": 2,
          "train.eval_every": 1,
          "protocol.max_eval_samples": 4,
          "train.eval_batch_size": 4,
          "protocol.test_lengths": (16,),
          "seeds": (42,),
          "train.progress": False,
      },
  }


# FloydNet, RT and ET side by side under the protocol, on a graph and a
# search task, 3 seeds, the test set scored at every evaluation (the OOD
# curve).
PAIR_MODELS = ("floyd", "rt", "et")
_PAIR_ALGORITHMS = ("bellman_ford", "binary_search")


def _pair_models_config(processor) -> Callable[[], ConfigDict]:
  def make():
    c = rt_protocol.config(processor, _PAIR_ALGORITHMS, seeds=(42, 43, 44))
    c.protocol.test_points = "every_evaluation"
    c.results_path = f"results/reproductions/pair_models_clrs_{processor}_paper__results.json"
    return c

  return make


def _pair_models_budgets(processor) -> Dict[str, Dict[str, Any]]:
  """cpu: the protocol reproductions' cpu budget (640 steps, evaluation
  every 80 on the first 128 samples of each set), both algorithms, 3 seeds;
  smoke: theirs (the same config as that processor's protocol smoke run)."""
  budgets = _protocol_budgets(_PAIR_ALGORITHMS)
  budgets["cpu"] = dict(
      budgets["cpu"],
      seeds=(42, 43, 44),
      results_path=(
          f"results/reproductions/pair_models_clrs_{processor}_cpu__results.json"
      ),
  )
  budgets["smoke"] = dict(budgets["smoke"], results_path="")
  return budgets


CORE_8 = clrs_data.CORE_ALGORITHMS
_MPNN = dict(kind="mpnn", hidden=512, lr=1.6e-3)  # the RT paper's tuned MPNN
_TRIPLET = dict(kind="triplet_gmpnn", hidden=128, lr=1e-3)  # Ibarz et al. 2022
_TRIPLET_NOTES = (
    "Ibarz et al. trained with their own improvements to the CLRS "
    "pipeline; here the model runs under the RT paper's protocol."
)
_PROTOCOL_NOTES = (
    "The RT paper's protocol (appendix D, the RT authors' run.py; the "
    "clrs_rt comparison's our side): training samples at n = 16 only, from "
    "a train set of 10,000 (seed 1), batch 4, 80,000 steps (320,000 "
    "examples), validation (n = 16, seed 2) every 80 steps, the test score "
    "(n = 64, seed 3) of the first best validation point, Adam without "
    "clipping, hint teacher-forcing noise 0.5 with hard re-prediction, "
    "Haiku's default encoder initialisation; 20 seeds."
)
_MODERN_NOTES = (
    "A variant, not the paper's protocol: the modern CLRS recipe (training "
    "at n in {4, 7, 11, 13, 16}, gradient clipping 1.0, soft hint "
    "re-prediction, Xavier encoders) with the paper's step and validation "
    "budget."
)


def _protocol_config(processor, algorithms) -> Callable[[], ConfigDict]:
  """The RT paper's protocol for `processor` (`rt_protocol.config`), 20
  seeds (run.py's model seeds 42..61)."""

  def make():
    return rt_protocol.config(
        processor, algorithms, seeds=tuple(range(42, 42 + _TABLE19_SEEDS))
    )

  return make


def _protocol_budgets(algorithms) -> Dict[str, Dict[str, Any]]:
  """cpu: 640 steps (2,560 examples) at the protocol's cadence (8
  evaluations), each on the first 128 samples of each set (binary_search's
  sets have 2,048: scoring them all would dominate), the test set scored at
  every evaluation (the OOD curve), every algorithm, 1 seed; smoke:
  bellman_ford, 2 steps from a train set of 16, evaluated once, at step 2,
  on one sample of each set (testing at n = 64 is most of a smoke run's
  time)."""
  return {
      "cpu": {
          "algorithms": tuple(algorithms),
          "seeds": (42,),
          "train.steps": 640,
          "protocol.max_eval_samples": 128,
          "protocol.test_points": "every_evaluation",
      },
      "smoke": {
          "algorithms": ("bellman_ford",),
          "seeds": (42,),
          "train.steps": 2,
          "train.eval_every": 2,
          "train.eval_batch_size": 1,
          "protocol.train_size": 16,
          "protocol.max_eval_samples": 1,
          "protocol.test_points": "every_evaluation",
      },
  }


# (name, processor, algorithms, paper, where, published, notes, modern config)
_CLRS = (
    (
        "rt_clrs_core8",
        "rt",
        CORE_8,
        RT,
        "Table 14/19 (8 core tasks)",
        _subset(_RT_TABLE19, CORE_8, 81.30),
        "",
        _rt_config(CORE_8),
    ),
    (
        "rt_clrs_all30",
        "rt",
        ALL_30,
        RT,
        "Table 19 (CLRS-30)",
        _subset(_RT_TABLE19, ALL_30, 66.18),
        "",
        _rt_config(ALL_30),
    ),
    (
        "mpnn_clrs_core8",
        "mpnn",
        CORE_8,
        RT,
        "Table 19, MPNN column (8 core tasks)",
        _subset(_MPNN_TABLE19, CORE_8),
        "",
        _baseline_config(CORE_8, **_MPNN),
    ),
    (
        "mpnn_clrs_all30",
        "mpnn",
        ALL_30,
        RT,
        "Table 19, MPNN column (CLRS-30)",
        _subset(_MPNN_TABLE19, ALL_30, 55.15),
        "",
        _baseline_config(ALL_30, **_MPNN),
    ),
    (
        "triplet_gmpnn_clrs_all30",
        "triplet_gmpnn",
        ALL_30,
        "Ibarz et al. 2022 (Triplet-GMPNN), under the RT paper's protocol",
        "Ibarz et al. Table 1 (CLRS-30 average)",
        {"mean": 74.14},
        _TRIPLET_NOTES,
        _baseline_config(ALL_30, **_TRIPLET),
    ),
    (
        "floyd_clrs_core8",
        "floyd",
        CORE_8,
        FLOYD,
        "CLRS-30 mean (no core-8 or per-algorithm numbers published)",
        # Not a core-8 number: kept under its own key, so it is never
        # compared with our core-8 mean.
        {"mean_clrs30": _FLOYD_CLRS30_MEAN},
        _FLOYD_NOTES,
        _floyd_config(CORE_8),
    ),
    (
        "floyd_clrs_all30",
        "floyd",
        ALL_30,
        FLOYD,
        "CLRS-30 mean (the only CLRS number published)",
        {"mean": _FLOYD_CLRS30_MEAN},
        _FLOYD_NOTES,
        _floyd_config(ALL_30),
    ),
)


# The generalist's three algorithms: a graph, a sorting and a search task.
GENERALIST_3 = ("bellman_ford", "insertion_sort", "binary_search")
_GENERALIST_NOTES = (
    "One model over the three algorithms (multi_algorithm 'generalist', as "
    "CLRS run.py trains it: a step is one update on a batch of each "
    "algorithm in turn, the best checkpoint on the sum of their validation "
    "scores), at the modern-recipe variants' budget: each algorithm sees "
    "the examples its single-task run sees. Published: the RT paper's "
    "single-task Table 19 numbers (no generalist there), the specialists a "
    "generalist is measured against (Ibarz et al. 2022)."
)


def _generalist(make) -> Callable[[], ConfigDict]:
  def config():
    c = make()
    c.multi_algorithm = "generalist"
    return c

  return config


def _generalist_budgets() -> Dict[str, Dict[str, Any]]:
  """The modern variants' cpu budget; smoke with two algorithms, so that a
  smoke run trains a generalist, for one step (one compiled update per
  algorithm)."""
  budgets = _clrs_budgets(GENERALIST_3)
  budgets["smoke"] = dict(
      budgets["smoke"], algorithms=GENERALIST_3[:2], **{"train.steps": 1}
  )
  return budgets


def _generalists():
  return [
      Reproduction(
          f"{processor}_generalist_3",
          "clrs",
          RT,
          f"Table 19, {column} (single-task, per algorithm)",
          "test micro-F1 at n=64 (%)",
          _subset(table, GENERALIST_3),
          _generalist(make),
          _generalist_budgets(),
          _GENERALIST_NOTES,
          **_run_sd(processor, _subset(table, GENERALIST_3)),
      )
      for processor, column, table, make in (
          ("rt", "RT column", _RT_TABLE19, _rt_config(GENERALIST_3)),
          (
              "mpnn",
              "MPNN column",
              _MPNN_TABLE19,
              _baseline_config(GENERALIST_3, **_MPNN),
          ),
      )
  ]


def _reproductions():
  """Each CLRS reproduction under the RT paper's protocol, and its modern-
  recipe variant (`<name>_modern`)."""
  out = []
  for name, processor, algos, paper, where, published, notes, modern in _CLRS:
    out.append(
        Reproduction(
            name,
            "clrs",
            paper,
            where,
            "test micro-F1 at n=64 (%)",
            published,
            _protocol_config(processor, algos),
            _protocol_budgets(algos),
            " ".join(filter(None, (_PROTOCOL_NOTES, notes))),
            **_run_sd(processor, published),
        )
    )
    out.append(
        Reproduction(
            name + "_modern",
            "clrs",
            paper,
            where,
            "test micro-F1 at n=64 (%)",
            published,
            modern,
            _clrs_budgets(algos),
            " ".join(filter(None, (_MODERN_NOTES, notes))),
            **_run_sd(processor, published),
        )
    )
  return out


REPRODUCTIONS = [
    Reproduction(
        "readme_main_job",
        "clrs",
        RT,
        "Table 19 (bellman_ford)",
        "test micro-F1 at n=64 (%)",
        {"bellman_ford": 94.24, "mean": 94.24},
        clrs_config.default_config,
        {"cpu": {}, "smoke": _clrs_budgets(("bellman_ford",))["smoke"]},
        "The README's main job: its default config IS the cpu budget (300 "
        "steps of batch 8); 'paper' is the same config and is not the "
        "paper's protocol (use rt_clrs_core8 for that).",
        # Its mean is bellman_ford's: the same sd.
        published_sd=dict.fromkeys(
            ("bellman_ford", "mean"), _RT_TABLE18["bellman_ford"]
        ),
        published_runs=_TABLE19_SEEDS,
    ),
    *_reproductions(),
    *_generalists(),
    *(
        Reproduction(
            f"pair_models_clrs_{processor}",
            "clrs",
            RT,
            "Table 19 (RT on bellman_ford, binary_search; none published "
            "for ET or FloydNet there)",
            "test micro-F1 at n=64 (%)",
            _subset(_RT_TABLE19, _PAIR_ALGORITHMS),
            _pair_models_config(processor),
            _pair_models_budgets(processor),
            f"'{processor}' beside the other pair-state processors "
            f"({', '.join(PAIR_MODELS)}: pair_models_clrs_<kind>) under the "
            "RT paper's protocol (rt_protocol.config; 'et' and 'floyd' at "
            "the RT's 3 layers x 12 heads x 16), 3 seeds, the test set "
            "scored at every evaluation; ours per algorithm: the mean over "
            "seeds of the test score at the best validation point. "
            "Published: the RT paper's RT at its full protocol (80,000 "
            "steps, 20 seeds).",
            **_run_sd("rt", _subset(_RT_TABLE19, _PAIR_ALGORITHMS)),
        )
        for processor in PAIR_MODELS
    ),
]
