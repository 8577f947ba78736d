"""The RT paper's protocol as fields of the library's CLRS task: run.py's
fixed datasets (`protocol.train_size`), its init seed and the test points."""

import numpy as np
import pytest

from relational_jax.training.clrs import config as clrs_config
from relational_jax.training.clrs import fixed_data
from relational_jax.training.clrs import loop as clrs_loop

# run.py's protocol on a tiny model: one train and one test length, a fixed
# train set of 8 samples, run.py's init seed (seed + 1).
PROTOCOL = {
    "algorithms": ("bellman_ford",),
    "protocol.train_lengths": (5,),
    "protocol.test_lengths": (6,),
    "protocol.train_size": 8,
    "protocol.init_seed_offset": 1,
    "protocol.max_eval_samples": 4,
    "train.batch_size": 4,
    "train.eval_batch_size": 4,
    "train.steps": 4,
    "train.eval_every": 1,
    "train.clip": 0.0,
    "train.progress": False,
    "model.hidden_dim": 16,
    # The processor does not matter here: the MPNN baseline compiles fastest.
    "processor_type": "mpnn",
    "model.carry_state": False,
    "model.ptr_from_edges": False,
}


def protocol(**overrides):
  merged = dict(PROTOCOL)
  merged.update({k.replace("__", "."): v for k, v in overrides.items()})
  return clrs_config.get_config(merged)


def _arrays(eval_set):
  f = eval_set.feedback
  return [dp.data for dp in f.features.inputs + f.outputs] + [
      f.features.lengths
  ]


def test_a_test_set_alone_is_the_one_built_with_the_datasets():
  data = fixed_data.FixedData.build("bellman_ford", 8, 5, 6)
  assert (data.num_samples("train"), data.num_samples("test")) == (8, 32)
  assert data.lengths == {"val": 5, "test": 6}
  alone = fixed_data.make_eval_set("bellman_ford", "test", 6, 4, 3)
  built = data.eval_set("bellman_ford", "test", 4, 3)
  assert alone.num_samples == built.num_samples == 3 and alone.length == 6
  for a, b in zip(_arrays(alone), _arrays(built)):
    np.testing.assert_array_equal(a, b)


def test_the_stream_resumes_where_it_was():
  data = fixed_data.FixedData.build("bellman_ford", 8, 5, 6)
  stream = fixed_data.FixedStream(data, 4)
  next(stream)
  state = stream.get_state()
  expected = next(stream).features.lengths
  again = fixed_data.FixedStream(data, 4)
  again.set_state(state)
  np.testing.assert_array_equal(next(again).features.lengths, expected)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            {"protocol.train_lengths": (4, 5)},
            r"train_size=8 \(a fixed train set.*train_lengths=\(4, 5\)",
        ),
        ({"protocol.train_size": -1}, r"protocol.train_size must be an int"),
        ({"protocol.test_points": "often"}, r"'often'.*'new_best'"),
        (
            {
                "protocol.train_size": 0,
                "protocol.test_points": "new_best",
                "protocol.test_lengths": (6, 7),
            },
            r"scores one test length.*\(6, 7\)",
        ),
        (
            {
                "protocol.test_points": "new_best",
                "multi_algorithm": "generalist",
                "algorithms": ("bellman_ford", "bfs"),
            },
            r"single-task run.*'generalist'",
        ),
    ],
)
def test_a_bad_protocol_is_a_clear_error(overrides, message):
  with pytest.raises(ValueError, match=message):
    clrs_config.validate(protocol(**overrides))


@pytest.mark.slow
def test_the_test_points_give_the_test_score_of_the_best_validation_point(
    tmp_path,
):
  """'every_evaluation' and 'new_best' report the test score of the best
  validation point, where 'end' tests the best checkpoint on the same
  fixed test set: the same number three ways."""
  results = {}
  for which in ("end", "every_evaluation", "new_best"):
    out = clrs_loop.train_and_evaluate(
        protocol(protocol__test_points=which),
        str(tmp_path / which),
        log=lambda m: None,
    )
    results[which] = out["algorithms"]["bellman_ford"]["runs"][0]
  every, best = results["every_evaluation"], results["new_best"]
  assert [h["val"] for h in every["history"]] == [
      h["val"] for h in best["history"]
  ]
  assert all("test" in h for h in every["history"])
  assert "test" in best["history"][-1]
  assert every["test"] == best["test"]
  step = every["best_step"]
  assert every["test"] == {
      "6": next(h["test"] for h in every["history"] if h["step"] == step)
  }
  assert results["end"]["best_step"] == step
  # 'end' scores with the test key PRNGKey(3), the others with the
  # evaluation's own; the model predicts deterministically (no dropout).
  assert results["end"]["test"] == pytest.approx(every["test"])
