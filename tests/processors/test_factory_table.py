"""The processor table (`processors.PROCESSORS`): every kind of ours is one
entry, the options and families read from it, and a kind registered from
outside is a kind of the factory and of the CLRS run config."""

import dataclasses

import haiku as hk
import pytest

import processors
from processors.relational_transformer import RelationalTransformerProcessor
from relational_jax.training.clrs import config as clrs_config
from relational_jax.training.clrs import loop as clrs_loop


def test_the_table_is_every_kind_of_ours():
  assert processors.all_kinds() == processors.CLRS_KINDS + tuple(
      processors.PROCESSORS
  )
  assert tuple(processors.PROCESSORS) == (
      "rt",
      "rt_no_edge_update",
      "transformer",
      "rt_triangular",
      "et",
      "floyd",
  )
  assert processors.RT_KINDS == {
      "rt": {},
      "rt_no_edge_update": {"edge_update": False},
      "transformer": {"use_edges": False, "edge_update": False},
      "rt_triangular": {},
  }
  assert processors.ET_KINDS == ("et",)
  assert processors.FLOYD_KINDS == ("floyd",)
  assert clrs_config.model_sections() == {
      "rt": "RT",
      "et": "ET",
      "floyd": "FloydNet",
  }


def test_each_kind_takes_its_config_fields_as_options():
  rt = {
      "num_layers", "head_dim", "node_ffn_dim", "edge_msg_dim",
      "edge_ffn_dim", "edge_dim", "tied", "use_adjacency", "dropout_rate",
      "ln_epsilon", "init", "graph_vec",
  }  # fmt: skip
  options = {k: set(s.options()) for k, s in processors.PROCESSORS.items()}
  assert options["rt"] == rt
  # The ablations refuse what they never read: the edge update's widths,
  # and without edges their width.
  edge_update = {"edge_msg_dim", "edge_ffn_dim"}
  assert options["rt_no_edge_update"] == rt - edge_update
  assert options["transformer"] == rt - edge_update - {"edge_dim"}
  assert "zero_padded_pairs" not in options["floyd"]  # CLRS: no padding.
  assert options["rt_triangular"] == rt | {"chunk_size", "triangular_heads"}
  assert {"node_readout", "graph_vec", "ablation"} <= options["et"]
  assert "num_heads" not in options["et"] | options["floyd"]
  assert processors.PROCESSORS["rt"].arguments() == ("nb_heads", "use_ln")
  assert processors.PROCESSORS["et"].arguments() == ("nb_heads",)
  assert processors.PROCESSORS["floyd"].arguments() == ("nb_heads",)
  with pytest.raises(ValueError, match=r"run_defaults \['num_heads'\] are"):
    dataclasses.replace(
        processors.PROCESSORS["et"], run_defaults={"num_heads": 4}
    )
  with pytest.raises(ValueError, match=r"Unknown option\(s\) \['chunk_size'\]"):
    processors.get_processor_factory("rt", True, 8, chunk_size=2)
  for kind, option in (
      ("rt_no_edge_update", dict(edge_msg_dim=64)),
      ("transformer", dict(edge_dim=6)),
      ("floyd", dict(zero_padded_pairs=False)),
  ):
    with pytest.raises(ValueError, match=rf"\[{list(option)[0]!r}\]"):
      processors.get_processor_factory(kind, True, 8, **option)


@dataclasses.dataclass(frozen=True)
class _ToyConfig:
  num_heads: int = 1
  width: int = 4
  secret: int = 0  # Not an option.


@pytest.fixture
def toy():
  spec = processors.ProcessorSpec(
      RelationalTransformerProcessor,  # Only its constructor's arguments.
      _ToyConfig,
      section="toy",
      family="Toy",
      withheld=("secret",),
      choices={"graph_vec": ("core", "cat")},
      run_defaults={"width": 8},
  )
  processors.register("toy", spec)
  yield spec
  processors.PROCESSORS.pop("toy")


def test_a_registered_kind_is_a_kind_of_the_factory(toy):
  assert processors.all_kinds()[-1] == "toy"
  built = {}
  made = hk.transform(
      lambda: built.update(
          p=processors.get_processor_factory("toy", True, 8, 3, width=2)(16)
      )
  )
  made.init(None)
  assert built["p"].config == _ToyConfig(num_heads=3, width=2)
  assert built["p"].graph_vec == "core"  # The first choice.
  with pytest.raises(
      ValueError, match=r"\['secret'\].*\['graph_vec', 'width'\]"
  ):
    processors.get_processor_factory("toy", True, 8, secret=1)
  with pytest.raises(ValueError, match=r"Unknown graph_vec 'x'"):
    processors.get_processor_factory("toy", True, 8, graph_vec="x")
  with pytest.raises(ValueError, match=r"'toy' already exists"):
    processors.register("toy", toy)
  with pytest.raises(ValueError, match=r"'mpnn' already exists"):
    processors.register("mpnn", toy)


def test_a_registered_kind_has_its_clrs_config_section(toy):
  config = clrs_config.get_config({"processor_type": "toy"})
  # Heads: processor.nb_heads (the factory's nb_heads), not the section.
  assert config.toy.to_dict() == {"width": 8}
  assert clrs_config._sections_in_use("toy") == ("toy",)
  assert set(clrs_loop.unread_paths(config.to_dict())) == {
      "processor.use_ln",  # _ToyConfig has no use_ln.
      "processor.node_readout",
      "processor.nb_triplet_fts",  # dm-clrs's triplet kinds only.
      "rt",
      "et",
      "floyd",
  }
  made = hk.transform(
      lambda: clrs_config.processor_factory(
          clrs_config.get_config(
              {"processor_type": "toy", "processor.nb_heads": 3}
          )
      )(16).config
  )
  assert made.apply({}, None) == _ToyConfig(num_heads=3, width=8)
  with pytest.raises(ValueError, match=r"config.processor.use_ln=False is no"):
    clrs_config.validate(
        clrs_config.get_config(
            {"processor_type": "toy", "processor.use_ln": False}
        )
    )
  assert "toy" in clrs_loop.unread_paths({"processor_type": "rt"})
  changed = clrs_config.get_config({"processor_type": "et", "toy.width": 2})
  with pytest.raises(ValueError, match=r"config.toy fields \['width'\] apply"):
    clrs_config.validate(changed)
