"""`CarryModel`: CLRS `BaselineModel` running our `CarryNet`, data-parallel on a mesh.

It keeps the `BaselineModel` interface (init / feedback / predict /
compute_grad / save_model / restore_model / params / opt_state), so CLRS-style
training loops use it unchanged. What differs:
  * the network is `CarryNet` (carried edge and graph hiddens, optional
    pointer decoding from edges);
  * multi-device training is `jax.jit` over a 1-D device mesh with
    NamedShardings (parameters replicated, batches split over 'data'), not
    CLRS's `pmap`; one device is the same code path;
  * the optimiser may be any optax transformation (`optimizer=`; the
    library's is `relational_jax.training.optim.make_optimizer`);
  * a functional interface for a loop that holds the training state itself
    (`relational_jax.training.trainer`): `state()` -> {params, opt_state},
    `train_step(state, rng, feedback)` -> (state, {loss, grad_norm}),
    `bound(params)` (a predictor of those parameters). Neither touches the
    model's own parameters;
  * a model over several algorithms (a list of specs: the generalist of
    Ibarz et al. 2022) updates, on one algorithm's batch, only the processor
    and that algorithm's encoders and decoders (`update_of_algorithm`:
    dm-clrs's `filter_null_grads` semantics by our own path, which runs on
    the optax installed here); `train_step_summed` takes one step on the
    summed losses of one batch of every algorithm.
"""

from typing import Dict, Optional, Sequence

import haiku as hk
import jax
import jax.numpy as jnp
import optax
from clrs._src import baselines
from clrs._src import processors as clrs_processors

from processors.nets import CarryNet
from relational_jax.parallel import mesh as mesh_lib


def trains_with_algorithm(module: str, algorithm_index: Optional[int]) -> bool:
  """Whether the parameters of Haiku `module` learn from a batch of algorithm
  `algorithm_index` (None: from every algorithm's): the processor's, and the
  encoders and decoders named for that algorithm (dm-clrs's `algo_<i>_`
  prefix), as dm-clrs's `filter_null_grads` keeps them."""
  return (
      algorithm_index is None
      or clrs_processors.PROCESSOR_TAG in module
      or f"algo_{algorithm_index}_" in module
  )


def update_of_algorithm(
    opt: optax.GradientTransformation,
    params,
    grads,
    opt_state,
    algorithm_index: Optional[int],
):
  """(updates, new optimiser state) of a step on a batch of algorithm
  `algorithm_index`: the parameters of the other algorithms' encoders and
  decoders get no update and keep their optimiser state (their gradient
  counts as absent, not zero: no momentum builds up from it), as dm-clrs's
  `filter_null_grads`; global optimiser state (Adam's count, the schedule)
  advances every step, as there. Where every module trains (one algorithm,
  or `algorithm_index` None) this is `opt.update` itself."""
  keep = {m: trains_with_algorithm(m, algorithm_index) for m in grads}
  if all(keep.values()):
    return opt.update(grads, opt_state, params)
  zeros = lambda tree: jax.tree_util.tree_map(jnp.zeros_like, tree)
  kept = lambda new, old: {m: new[m] if keep[m] else old[m] for m in new}
  # Absent gradients are zeros for the optimiser (they add nothing to a
  # global norm); their updates and per-parameter state are then undone.
  masked = {m: g if keep[m] else zeros(g) for m, g in grads.items()}
  updates, new_state = opt.update(masked, opt_state, params)
  updates = kept(updates, zeros(updates))
  per_parameter = jax.tree_util.tree_structure(params)
  is_per_parameter = lambda x: jax.tree_util.tree_structure(x) == per_parameter
  new_state = jax.tree_util.tree_map(
      lambda new, old: kept(new, old) if is_per_parameter(new) else new,
      new_state,
      opt_state,
      is_leaf=is_per_parameter,
  )
  return updates, new_state


