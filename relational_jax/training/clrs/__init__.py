"""CLRS training as a library call (RT paper appendix D protocol).

  from relational_jax.training import clrs as clrs_training
  config = clrs_training.default_config()          # a ConfigDict
  config.algorithms = ("bellman_ford",)
  results = clrs_training.train_and_evaluate(config, "runs/bf",
                                             processor_factory=my_factory)

* `config`      -- the ConfigDict layout, validation, the processor factory
* `data`        -- CLRS samplers as CLRS run.py, seeded evaluation sets, a
                   resumable training stream
* `loop`        -- `train_and_evaluate`, `evaluate_checkpoints`
* `evaluation`  -- CLRS scoring at any sizes, results JSON and PNGs
"""

from relational_jax.training.clrs import config
from relational_jax.training.clrs import data
from relational_jax.training.clrs import evaluation
from relational_jax.training.clrs import loop
from relational_jax.training.clrs.config import default_config
from relational_jax.training.clrs.config import get_config
from relational_jax.training.clrs.loop import evaluate_checkpoints
from relational_jax.training.clrs.loop import train_and_evaluate

__all__ = [
    "config",
    "data",
    "evaluation",
    "loop",
    "default_config",
    "get_config",
    "evaluate_checkpoints",
    "train_and_evaluate",
]
