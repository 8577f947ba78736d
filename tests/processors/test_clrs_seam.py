"""The dm-clrs seam: `processors.CarryNet` re-implements CLRS internals."""

import hashlib
import inspect

import processors  # noqa: F401  (makes dm-clrs importable)
from clrs._src import nets

# sha256 of `inspect.getsource(clrs._src.nets.Net._one_step_pred)` in
# dm-clrs 2.0.3 (setup.py pins dm-clrs>=2.0.3,<2.1).
_ONE_STEP_PRED_SHA256 = (
    "8ce1f4010437d311956033c723ad34689c6a0153195282ce5d976183a681a9b3"
)


def test_clrs_one_step_pred_is_the_one_carrynet_reimplements():
  source = inspect.getsource(nets.Net._one_step_pred)
  digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
  assert digest == _ONE_STEP_PRED_SHA256, (
      "clrs._src.nets.Net._one_step_pred differs from dm-clrs 2.0.3's "
      f"(sha256 {digest}). processors.CarryNet._one_step_pred re-implements "
      "it (encode / process / decode with carried edge and graph hiddens): "
      "port the CLRS change into processors/nets.py, then record the new "
      "hash here and adjust the dm-clrs pin in setup.py."
  )
