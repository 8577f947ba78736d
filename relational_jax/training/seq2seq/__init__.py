"""Seq2seq training as a library call (SCAN / COGS / TSV, or your own data
and model).

  from relational_jax.training import seq2seq as seq2seq_training
  config = seq2seq_training.default_config()       # a ConfigDict
  config.data.dataset = "cogs"
  config.transformer.positions = "absolute"
  results = seq2seq_training.train_and_evaluate(config, "runs/cogs")
  # Your own pairs, module (or factory) and optax optimiser:
  results = seq2seq_training.train_and_evaluate(
      config, "runs/mine", data=seq2seq_training.Seq2SeqData(train, evals),
      model=my_module_factory, optimizer=optax.adam(1e-3))

* `config`      -- the ConfigDict layout, validation, resume rules
* `data`        -- `load_data`, `Seq2SeqData`, `encode_set`, `EncodedSet`,
                   `target_arities`, `subset`
* `step`        -- the optimiser's settings, the loss, the trainer's step
                   of it (`trainer.make_train_step`, cached) and the init
* `evaluation`  -- greedy exact match, the model-selection set
* `loop`        -- `Experiment`, `train_and_evaluate`, `restore_checkpoint`
"""

from relational_jax.training.errors import NonFiniteLossError
from relational_jax.training.seq2seq import config
from relational_jax.training.seq2seq import data
from relational_jax.training.seq2seq import evaluation
from relational_jax.training.seq2seq import loop
from relational_jax.training.seq2seq import step
from relational_jax.training.seq2seq.config import default_config
from relational_jax.training.seq2seq.config import get_config
from relational_jax.training.seq2seq.config import validate
from relational_jax.training.seq2seq.data import EncodedSet
from relational_jax.training.seq2seq.data import Seq2SeqData
from relational_jax.training.seq2seq.data import encode_set
from relational_jax.training.seq2seq.data import load_data
from relational_jax.training.seq2seq.loop import Experiment
from relational_jax.training.seq2seq.loop import restore_checkpoint
from relational_jax.training.seq2seq.loop import train_and_evaluate

__all__ = [
    "config",
    "data",
    "evaluation",
    "loop",
    "step",
    "default_config",
    "get_config",
    "validate",
    "EncodedSet",
    "Seq2SeqData",
    "encode_set",
    "load_data",
    "Experiment",
    "NonFiniteLossError",
    "restore_checkpoint",
    "train_and_evaluate",
]
