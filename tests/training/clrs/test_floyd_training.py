"""processor_type='floyd' in the CLRS run config: its `floyd` section, the
checks on unread sections, resume, legacy names, and a tiny end-to-end run."""

import pytest

from relational_jax.models.floyd import FloydConfig
from relational_jax.training import config as config_lib
from relational_jax.training.clrs import config as clrs_config
from relational_jax.training.clrs import loop as clrs_loop

TINY = {
    "algorithms": ("bellman_ford",),
    "processor_type": "floyd",
    "protocol.train_lengths": (5,),
    "protocol.test_lengths": (6,),
    "train.batch_size": 4,
    "train.eval_batch_size": 4,
    "train.steps": 2,
    "train.eval_every": 1,
    "protocol.max_eval_samples": 4,
    "train.progress": False,
    "model.hidden_dim": 16,
    "floyd.num_heads": 2,
    "floyd.head_dim": 4,
    "floyd.num_layers": 1,
    "floyd.chunk_size": 4,
}


def test_floyd_section_defaults_are_ets_width():
  c = clrs_config.default_config()
  assert (
      c.floyd.num_heads * c.floyd.head_dim
      == 192
      == (c.et.num_heads * c.et.head_dim)
  )
  assert c.floyd.num_layers == c.et.num_layers == 3
  config = config_lib.to_dict(c.floyd)
  assert FloydConfig(**config) == FloydConfig(
      num_heads=12, head_dim=16, num_layers=3
  )


def test_processor_factory_reads_the_floyd_section():
  import haiku as hk  # pylint: disable=g-import-not-at-top

  config = clrs_config.get_config(
      dict(TINY, **{"floyd.norm_position": "post", "processor.nb_heads": 5})
  )
  clrs_config.validate(config)
  got = hk.transform(
      lambda: clrs_config.processor_factory(config)(8).config
  ).apply({}, None)
  assert got == FloydConfig(
      num_heads=2, head_dim=4, num_layers=1, chunk_size=4, norm_position="post"
  )


def test_unread_sections_must_keep_their_defaults():
  with pytest.raises(
      ValueError,
      match=(
          r"config.floyd fields \['num_layers'\] apply to the FloydNet "
          r"processor kinds only, not to processor_type='rt'"
      ),
  ):
    clrs_config.validate(clrs_config.get_config({"floyd.num_layers": 2}))
  with pytest.raises(
      ValueError,
      match=r"config.et fields \['head_dim'\] apply to the ET processor",
  ):
    clrs_config.validate(
        clrs_config.get_config(dict(TINY, **{"et.head_dim": 8}))
    )
  with pytest.raises(ValueError, match=r"Unknown norm_position 'middle'"):
    clrs_config.validate(
        clrs_config.get_config(dict(TINY, **{"floyd.norm_position": "middle"}))
    )


def test_legacy_names_set_the_floyd_section_only_for_floyd():
  values = {"nb_heads": 4, "head_size": 8, "num_layers": 2}
  floyd = clrs_config.apply_legacy(
      clrs_config.default_config(), dict(values, processor_type="floyd")
  )
  assert (floyd.floyd.num_heads, floyd.floyd.head_dim) == (4, 8)
  assert floyd.floyd.num_layers == 2 and floyd.et.num_heads == 12
  rt = clrs_config.apply_legacy(clrs_config.default_config(), values)
  assert rt.rt.num_heads == 4 and rt.floyd.num_heads == 12


def test_resume_checks_the_floyd_section_for_floyd_runs_only():
  saved = config_lib.to_dict(clrs_config.get_config(TINY))
  changed = config_lib.to_dict(
      clrs_config.get_config(dict(TINY, **{"floyd.num_layers": 2}))
  )
  assert clrs_loop.resume_conflicts(saved, changed) == {
      "floyd.num_layers": (1, 2)
  }
  # processor.nb_heads is not read (heads come from floyd.num_heads), nor
  # are the other model sections.
  unread = dict(saved, processor=dict(saved["processor"], nb_heads=2))
  unread["rt"] = dict(saved["rt"], num_layers=7)
  assert clrs_loop.resume_conflicts(saved, unread) == {}
  # A run saved before the floyd section existed resumes (its defaults).
  older = {k: v for k, v in saved.items() if k != "floyd"}
  rt_now = dict(saved, processor_type="rt")
  rt_before = dict(older, processor_type="rt")
  assert clrs_loop.resume_conflicts(rt_before, rt_now) == {}
  assert "floyd" in clrs_loop.unread_paths(rt_now)
  assert "floyd" in clrs_loop.unread_paths(saved, custom_factory=True)


@pytest.mark.slow
def test_floyd_runs_end_to_end(tmp_path):
  results = clrs_loop.train_and_evaluate(
      clrs_config.get_config(TINY), str(tmp_path)
  )
  assert results["config"]["processor_type"] == "floyd"
  assert results["config"]["floyd"]["num_heads"] == 2
  run = results["algorithms"]["bellman_ford"]["runs"][0]
  assert run["steps"] == 2 and 0.0 <= run["test"]["6"] <= 1.0
