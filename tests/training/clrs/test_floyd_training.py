"""processor_type='floyd' in the CLRS run config: its `floyd` section, the
checks on unread sections, resume, and a tiny end-to-end run."""

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
    "processor.nb_heads": 2,
    "floyd.head_dim": 4,
    "floyd.num_layers": 1,
    "floyd.chunk_size": 4,
}


def test_floyd_section_defaults_are_ets_width():
  c = clrs_config.default_config()
  assert (
      c.processor.nb_heads * c.floyd.head_dim
      == 192
      == (c.processor.nb_heads * c.et.head_dim)
  )
  assert c.floyd.num_layers == c.et.num_layers == 3
  config = config_lib.to_dict(c.floyd)
  assert FloydConfig(num_heads=c.processor.nb_heads, **config) == FloydConfig(
      num_heads=12, head_dim=16, num_layers=3
  )


def _built_config(config):
  import haiku as hk  # pylint: disable=g-import-not-at-top

  return hk.transform(
      lambda: clrs_config.processor_factory(config)(8).config
  ).apply({}, None)


def test_processor_factory_reads_the_floyd_section():
  config = clrs_config.get_config(dict(TINY, **{"floyd.norm_position": "post"}))
  clrs_config.validate(config)
  assert _built_config(config) == FloydConfig(
      num_heads=2, head_dim=4, num_layers=1, chunk_size=4, norm_position="post"
  )


@pytest.mark.parametrize("kind", ["rt", "rt_triangular", "et", "floyd"])
def test_processor_nb_heads_sets_the_heads_of_every_kind_of_ours(kind):
  """Heads are declared once, `processor.nb_heads`; no model section holds
  num_heads (nor use_ln)."""
  config = clrs_config.get_config(
      {"processor_type": kind, "processor.nb_heads": 3}
  )
  clrs_config.validate(config)
  assert _built_config(config).num_heads == 3
  for section in clrs_config.model_sections():
    assert not {"num_heads", "use_ln"} & set(config[section])
  if kind.startswith("rt"):  # The RT kinds' layer norm: processor.use_ln.
    no_ln = {"processor_type": kind, "processor.use_ln": False}
    assert _built_config(clrs_config.get_config(no_ln)).use_ln is False


@pytest.mark.parametrize("kind", ["et", "floyd"])
def test_processor_use_ln_is_refused_where_the_kind_has_no_layer_norm(kind):
  config = clrs_config.get_config(
      {"processor_type": kind, "processor.use_ln": False}
  )
  with pytest.raises(
      ValueError,
      match=(
          rf"config.processor.use_ln=False is not read by "
          rf"processor_type='{kind}' \(its \w+Config has no use_ln\); of "
          r"our kinds, \['rt', 'rt_no_edge_update', 'transformer', "
          r"'rt_triangular'\] read it. Leave it at its default True."
      ),
  ):
    clrs_config.validate(config)
  assert "processor.use_ln" in clrs_loop.unread_paths(config.to_dict())
  assert "processor.nb_heads" not in clrs_loop.unread_paths(config.to_dict())


def test_another_kinds_processor_option_is_refused():
  config = clrs_config.get_config(
      {"processor_type": "rt", "processor.node_readout": "rowcol"}
  )
  with pytest.raises(
      ValueError,
      match=(
          r"config.processor.node_readout='rowcol' is not an option of "
          r"processor_type='rt'; \['et', 'floyd'\] read it. Leave it at its "
          r"default 'diagonal'."
      ),
  ):
    clrs_config.validate(config)
  assert "processor.node_readout" in clrs_loop.unread_paths(config.to_dict())
  config.processor_type = "floyd"
  clrs_config.validate(config)


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


def test_resume_checks_the_floyd_section_for_floyd_runs_only():
  saved = config_lib.to_dict(clrs_config.get_config(TINY))
  changed = config_lib.to_dict(
      clrs_config.get_config(dict(TINY, **{"floyd.num_layers": 2}))
  )
  assert clrs_loop.resume_conflicts(saved, changed) == {
      "floyd.num_layers": (1, 2)
  }
  # The heads are read (processor.nb_heads), processor.use_ln and the other
  # model sections are not.
  heads = dict(saved, processor=dict(saved["processor"], nb_heads=4))
  assert clrs_loop.resume_conflicts(saved, heads) == {
      "processor.nb_heads": (2, 4)
  }
  unread = dict(saved, processor=dict(saved["processor"], use_ln=False))
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
  assert results["config"]["processor"]["nb_heads"] == 2
  assert "num_heads" not in results["config"]["floyd"]
  run = results["algorithms"]["bellman_ford"]["runs"][0]
  assert run["steps"] == 2 and 0.0 <= run["test"]["6"] <= 1.0
