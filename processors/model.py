"""`CarryModel`: CLRS `BaselineModel` running our `CarryNet`, data-parallel on a mesh.

It keeps the `BaselineModel` interface (init / feedback / predict /
compute_grad / save_model / restore_model / params / opt_state), so CLRS-style
training loops use it unchanged. What differs:
  * the network is `CarryNet` (carried edge and graph hiddens, optional
    pointer decoding from edges);
  * multi-device training is `jax.jit` over a 1-D device mesh with
    NamedShardings (parameters replicated, batches split over 'data'), not
    CLRS's `pmap`; one device is the same code path.
"""

import haiku as hk
import jax
from clrs._src import baselines

from processors.nets import CarryNet
from relational_jax.parallel import mesh as mesh_lib


class CarryModel(baselines.BaselineModel):
  """BaselineModel whose network carries node, edge and graph hiddens.

  Args:
    *args, **kwargs: as `clrs.models.BaselineModel`.
    ptr_from_edges: decode node pointers from edge vectors only.
    carry_state: carry our processors' edge and graph hiddens (False gives
      stock CLRS behaviour on the mesh).
    decode_previous_hiddens: with carried state, edge and graph decoders
      also read the previous step's hidden (the RT authors' nets.py; see
      `processors.nets`).
    scalar_hint_gradient: hard-postprocessed SCALAR hints fed back keep
      their gradient (the RT authors' fork; False: dm-clrs 2.0.3 stops it;
      see `processors.nets`).
    mesh: the device mesh (default: all local devices on axis 'data').
  """

  def __init__(
      self,
      *args,
      ptr_from_edges: bool = False,
      carry_state: bool = True,
      decode_previous_hiddens: bool = True,
      scalar_hint_gradient: bool = True,
      mesh=None,
      **kwargs
  ):
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
    super().__init__(*args, **kwargs)

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
    self.jitted_feedback = jax.jit(
        self._feedback,
        static_argnums=4,
        donate_argnums=(0, 3),
        out_shardings=(rep, rep, rep),
    )
    self.jitted_predict = jax.jit(self._predict, static_argnums=(3, 4, 5))
    self.jitted_accum_opt_update = jax.jit(
        baselines.accum_opt_update,
        static_argnums=(3, 4),
        donate_argnums=(0, 2),
        out_shardings=(rep, rep),
    )

  # Parameters and optimiser state live replicated on the mesh.
  @property
  def params(self):
    return (
        None
        if self._device_params is None
        else jax.device_get(self._device_params)
    )

  @params.setter
  def params(self, params):
    self._device_params = jax.device_put(params, self._replicated)

  @property
  def opt_state(self):
    return (
        None
        if self._device_opt_state is None
        else jax.device_get(self._device_opt_state)
    )

  @opt_state.setter
  def opt_state(self, opt_state):
    self._device_opt_state = jax.device_put(opt_state, self._replicated)

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
        self._device_params,
        jax.device_put(rng_key, self._replicated),
        self.shard_feedback(feedback),
        algorithm_index,
    )

  def feedback(self, rng_key, feedback, algorithm_index=None) -> float:
    algorithm_index = self._algorithm_index(algorithm_index)
    loss, self._device_params, self._device_opt_state = self.jitted_feedback(
        self._device_params,
        jax.device_put(rng_key, self._replicated),
        self.shard_feedback(feedback),
        self._device_opt_state,
        algorithm_index,
    )
    return loss

  def predict(
      self,
      rng_key,
      features,
      algorithm_index=None,
      return_hints: bool = False,
      return_all_outputs: bool = False,
  ):
    algorithm_index = self._algorithm_index(algorithm_index)
    return self.jitted_predict(
        self._device_params,
        jax.device_put(rng_key, self._replicated),
        self.shard_features(features),
        algorithm_index,
        return_hints,
        return_all_outputs,
    )

  def update_model_params_accum(self, grads) -> None:
    grads = jax.device_put(grads, self._replicated)
    self._device_params, self._device_opt_state = self.jitted_accum_opt_update(
        self._device_params,
        grads,
        self._device_opt_state,
        self.opt,
        self._freeze_processor,
    )
