"""The op profile groups XLA ops by the module path in their name stack."""

from experiments.bench import profile_clrs_step
from experiments.bench import xla_op_profile

_HLO = """
  %ynn_fusion.80 = f32[8192,192]{1,0} fusion(%a, %b), kind=kCustom, metadata={op_name="jit(_feedback)/jvp(net)/while/body/closed_call/net/rt_clrs_processor/edge_in/dot_general" stack_frame_id=250}
  ROOT %add.1 = f32[2]{0} add(%c, %d), metadata={op_name="jit(_feedback)/transpose(jvp(net))/while/body/layer_2/attention/edge_qk/add_any"}
  %p = f32[2]{0} parameter(0)
"""


def test_op_names_reads_op_names_of_hlo_instructions():
  names = xla_op_profile.op_names(_HLO)
  assert set(names) == {"ynn_fusion.80", "add.1"}
  assert names["add.1"].endswith("edge_qk/add_any")


def test_module_path_drops_transform_and_loop_scopes():
  names = xla_op_profile.op_names(_HLO)
  assert (
      profile_clrs_step.module_path(names["ynn_fusion.80"], 2)
      == "rt_clrs_processor/edge_in"
  )
  assert (
      profile_clrs_step.module_path(names["add.1"], 3)
      == "layer_2/attention/edge_qk"
  )
  assert (
      profile_clrs_step.module_path(
          "jit(_feedback)/jvp(net)/broadcast_in_dim", 3
      )
      == "(top level) broadcast_in_dim"
  )


def test_result_shapes_reads_each_instruction_result_shape():
  shapes = xla_op_profile.result_shapes(_HLO)
  assert shapes["ynn_fusion.80"] == "f32[8192,192]{1,0}"
  assert shapes["add.1"] == "f32[2]{0}"
  assert shapes["p"] == "f32[2]{0}"
