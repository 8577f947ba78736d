"""CLRS processors built on relational_jax, and the extended CLRS network.

Register a processor in a CLRS training loop by passing
`processors.get_processor_factory(kind, use_ln, nb_triplet_fts, nb_heads)` to
`clrs.models.BaselineModel` (or to `processors.CarryModel` to carry edge and
graph hiddens between algorithm steps).

Modules: factory (the factory: `PROCESSORS`, our kinds' table of
`ProcessorSpec`s), relational_transformer, pair_state (the
shared pair-state processor), edge_transformer and floyd (the processors),
nets / model (`CarryNet`, `CarryModel`), tf_free.

Importing this package makes dm-clrs importable: where TensorFlow is
installed nothing changes; where it is absent, `tf_free` installs import-time
stand-ins and logs a warning once (see `processors.tf_free`).
"""

from processors import tf_free

tf_free.ensure_clrs_importable()

# pylint: disable=g-import-not-at-top,wrong-import-position
from processors.factory import CLRS_KINDS
from processors.factory import ET_KINDS
from processors.factory import FLOYD_KINDS
from processors.factory import PROCESSORS
from processors.factory import ProcessorSpec
from processors.factory import RT_KINDS
from processors.factory import all_kinds
from processors.factory import get_processor_factory
from processors.factory import register
from processors.model import CarryModel
from processors.nets import CarryNet
from processors.edge_transformer import EdgeTransformerProcessor
from processors.floyd import FloydProcessor
from processors.pair_state import PairStateProcessor
from processors.relational_transformer import ProcessorState
from processors.relational_transformer import RelationalTransformerProcessor

__all__ = [
    "CLRS_KINDS",
    "ET_KINDS",
    "FLOYD_KINDS",
    "PROCESSORS",
    "ProcessorSpec",
    "RT_KINDS",
    "EdgeTransformerProcessor",
    "FloydProcessor",
    "PairStateProcessor",
    "all_kinds",
    "get_processor_factory",
    "register",
    "CarryModel",
    "CarryNet",
    "ProcessorState",
    "RelationalTransformerProcessor",
]