class CarryModel(baselines.BaselineModel):
  """BaselineModel whose network carries node, edge and graph hiddens.

  Args:
    *args, **kwargs: as `clrs.models.BaselineModel`.
    ptr_from_edges: decode node pointers from edge vectors only (the
      processor's edge hiddens; one that returns none is an error).
    carry_state: carry our processors' edge and graph hiddens (False gives
      stock CLRS behaviour on the mesh; a processor that carries no state,
      as dm-clrs's kinds, needs False: True is then an error at the first
      trace).
    decode_previous_hiddens: with carried state, edge and graph decoders
      also read the previous step's hidden (the RT authors' nets.py; see
      `processors.nets`).
    scalar_hint_gradient: hard-postprocessed SCALAR hints fed back keep
      their gradient (the RT authors' fork; False: dm-clrs 2.0.3 stops it;
      see `processors.nets`).
    mesh: the device mesh (default: `mesh.make_data_mesh()`, every device of
      `jax.devices()`, all processes', on axis 'data').
    optimizer: an optax transformation used instead of CLRS's own (Adam at
      `learning_rate`, clipped at `grad_clip_max_norm`), which must then not
      be given.
  """

  def __init__(
      self,
      *args,
      ptr_from_edges: bool = False,
      carry_state: bool = True,
      decode_previous_hiddens: bool = True,
      scalar_hint_gradient: bool = True,
      mesh=None,
      optimizer: Optional[optax.GradientTransformation] = None,
      **kwargs,
  ):
    if optimizer is not None:
      given = sorted({"learning_rate", "grad_clip_max_norm"} & set(kwargs))
      if given:
        raise ValueError(
            f"CarryModel: {given} configure CLRS's own optimiser; with "
            "optimizer= they would be ignored. Give one or the other."
        )
    if kwargs.get("debug", False):
      raise ValueError("CarryModel does not support debug=True.")
    if ptr_from_edges and not carry_state:
      raise ValueError("ptr_from_edges=True needs carry_state=True.")
    self.ptr_from_edges = ptr_from_edges
    self.carry_state = carry_state
    self.decode_previous_hiddens = decode_previous_hiddens
    self.scalar_hint_gradient = scalar_hint_gradient
    self.mesh = mesh if mesh is not None else mesh_lib.make_data_mesh()
    self._replicated = mesh_lib.replicated(self.mesh)
    self._mesh_params = self._mesh_opt_state = None
    super().__init__(*args, **kwargs)
    if optimizer is not None:
      self.opt = optimizer

  def init(self, features, seed) -> None:
    """`BaselineModel.init`; with several algorithms, the processor's
    parameters are those a model of the first algorithm alone draws, so a
    generalist over one algorithm is that algorithm's single-task model and
    the processor's draw does not depend on the others (a lifted Flax stack
    keeps the draw of its last call during Haiku's init, which with several
    algorithms is in the last algorithm's pass)."""
    super().init(features, seed)
    if len(self._spec) == 1:
      return
    first = self.net_fn.init(
        jax.random.PRNGKey(seed),
        [features[0]],
        True,
        algorithm_index=0,
        return_hints=False,
        return_all_outputs=False,
    )
    params = self.params
    for module in params:
      if clrs_processors.PROCESSOR_TAG in module:
        params[module] = first[module]
    self.params = params
    self.opt_state = self.opt.init(params)

  @property
  def num_devices(self) -> int:
    return mesh_lib.num_data_shards(self.mesh)

  def _create_net_fns(
      self,
      hidden_dim,
      encode_hints,
      processor_factory,
      use_lstm,
      encoder_init,
      dropout_prob,
      hint_teacher_forcing,
      hint_repred_mode,
  ):
    def _use_net(*args, **kwargs):
      return CarryNet(
          self._spec,
          hidden_dim,
          encode_hints,
          self.decode_hints,
          processor_factory,
          use_lstm,
          encoder_init,
          dropout_prob,
          hint_teacher_forcing,
          hint_repred_mode,
          self.nb_dims,
          self.nb_msg_passing_steps,
          self.debug,
          ptr_from_edges=self.ptr_from_edges,
          carry_state=self.carry_state,
          decode_previous_hiddens=self.decode_previous_hiddens,
          scalar_hint_gradient=self.scalar_hint_gradient,
      )(*args, **kwargs)

    self.net_fn = hk.transform(_use_net)
    # Sharded inputs make the gradient a global-batch mean: no pmean needed.
    self._maybe_pmean = lambda x: x
    rep = self._replicated
    self.jitted_grad = jax.jit(
        self._compute_grad, static_argnums=3, out_shardings=(rep, rep)
    )
    self.jitted_train_step = jax.jit(
        self._train_step,
        static_argnums=4,
        donate_argnums=(0, 3),
        out_shardings=(rep, rep, rep, rep),
    )
    self.jitted_summed_train_step = jax.jit(
        self._summed_train_step,
        donate_argnums=(0, 3),
        out_shardings=(rep, rep, rep, rep),
    )
    self.jitted_predict = jax.jit(self._predict, static_argnums=(3, 4, 5))
    self.jitted_accum_opt_update = jax.jit(
        baselines.accum_opt_update,
        static_argnums=(3, 4),
        donate_argnums=(0, 2),
        out_shardings=(rep, rep),
    )

  def _train_step(self, params, rng_key, feedback, opt_state, algorithm_index):
    """`BaselineModel._feedback`, also returning the gradient's global norm."""
    loss, grads = jax.value_and_grad(self._loss)(
        params, rng_key, feedback, algorithm_index
    )
    params, opt_state = self._update_params(
        params, grads, opt_state, algorithm_index
    )
    return loss, optax.tree.norm(grads), params, opt_state

  def _update_params(self, params, grads, opt_state, algorithm_index):
    """`BaselineModel._update_params` through `update_of_algorithm` (dm-clrs
    2.0.3's `filter_null_grads` fails on the optax installed here once an
    algorithm's modules are left out)."""
    updates, opt_state = update_of_algorithm(
        self.opt, params, grads, opt_state, algorithm_index
    )
    if self._freeze_processor:
      kept = baselines._filter_out_processor(params)  # pylint: disable=protected-access
      new_params = optax.apply_updates(
          kept, baselines._filter_out_processor(updates)  # pylint: disable=protected-access
      )
      return hk.data_structures.merge(params, new_params), opt_state
    return optax.apply_updates(params, updates), opt_state

  def _summed_train_step(self, params, rng_key, feedbacks, opt_state):
    """One update on the summed losses of `feedbacks`, one batch of each
    algorithm in order (every module trains)."""

    def loss(p):
      return sum(
          self._loss(p, rng_key, feedback, i)
          for i, feedback in enumerate(feedbacks)
      )

    total, grads = jax.value_and_grad(loss)(params)
    params, opt_state = self._update_params(params, grads, opt_state, None)
    return total, optax.tree.norm(grads), params, opt_state

  # Parameters and optimiser state live replicated on the mesh.
  @property
  def params(self):
    return (
        None if self._mesh_params is None else jax.device_get(self._mesh_params)
    )

  @params.setter
  def params(self, params):
    self._mesh_params = jax.device_put(params, self._replicated)

  @property
  def opt_state(self):
    return (
        None
        if self._mesh_opt_state is None
        else jax.device_get(self._mesh_opt_state)
    )

  @opt_state.setter
  def opt_state(self, opt_state):
    self._mesh_opt_state = jax.device_put(opt_state, self._replicated)

  def state(self) -> Dict:
    """The training state {params, opt_state} (on the mesh) after `init`."""
    if self._mesh_params is None:
      raise ValueError("CarryModel.state() needs init(features, seed) first.")
    return {"params": self._mesh_params, "opt_state": self._mesh_opt_state}

  def train_step(self, state, rng_key, feedback, algorithm_index=None):
    """One optimiser step on `feedback` from `state` (donated):
    (new state, {loss, grad_norm}). The model's own parameters are not
    touched."""
    algorithm_index = self._algorithm_index(algorithm_index)
    loss, grad_norm, params, opt_state = self.jitted_train_step(
        state["params"],
        jax.device_put(rng_key, self._replicated),
        self.shard_feedback(feedback),
        state["opt_state"],
        algorithm_index,
    )
    return (
        {"params": params, "opt_state": opt_state},
        {"loss": loss, "grad_norm": grad_norm},
    )

  def train_step_summed(self, state, rng_key, feedbacks: Sequence):
    """One optimiser step on the summed losses of `feedbacks` (one batch of
    every algorithm, in the order of the specs) from `state` (donated):
    (new state, {loss (the sum), grad_norm})."""
    if len(feedbacks) != len(self._spec):
      raise ValueError(
          "train_step_summed takes one batch per algorithm: "
          f"{len(self._spec)}, got {len(feedbacks)}."
      )
    loss, grad_norm, params, opt_state = self.jitted_summed_train_step(
        state["params"],
        jax.device_put(rng_key, self._replicated),
        [self.shard_feedback(f) for f in feedbacks],
        state["opt_state"],
    )
    return (
        {"params": params, "opt_state": opt_state},
        {"loss": loss, "grad_norm": grad_norm},
    )

  def bound(self, params) -> "BoundModel":
    """A predictor (`predict`, as this model's) of `params`."""
    return BoundModel(self, jax.device_put(params, self._replicated))

  def shard_features(self, features):
    """Splits a CLRS `Features` batch over the mesh (hints are time-major).
    With several processes every one passes the same global batch and
    keeps its own rows (`mesh_lib.shard_batch`)."""
    batch = features.lengths.shape[0]
    mesh_lib.check_divisible(batch, self.num_devices)
    return features._replace(
        inputs=mesh_lib.shard_batch(features.inputs, self.mesh),
        hints=mesh_lib.shard_batch(features.hints, self.mesh, batch_axis=1),
        lengths=mesh_lib.shard_batch(features.lengths, self.mesh),
    )

  def shard_feedback(self, feedback):
    return feedback._replace(
        features=self.shard_features(feedback.features),
        outputs=mesh_lib.shard_batch(feedback.outputs, self.mesh),
    )

  def _algorithm_index(self, algorithm_index):
    if algorithm_index is None:
      assert len(self._spec) == 1
      algorithm_index = 0
    return algorithm_index

  def compute_grad(self, rng_key, feedback, algorithm_index=None):
    algorithm_index = self._algorithm_index(algorithm_index)
    return self.jitted_grad(
        self._mesh_params,
        jax.device_put(rng_key, self._replicated),
        self.shard_feedback(feedback),
        algorithm_index,
    )

  def feedback(self, rng_key, feedback, algorithm_index=None) -> float:
    state, metrics = self.train_step(
        self.state(), rng_key, feedback, algorithm_index
    )
    self._mesh_params, self._mesh_opt_state = (
        state["params"],
        state["opt_state"],
    )
    return metrics["loss"]

  def predict(
      self,
      rng_key,
      features,
      algorithm_index=None,
      return_hints: bool = False,
      return_all_outputs: bool = False,
  ):
    return self.predict_with(
        self._mesh_params,
        rng_key,
        features,
        algorithm_index,
        return_hints,
        return_all_outputs,
    )

  def predict_with(
      self,
      params,
      rng_key,
      features,
      algorithm_index=None,
      return_hints: bool = False,
      return_all_outputs: bool = False,
  ):
    """`predict` with the given (replicated) parameters."""
    algorithm_index = self._algorithm_index(algorithm_index)
    return self.jitted_predict(
        params,
        jax.device_put(rng_key, self._replicated),
        self.shard_features(features),
        algorithm_index,
        return_hints,
        return_all_outputs,
    )

  def update_model_params_accum(self, grads) -> None:
    grads = jax.device_put(grads, self._replicated)
    self._mesh_params, self._mesh_opt_state = self.jitted_accum_opt_update(
        self._mesh_params,
        grads,
        self._mesh_opt_state,
        self.opt,
        self._freeze_processor,
    )


class BoundModel:
  """A `CarryModel`'s predictor with fixed parameters (`CarryModel.bound`)."""

  def __init__(self, model: CarryModel, params):
    self.model, self.params = model, params

  def predict(self, rng_key, features, algorithm_index=None, **kwargs):
    return self.model.predict_with(
        self.params, rng_key, features, algorithm_index, **kwargs
    )
