"""Tiny configs shared by the seq2seq training tests.

Every run shares these model/optimiser settings, so the train step and the
greedy decoder compile once per process."""

from relational_jax.training import seq2seq

# Dotted config paths -> values.
TINY = {
    "data.dataset": "scan",
    "data.split": "length_cutoff",
    "data.cutoff": 26,
    "data.scan_official_order": False,
    "data.max_eval_examples": 4,
    "transformer.d_model": 16,
    "transformer.num_heads": 2,
    "transformer.ffn_dim": 32,
    "transformer.num_encoder_layers": 1,
    "transformer.num_decoder_layers": 1,
    "transformer.dropout_rate": 0.1,
    "train.batch_size": 8,
    "train.eval_batch_size": 4,
    "train.steps": 4,
    "train.eval_every": 3,
    "train.schedule": "cosine",
    "train.warmup_steps": 1,
    "train.learning_rate": 1e-3,
    "train.clip": 1.0,
    "train.seed": 3,
    "train.progress": False,
}
# The tiny Edge Transformer encoder-decoder (width 8 = 2 heads x 4, tied
# layers, FFN 16).
TINY_ET = {
    "model": "edge_transformer",
    "edge_transformer.et.num_heads": 2,
    "edge_transformer.et.head_dim": 4,
    "edge_transformer.et.ffn_dim": 16,
    "edge_transformer.et.num_layers": 1,
    "edge_transformer.num_decoder_layers": 1,
    "edge_transformer.et.dropout_rate": 0.1,
    "edge_transformer.et.tied": True,
}


def tiny(overrides=None):
  """The tiny config with dotted-path `overrides`; with the Edge Transformer
  selected, the transformer section keeps its defaults (validation refuses
  changes to the section a run does not build)."""
  overrides = overrides or {}
  base = TINY
  if overrides.get("model") == "edge_transformer":
    base = {k: v for k, v in TINY.items() if not k.startswith("transformer.")}
  return seq2seq.get_config(dict(base, **overrides))


def flag_argv(values):
  """`--config.<path>=value` argv of dotted-path `values` (booleans as
  --config.<path> / --noconfig.<path>)."""
  return [
      f"--{'' if v else 'no'}config.{k}"
      if isinstance(v, bool)
      else f"--config.{k}={v}"
      for k, v in values.items()
  ]


# With the caller's own optax optimizer, the built-in optimiser's fields
# keep their defaults (the loop refuses others: it would not read them).
OWN_OPTIMIZER = {
    f"train.{name}": value
    for name, value in seq2seq.default_config().train.items()
    if name in ("learning_rate", "schedule", "warmup_steps", "clip")
}
