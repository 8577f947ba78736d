"""The loss and the initialisation; the step is the trainer's
(`trainer.make_train_step`; the optimiser: `relational_jax.training.optim`,
Csordas et al.'s warmup).

Training: teacher-forced token cross-entropy averaged over the real (non-PAD)
target tokens of the global batch (`batch['weights']`: zero on PAD tokens
and on the rows that pad an epoch's short last batch); Adam + global-norm
clipping + a learning rate schedule (optax), or any optax
GradientTransformation; one jitted step over a data mesh (params replicated,
batch split over 'data'; `relational_jax.parallel.mesh`), its dropout key
fold_in(state['rng'], state['step']).

The train state is `trainer.train_state`'s {params, opt_state, step, rng}. The model is called as
`model.apply({'params': p}, src_BxS, src_mask_BxS, tgt_in_BxT,
deterministic=..., rngs={'dropout': key})` -> logits BxTxV (plus
`tgt_tree_pos_BxTxP=` / `src_tree_pos_BxSxP=` when the batch has tree
positions).
"""

import functools
from typing import Dict, Union

import jax
import jax.numpy as jnp
import optax

from relational_jax.data.vocab import PAD_ID
from relational_jax.parallel import mesh as mesh_lib
from relational_jax.training import optim
from relational_jax.training import trainer

# The built-in optimiser's settings (`optim.Settings` of `config.train`), or
# an optax GradientTransformation of the caller's.
OptimizerSpec = Union[optim.Settings, optax.GradientTransformation]


def optimizer_args(train_config) -> optim.Settings:
  """The built-in optimiser's settings from `config.train`."""
  return optim.settings_of(train_config)


def as_transformation(spec: OptimizerSpec) -> optax.GradientTransformation:
  if isinstance(spec, optax.GradientTransformation):
    return spec
  return optim.make_optimizer(spec)


def _model_extras(batch) -> Dict:
  """Keyword inputs only some models take (tree positions)."""
  extras = {}
  if batch.get("tgt_tree_pos") is not None:
    extras["tgt_tree_pos_BxTxP"] = batch["tgt_tree_pos"]
  if batch.get("src_tree_pos") is not None:
    extras["src_tree_pos_BxSxP"] = batch["src_tree_pos"]
  return extras


def loss_and_metrics(model, params, batch, dropout_rng, deterministic=False):
  """Token cross-entropy averaged over the non-PAD targets of the batch
  (`batch['weights']`), and token accuracy."""
  logits_BxTxV = model.apply(
      {"params": params},
      batch["src"],
      batch["src"] != PAD_ID,
      batch["tgt_in"],
      **_model_extras(batch),
      deterministic=deterministic,
      rngs={"dropout": dropout_rng},
  )
  ce_BxT = optax.softmax_cross_entropy_with_integer_labels(
      logits_BxTxV.astype(jnp.float32), batch["tgt_out"]
  )
  w_BxT = batch["weights"]
  total = jnp.maximum(jnp.sum(w_BxT), 1.0)  # NaN weights stay NaN.
  loss = jnp.sum(ce_BxT * w_BxT) / total
  correct_BxT = jnp.argmax(logits_BxTxV, axis=-1) == batch["tgt_out"]
  accuracy = jnp.sum(correct_BxT * w_BxT) / total
  return loss, accuracy


@functools.lru_cache(maxsize=16)
def compiled_train_step(
    model, optimizer: OptimizerSpec, mesh, dropout_prng: str = "threefry"
):
  """The trainer's step (`trainer.make_train_step`) of `loss_and_metrics`,
  one per (model, optimiser, mesh, dropout_prng); cached so that repeated
  runs in one process reuse the compilation. `dropout_prng` picks the
  dropout masks' generator (`relational_jax.training.prng`).

  step(state, batch, step) -> (state, {loss, token_accuracy, grad_norm});
  the input state is donated."""
  return trainer.make_train_step(
      functools.partial(loss_and_metrics, model),
      as_transformation(optimizer),
      mesh,
      metric="token_accuracy",
      dropout_prng=dropout_prng,
  )


def init_fn(model, tx: optax.GradientTransformation):
  """init(key, example_batch) -> train state {params, opt_state, step, rng}."""

  def init(key, example):
    init_key, rng = jax.random.split(key)
    params = model.init(
        init_key,
        example["src"],
        example["src"] != PAD_ID,
        example["tgt_in"],
        **_model_extras(example),
        deterministic=True,
    )["params"]
    return trainer.train_state(params, tx, rng)

  return init


@functools.lru_cache(maxsize=16)
def compiled_init(model, optimizer: OptimizerSpec, mesh):
  """jit of `init_fn`, its state replicated over the mesh; cached."""
  return jax.jit(
      init_fn(model, as_transformation(optimizer)),
      out_shardings=mesh_lib.replicated(mesh),
  )
