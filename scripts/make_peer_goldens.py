"""Writes golden outputs of the RT and ET authors' own code for tests/fidelity.

The fidelity test (tests/fidelity/test_peer_goldens.py) checks that our RT
layer, stack and CLRS processor equal the RT authors' Haiku code, and that our
ET triangular attention, layer and stacks (layout='released_code') equal the
ET authors' PyTorch code, to 1e-5 in fp32. CI has no network, no torch and no
reference checkouts, so this script runs the authors' functions once, at small
sizes, on seeded random inputs and seeded random parameters, and stores the
inputs, their parameters (flattened under their own names) and their outputs
in small .npz files under tests/fidelity/goldens/.
Our side reads those parameters with the library's converters,
`relational_jax.interop` (rt_haiku, et_torch, csordas_torch: the same code
that loads the authors' trained weights); --record runs the fidelity test's
comparison (`max_abs_diffs`) on every golden.

References (check them out anywhere, e.g. under /tmp/peers):
  RT: github.com/CameronDiao/relational-transformer (their CLRS fork; the RT
      processor `RT` in clrs/_src/processors.py, the layer `Basic_RT` /
      `RTTransformerLayer` / `RTAttentionLayer` in
      clrs/_src/base_modules/Basic_Transformer_jax.py). Runs under the main
      python (jax + haiku).
  ET: github.com/bergen/EdgeTransformer (PyTorch): cogs/model.py
      (`EdgeAttention`, `EdgeTransformerLayer` with layernorm_pos='pre',
      `EdgeTransformerEncoder`, biased projections) and clutrr/model.py
      (`EdgeAttention` without biases, `EdgeTransformerEncoder` with label
      embedding, padding mask and `share_layers`), and their CLUTRR RAT
      baseline, clutrr/rat.py (`RAT` as train.py builds it for
      --model_type=rat: tied and untied, a padded batch; logits, loss and
      the gradient of every parameter, rat_clutrr*) and their whole CLUTRR
      Edge Transformer, clutrr/model.py (`EdgeTransformer`: encoder and
      output MLP; logits, loss, every gradient, et_clutrr) and their whole
      COGS parser, cogs/model.py (`Parser`: parent scores, label logits,
      loss, every gradient, et_cogs_parser), and their CFQ
      encoder-decoder, cfq-semantic-parsing/model.py (teacher-forced logits
      and loss, tied and untied, a padded source; et_cfq_seq2seq*). Runs
      under a python with numpy + torch only (e.g. /tmp/torchvenv/bin/python).
  FloydNet: github.com/ocx-lab/FloydNet (PyTorch): src/floydnet/functional.py
      (`pivotal_attention`: outputs and gradients, boolean / additive masks,
      softmax_cap, scale, a non-square case) and src/floydnet/transformer.py
      (`PivotalAttentionBlock` in four option sets: outputs, input and
      parameter gradients). Same python as ET.
  G2G: github.com/alirezamshi-zz/G2GTr (PyTorch; Mohammadshahi & Henderson
      2020): the graph-input attention `BertGraphSelfAttention`
      (senttr/parser/utils/graph.py) and `BertSelfAttention` with
      graph_input (statetr/model.py), each followed by the output map that
      begins BERT's BertSelfOutput, with a padding mask; and the Relation
      classifier `Classifier` (senttr/parser/parser.py) on every token pair.
      Outputs, input and parameter gradients. Same python as ET.

RT net (--rt_net_reference, run in their Python, e.g. /tmp/rtvenv: it
imports their whole clrs package, TensorFlow included): their BaselineModel
at run.py's RT settings, tiny sizes, on binary_search and bellman_ford
(loss, gradients, evaluation predictions; see make_rt_net).

Usage (see scripts/make_peer_goldens.sh for the whole recipe):
  python scripts/make_peer_goldens.py --rt_reference=/tmp/peers/rt
  /tmp/torchvenv/bin/python scripts/make_peer_goldens.py --et_reference=/tmp/peers/et
  /tmp/rtvenv/bin/python scripts/make_peer_goldens.py --rt_net_reference=/tmp/peers/rt
  /tmp/torchvenv/bin/python scripts/make_peer_goldens.py --floyd_reference=/tmp/peers/floyd
  /tmp/torchvenv/bin/python scripts/make_peer_goldens.py --g2g_reference=/tmp/peers/g2g
  python scripts/make_peer_goldens.py --record    # ours vs theirs -> README.json
  # --cases=PATTERN[,PATTERN]: write / record only the goldens whose names
  # match (fnmatch), e.g. --cases='rat_clutrr*'; the others are left as
  # they are (their README.json entries too).

Compatibility shims (nothing in the reference checkouts is edited):
  RT: importing `clrs._src.processors` from their checkout would run their
      package's clrs/__init__.py (datasets, TensorFlow) and collide with the
      installed dm-clrs. We register bare package objects `clrs`, `clrs._src`
      and `clrs._src.base_modules` whose __path__ points into their checkout,
      so only processors.py and base_modules/*.py are executed. Their code
      otherwise runs unchanged with jax 0.10 / haiku 0.0.17.
  ET: cogs/model.py, clutrr/model.py and clutrr/rat.py import `transformers`
      (T5 classes and a LR schedule) and `pytorch_lightning` at module level
      for their training wrappers only. We register stub modules for both
      (the LightningModule stub is torch.nn.Module, with a no-op
      save_hyperparameters for RAT.__init__) before importing them; the
      attention, layer, encoder classes and RAT's forward and loss
      (`_calculate_loss`) use neither.
  FloydNet: none; their src/ goes first on sys.path and their floydnet
      package is imported as it is.
  G2G: their modules import old `transformers` (2.x: modeling_bert, ...),
      `pytorch_pretrained_bert`, allennlp and, in statetr/file_utils.py,
      boto3 / requests, for BERT pretrained-model loading and training only.
      We register stub modules for those names (placeholders that raise if
      called; `PreTrainedModel` = torch.nn.Module, `add_start_docstrings` a
      no-op decorator; senttr's parser.utils.base / .scalar_mix and
      statetr's file_utils stubbed; bare `parser` / `parser.utils` packages
      with __path__ into the checkout so their __init__.py files, which
      import the data pipeline, are not run) and load graph.py, parser.py,
      statetr/utils.py and statetr/model.py from the checkout unchanged.
"""

import argparse
import datetime
import fnmatch
import functools
import importlib
import json
import os
import pathlib
import re
import subprocess
import sys
import types

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
GOLDEN_DIR = REPO / "tests" / "fidelity" / "goldens"
README_JSON = GOLDEN_DIR / "README.json"
RT_URL = "https://github.com/CameronDiao/relational-transformer"
ET_URL = "https://github.com/bergen/EdgeTransformer"
CS_URL = "https://github.com/RobertCsordas/transformer_generalization"
FLOYD_URL = "https://github.com/ocx-lab/FloydNet"
G2G_URL = "https://github.com/alirezamshi-zz/G2GTr"
MAX_BYTES = 200_000
# --cases: fnmatch patterns of the goldens to write and record (None: all).
CASE_PATTERNS = None


def _selected(name):
  return CASE_PATTERNS is None or any(
      fnmatch.fnmatchcase(name, pattern) for pattern in CASE_PATTERNS
  )


FETCH_HELP = f"""\
Nothing to do: pass --rt_reference=DIR and/or --et_reference=DIR (or --record).
Fetch the references first, e.g.
  git clone {RT_URL} /tmp/peers/rt
  git clone {ET_URL} /tmp/peers/et
  python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch numpy
then
  python scripts/make_peer_goldens.py --rt_reference=/tmp/peers/rt
  /tmp/torchvenv/bin/python scripts/make_peer_goldens.py --et_reference=/tmp/peers/et
  python scripts/make_peer_goldens.py --record
"""


# ----------------------------------------------------------------------------
# Shared helpers (numpy only).
# ----------------------------------------------------------------------------


def _git_commit(path):
  try:
    return subprocess.run(
        ["git", "-C", str(path), "rev-parse", "HEAD"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    return None


def _commit_of(reference, commit_flag):
  commit = commit_flag or _git_commit(reference)
  if not commit:
    raise SystemExit(
        f"Cannot tell the commit of {reference} (not a git work tree): pass "
        "--commit=<40-hex hash of the checkout>."
    )
  return commit


def _randomise_torch(torch, rng, module):
  """Sets every parameter of the torch `module` to `_random_like` values;
  returns them by their state-dict names."""
  params = {}
  with torch.no_grad():
    for name, p in module.named_parameters():
      value = _random_like(rng, name, tuple(p.shape))
      p.copy_(torch.from_numpy(value))
      params[name] = value
  return params


def _random_like(rng, name, shape):
  """Seeded random parameter values (not the authors' init: every weight,
  bias and LayerNorm scale/offset is non-trivial, so a wrong mapping fails)."""
  lname = name.lower()
  # LayerNorms: haiku '.../layer_norm_2/scale|offset', torch '...norm1.weight|bias'.
  if "layer_norm" in lname or re.search(r"(^|\.)norm\d*\.", lname):
    if lname.endswith(("/scale", ".weight")):
      return (1.0 + 0.2 * rng.standard_normal(shape)).astype(np.float32)
    return (0.2 * rng.standard_normal(shape)).astype(np.float32)
  if len(shape) == 1:  # biases
    return (0.2 * rng.standard_normal(shape)).astype(np.float32)
  if "embedding" in lname:
    return rng.standard_normal(shape).astype(np.float32)
  fan_in = (
      shape[0] if "/" in name else shape[-1]
  )  # haiku (in, out); torch (out, in)
  return (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)


def _save(name, meta, inputs, params, outputs):
  if not _selected(name):
    print(f"skipped {name} (not in --cases)")
    return None
  GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
  arrays = {"meta": np.array(json.dumps(meta, sort_keys=True))}
  for prefix, group in (
      ("input", inputs),
      ("param", params),
      ("output", outputs),
  ):
    for key, value in group.items():
      value = np.asarray(value)
      if value.dtype == np.float64:
        value = value.astype(np.float32)
      arrays[f"{prefix}/{key}"] = value
  path = GOLDEN_DIR / f"{name}.npz"
  np.savez_compressed(path, **arrays)
  size = path.stat().st_size
  if size > MAX_BYTES:
    raise SystemExit(
        f"{path} is {size} bytes (> {MAX_BYTES}); shrink the case."
    )
  print(f"wrote {path.relative_to(REPO)} ({size} bytes)")
  return path


def _update_readme(side, url, commit, cases, shims):
  cases = {case: info for case, info in cases.items() if _selected(case)}
  if not cases:
    return
  readme = json.loads(README_JSON.read_text()) if README_JSON.exists() else {}
  readme.setdefault(
      "about",
      (
          "Goldens of the authors' own code for"
          " tests/fidelity/test_peer_goldens.py, written by"
          " scripts/make_peer_goldens.py. max_abs_diff: ours vs theirs, fp32,"
          " as measured by `make_peer_goldens.py --record`."
      ),
  )
  readme.setdefault("references", {})[side] = {
      "repository": url,
      "commit": commit,
      "shims": shims,
      "generated": (
          datetime.datetime.now(datetime.timezone.utc).isoformat(
              timespec="seconds"
          )
      ),
  }
  golden = readme.setdefault("goldens", {})
  for case, info in cases.items():
    golden[case] = {**golden.get(case, {}), **info, "reference": side}
  README_JSON.write_text(json.dumps(readme, indent=2, sort_keys=True) + "\n")


# ----------------------------------------------------------------------------
# RT: the RT authors' Haiku code (main python).
# ----------------------------------------------------------------------------

RT_SHIM = (
    "bare package objects clrs, clrs._src, clrs._src.base_modules with "
    "__path__ into the checkout (their clrs/__init__.py is not run)"
)


def _import_rt(reference):
  root = pathlib.Path(reference).resolve()
  source = root / "clrs" / "_src" / "processors.py"
  if not source.exists():
    raise SystemExit(
        f"{source} not found: is --rt_reference a checkout of {RT_URL}?"
    )
  if "clrs" in sys.modules:
    raise SystemExit(
        "the installed clrs is already imported; run this side alone."
    )
  for name, path in (
      ("clrs", root / "clrs"),
      ("clrs._src", root / "clrs" / "_src"),
      ("clrs._src.base_modules", root / "clrs" / "_src" / "base_modules"),
  ):
    package = types.ModuleType(name)
    package.__path__ = [str(path)]
    sys.modules[name] = package
  processors = importlib.import_module("clrs._src.processors")
  layers = importlib.import_module(
      "clrs._src.base_modules.Basic_Transformer_jax"
  )
  return processors, layers


def make_rt(reference, commit):
  os.environ.setdefault("JAX_PLATFORMS", "cpu")
  processors, layers = _import_rt(reference)
  import haiku as hk  # pylint: disable=g-import-not-at-top
  import jax  # pylint: disable=g-import-not-at-top

  rng = np.random.default_rng(20240601)
  b, n, heads, d, e = 2, 5, 3, 12, 8  # D = 3 heads x 4; edge width 8
  node_hid, edge_hid1, edge_hid2 = 7, 6, 5
  sizes = dict(
      batch=b,
      nodes=n,
      heads=heads,
      node_width=d,
      node_hidden=node_hid,
      edge_hidden1=edge_hid1,
      edge_hidden2=edge_hid2,
      dropout_rate=0.0,
  )

  def randomise(params):
    flat = {}
    for module, group in sorted(params.items()):
      for key, value in sorted(group.items()):
        name = f"{module}/{key}"
        flat[name] = _random_like(rng, name, value.shape)
    nested = {}
    for name, value in flat.items():
      module, key = name.rsplit("/", 1)
      nested.setdefault(module, {})[key] = value
    return flat, nested

  def run(fn, inputs, order):
    transformed = hk.transform(fn)
    args = [inputs[k] for k in order]
    init = transformed.init(jax.random.PRNGKey(0), *args)
    flat, nested = randomise(init)
    # Their hk.dropout needs a key; with rate 0.0 it keeps every unit.
    out = transformed.apply(nested, jax.random.PRNGKey(1), *args)
    return flat, out

  cases = {}

  def layer_case(name, disable_edge_updates, num_layers):
    inputs = {
        "nodes": rng.standard_normal((b, n, d)).astype(np.float32),
        "edges": rng.standard_normal((b, n, n, e)).astype(np.float32),
    }

    def fn(nodes, edges):
      # As the loop in their RT.__call__: Basic_RT layers 'rt_layer{l}',
      # (graph and adjacency are unused by 'cat' layers).
      for index in range(num_layers):
        nodes, edges = layers.Basic_RT(
            heads,
            "cat",
            disable_edge_updates,
            d,
            node_hid,
            e,
            edge_hid1,
            edge_hid2,
            0.0,
            name=f"rt_layer{index}",
        )(nodes, edges, None, None, None)
      return nodes, edges

    params, (nodes, edges) = run(fn, inputs, ("nodes", "edges"))
    meta = dict(
        reference="rt",
        repository=RT_URL,
        commit=commit,
        function=(
            "clrs._src.base_modules.Basic_Transformer_jax.Basic_RT"
            " x %d (graph_vec='cat', disable_edge_updates=%s, edge width %d)"
        )
        % (num_layers, disable_edge_updates, e),
        sizes={
            **sizes,
            "edge_width": e,
            "num_layers": num_layers,
            "disable_edge_updates": disable_edge_updates,
        },
        layer_norm_epsilon=1e-5,
        shim=RT_SHIM,
    )
    _save(name, meta, inputs, params, {"nodes": nodes, "edges": edges})
    cases[name] = {"function": meta["function"]}

  layer_case("rt_layer", False, 1)
  layer_case("rt_layer_no_edge_update", True, 1)
  layer_case("rt_stack", False, 2)

  for graph_vec in ("cat", "core"):
    name = f"rt_processor_{graph_vec}"
    inputs = {
        "node_fts": rng.standard_normal((b, n, 3)).astype(np.float32),
        "edge_fts": rng.standard_normal((b, n, n, 2)).astype(np.float32),
        "graph_fts": rng.standard_normal((b, 4)).astype(np.float32),
        "adj_mat": (rng.random((b, n, n)) < 0.5).astype(np.float32),
        "hidden": rng.standard_normal((b, n, d)).astype(np.float32),
        "e_hidden": rng.standard_normal((b, n, n, d)).astype(np.float32),
        "g_hidden": rng.standard_normal((b, d)).astype(np.float32),
    }

    def fn(
        node_fts,
        edge_fts,
        graph_fts,
        adj_mat,
        hidden,
        e_hidden,
        g_hidden,
        graph_vec=graph_vec,
    ):
      processor = processors.RT(
          nb_layers=2,
          nb_heads=heads,
          vec_size=d,
          node_hid_size=node_hid,
          edge_hid_size_1=edge_hid1,
          edge_hid_size_2=edge_hid2,
          graph_vec=graph_vec,
          disable_edge_updates=False,
          name="rt",
      )
      return processor(
          node_fts,
          edge_fts,
          graph_fts,
          adj_mat,
          hidden,
          e_hidden=e_hidden,
          g_hidden=g_hidden,
      )

    params, (nodes, edges, graph) = run(
        fn,
        inputs,
        (
            "node_fts",
            "edge_fts",
            "graph_fts",
            "adj_mat",
            "hidden",
            "e_hidden",
            "g_hidden",
        ),
    )
    outputs = {"nodes": nodes, "edges": edges}
    if graph is not None:
      outputs["graph"] = graph
    meta = dict(
        reference="rt",
        repository=RT_URL,
        commit=commit,
        function=(
            "clrs._src.processors.RT(nb_layers=2, graph_vec="
            f"'{graph_vec}', disable_edge_updates=False)"
        ),
        sizes={**sizes, "num_layers": 2, "graph_vec": graph_vec},
        layer_norm_epsilon=1e-5,
        shim=RT_SHIM,
    )
    _save(name, meta, inputs, params, outputs)
    cases[name] = {"function": meta["function"]}
  _update_readme("rt", RT_URL, commit, cases, RT_SHIM)


# ----------------------------------------------------------------------------
# RT net: their whole CLRS model (their Python, e.g. /tmp/rtvenv).
# ----------------------------------------------------------------------------

RT_NET_SHIM = (
    "their checkout first on sys.path; their whole clrs package "
    "(with TensorFlow) imported unchanged; jax.random.bernoulli "
    "wrapped to return a fixed teacher-forcing mask for the "
    "(batch,)-shaped draw of the noisy case only"
)
RT_NET_ALGORITHMS = ("binary_search", "bellman_ford")
RT_NET_FORCE_MASK = (False, True)  # noisy case: sample 0 fed back, 1 forced


def make_rt_net(reference, commit):
  """Their BaselineModel (clrs/_src/baselines.py, nets.py) as run.py builds
  it for the clrs_rt comparison (RT processor, graph_vec 'cat', LayerNorm,
  pointers decoded from edges, hints encoded and decoded, no diffs, no LSTM,
  dropout 0), at tiny sizes, on one training batch and one evaluation batch
  drawn by their own samplers (n = 5, batch 2). Outputs: the training loss
  and every parameter's gradient with teacher forcing on (noise 0), the
  evaluation predictions (repred=True: raw output and per-step hint logits),
  and the loss and gradients with noise 0.5 under a fixed force mask
  RT_NET_FORCE_MASK (their `jax.random.bernoulli` draw of shape (batch,)
  replaced; every other draw, i.e. dropout at rate 0, untouched)."""
  os.environ.setdefault("JAX_PLATFORMS", "cpu")
  root = pathlib.Path(reference).resolve()
  if not (root / "clrs" / "_src" / "nets.py").exists():
    raise SystemExit(
        f"{root}/clrs/_src/nets.py not found: is --rt_net_reference "
        f"a checkout of {RT_URL}?"
    )
  sys.path.insert(0, str(root))
  import clrs  # pylint: disable=g-import-not-at-top

  if not pathlib.Path(clrs.__file__).resolve().is_relative_to(root):
    raise SystemExit(
        f"imported clrs from {clrs.__file__}, not {root}: run this "
        "side in their Python (e.g. /tmp/rtvenv/bin/python)."
    )
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  b, n, heads, head_size = 2, 5, 2, 4
  node_hid, edge_hid1, edge_hid2, nb_layers = 7, 6, 5, 2
  sizes = dict(
      batch=b,
      nodes=n,
      nb_heads=heads,
      head_size=head_size,
      hidden_dim=heads * head_size,
      node_hid_size=node_hid,
      edge_hid_size_1=edge_hid1,
      edge_hid_size_2=edge_hid2,
      num_layers=nb_layers,
      graph_vec="cat",
      use_ln=True,
      ptr_from_edges=True,
      disable_edge_updates=False,
      hint_mode="encoded_decoded_nodiff",
      dropout_prob=0.0,
      force_mask=list(RT_NET_FORCE_MASK),
  )
  original_bernoulli = jax.random.bernoulli

  def fixed_mask_bernoulli(key, p=0.5, shape=None):
    if shape is not None and tuple(shape) == (b,):
      return jnp.asarray(RT_NET_FORCE_MASK)
    return original_bernoulli(key, p, shape)

  cases = {}
  for index, algorithm in enumerate(RT_NET_ALGORITHMS):
    rng = np.random.default_rng(20261124 + index)
    samplers, seeds = {}, {}
    for split, seed in (("train", 1), ("eval", 1001)):
      # The first seed whose samples all run >= 3 steps (so noisy teacher
      # forcing acts and hints are fed back at evaluation).
      while True:
        sampler, spec = clrs.build_sampler(
            algorithm, num_samples=b, length=n, seed=seed
        )
        feedback = sampler.next()  # the whole (2-sample) dataset
        if np.min(feedback.features.lengths) >= 3:
          break
        seed += 1
      samplers[split], seeds[split] = feedback, seed
    factory = clrs.get_processor_factory(
        "rt",
        use_ln=True,
        nb_layers=nb_layers,
        nb_heads=heads,
        node_hid_size=node_hid,
        edge_hid_size_1=edge_hid1,
        edge_hid_size_2=edge_hid2,
        graph_vec="cat",
        disable_edge_updates=False,
    )

    def model_with(noise):
      return clrs.models.BaselineModel(
          spec=spec,
          dummy_trajectory=samplers["train"],
          processor_factory=factory,
          hidden_dim=heads * head_size,
          encode_hints=True,
          decode_hints=True,
          decode_diffs=False,
          ptr_from_edges=True,
          use_lstm=False,
          learning_rate=1e-3,
          checkpoint_path="/tmp/unused_rt_net_checkpoints",
          freeze_processor=False,
          dropout_prob=0.0,
          hint_teacher_forcing_noise=noise,
      )

    model = model_with(0.0)
    model.init(samplers["train"].features, 43)
    params, nested = {}, {}
    for module, group in sorted(model.params.items()):
      for key, value in sorted(group.items()):
        name = f"{module}/{key}"
        params[name] = _random_like(rng, name, value.shape)
        nested.setdefault(module, {})[key] = jnp.asarray(params[name])
    key = jax.random.PRNGKey(7)
    train = samplers["train"]
    loss, grads = jax.value_and_grad(model._loss)(nested, key, train, 0)  # pylint: disable=protected-access
    outputs = {"loss": np.float32(loss)}
    for module, group in grads.items():
      for name, value in group.items():
        outputs[f"grad/{module}/{name}"] = np.asarray(value)
    out_preds, hint_preds, _, _ = model.net_fn_apply(
        nested, key, [samplers["eval"].features], repred=True, algorithm_index=0
    )
    for name, value in out_preds.items():
      outputs[f"eval_output/{name}"] = np.asarray(value)
    for name in hint_preds[0]:
      outputs[f"eval_hint/{name}"] = np.stack(
          [np.asarray(step[name]) for step in hint_preds]
      )
    jax.random.bernoulli = fixed_mask_bernoulli
    try:
      noisy = model_with(0.5)
      loss, grads = jax.value_and_grad(noisy._loss)(nested, key, train, 0)  # pylint: disable=protected-access
    finally:
      jax.random.bernoulli = original_bernoulli
    outputs["noisy_loss"] = np.float32(loss)
    for module, group in grads.items():
      for name, value in group.items():
        outputs[f"noisy_grad/{module}/{name}"] = np.asarray(value)

    inputs = {}
    for split, feedback in samplers.items():
      for stage, dps in (
          ("input", feedback.features.inputs),
          ("hint", feedback.features.hints),
          ("output", feedback.outputs),
      ):
        for dp in dps:
          inputs[f"{split}/{stage}/{dp.name}"] = np.asarray(dp.data)
      inputs[f"{split}/lengths"] = np.asarray(feedback.features.lengths)
    name = f"rt_net_{algorithm}"
    meta = dict(
        reference="rt",
        repository=RT_URL,
        commit=commit,
        function=(
            "clrs._src.baselines.BaselineModel (run.py's RT "
            f"settings) on {algorithm}: loss, gradients, predictions"
        ),
        algorithm=algorithm,
        sampler_seeds=seeds,
        spec={k: list(v) for k, v in spec.items()},
        sizes=sizes,
        layer_norm_epsilon=1e-5,
        shim=RT_NET_SHIM,
        versions={
            "jax": jax.__version__,
            "haiku": __import__("haiku").__version__,
        },
    )
    _save(name, meta, inputs, params, outputs)
    cases[name] = {"function": meta["function"]}
  _update_readme("rt_net", RT_URL, commit, cases, RT_NET_SHIM)


# ----------------------------------------------------------------------------
# ET: the ET authors' PyTorch code (numpy + torch only).
# ----------------------------------------------------------------------------

ET_SHIM = (
    "stub modules transformers and pytorch_lightning (LightningModule = "
    "torch.nn.Module) registered before importing cogs/model.py and "
    "clutrr/model.py; used only by their training wrappers"
)
ET_RAT_SHIM = (
    "stub modules transformers and pytorch_lightning (LightningModule = "
    "torch.nn.Module with a no-op save_hyperparameters) registered before "
    "importing clutrr/rat.py; RAT's forward and _calculate_loss use neither"
)
# Their RAT as clutrr/train.py builds it for --model_type=rat (defaults:
# update_relations off, zero_init on), at small sizes: edge_types = 21
# (their embedding has edge_types + 1 = 22 rows, our NUM_EDGE_LABELS) and
# target_size = 21 (our NUM_RELATIONS), so ids need no mapping.
ET_RAT_SIZES = dict(
    batch=3,
    nodes=5,
    lengths=(5, 3, 4),
    width=8,
    heads=2,
    ff_factor=4,
    num_layers=2,
    edge_types=21,
    target_size=21,
)


def _import_et(reference):
  root = pathlib.Path(reference).resolve()
  for sub in ("cogs", "clutrr"):
    if not (root / sub / "model.py").exists():
      raise SystemExit(
          f"{root / sub / 'model.py'} not found: is --et_reference "
          f"a checkout of {ET_URL}?"
      )
  import torch  # pylint: disable=g-import-not-at-top

  def unavailable(*args, **kwargs):
    raise RuntimeError("stub: transformers is not installed")

  transformers = types.ModuleType("transformers")
  transformers.T5EncoderModel = transformers.T5Config = unavailable
  transformers.get_linear_schedule_with_warmup = unavailable
  lightning = types.ModuleType("pytorch_lightning")

  class LightningModule(torch.nn.Module):
    """torch.nn.Module; rat.py's RAT.__init__ calls save_hyperparameters,
    which only records the config in Lightning."""

    def save_hyperparameters(self, *args, **kwargs):
      del args, kwargs

  lightning.LightningModule = LightningModule
  sys.modules.setdefault("transformers", transformers)
  sys.modules.setdefault("pytorch_lightning", lightning)

  def load(sub):
    spec = importlib.util.spec_from_file_location(
        f"et_{sub}_model", root / sub / "model.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

  return torch, load("cogs"), load("clutrr")


def make_et(reference, commit):
  torch, cogs, clutrr = _import_et(reference)
  torch.manual_seed(0)
  torch.set_num_threads(1)
  rng = np.random.default_rng(20240602)
  b, n, d, heads, ff_factor = 2, 5, 8, 2, 4
  dropout = 0.1  # eval() must switch it off
  cases = {}

  randomise = functools.partial(_randomise_torch, torch, rng)

  def cogs_config(**overrides):
    config = dict(
        num_heads=heads,
        dropout=dropout,
        dim=d,
        ff_factor=ff_factor,
        edge_attention_flat=False,
        lesion_scores=False,
        lesion_values=False,
        num_message_rounds=2,
        share_layers=False,
        input_encoding="relational",
    )
    config.update(overrides)
    return config

  def meta_for(function, sizes):
    return _et_meta(commit, function, sizes, ET_SHIM)

  sizes = dict(batch=b, nodes=n, width=d, heads=heads, ff_factor=ff_factor)

  # Triangular attention (cogs EdgeAttention: six biased d x d linears).
  for name, overrides, ablation in (
      ("et_attention", {}, "none"),
      ("et_attention_value_ablation", {"lesion_values": True}, "value"),
      ("et_attention_attention_ablation", {"lesion_scores": True}, "attention"),
  ):
    module = cogs.EdgeAttention(d, heads, dropout, cogs_config(**overrides))
    module.eval()
    params = randomise(module)
    x = rng.standard_normal((b, n, n, d)).astype(np.float32)
    with torch.no_grad():
      t = torch.from_numpy(x)
      out = module(t, t, t, mask=None).numpy()
    meta = meta_for(
        f"cogs/model.py EdgeAttention {overrides or ''}".strip(),
        {**sizes, "ablation": ablation},
    )
    _save(name, meta, {"x": x}, params, {"y": out})
    cases[name] = {"function": meta["function"]}

  # One layer (cogs EdgeTransformerLayer, layernorm_pos='pre').
  module = cogs.EdgeTransformerLayer(cogs_config())
  module.eval()
  assert module.layernorm_pos == "pre"
  params = randomise(module)
  x = rng.standard_normal((b, n, n, d)).astype(np.float32)
  with torch.no_grad():
    out = module(torch.from_numpy(x), mask=None).numpy()
  meta = meta_for(
      "cogs/model.py EdgeTransformerLayer (layernorm_pos='pre')", sizes
  )
  _save("et_layer", meta, {"x": x}, params, {"y": out})
  cases["et_layer"] = {"function": meta["function"]}

  # Untied stack on a sequence (cogs EdgeTransformerEncoder, 'relational'
  # input: x_ii = token embedding, plus relative-position embeddings). N = 19
  # so that offsets beyond +-16 are clipped.
  seq_b, seq_n, vocab = 2, 19, 11
  module = cogs.EdgeTransformerEncoder(cogs_config(), d)
  module.eval()
  params = randomise(module)
  token_table = rng.standard_normal((vocab, d)).astype(np.float32)
  tokens = rng.integers(0, vocab, (seq_b, seq_n)).astype(np.int32)
  with torch.no_grad():
    out = module(torch.from_numpy(token_table[tokens]), None).numpy()
  meta = meta_for(
      "cogs/model.py EdgeTransformerEncoder (input_encoding="
      "'relational', 2 untied layers)",
      {
          **sizes,
          "batch": seq_b,
          "nodes": seq_n,
          "vocab": vocab,
          "num_layers": 2,
          "tied": False,
          "max_relative_distance": module.spatial_relations_builder.max_rel_len,
      },
  )
  _save(
      "et_stack_untied_sequence",
      meta,
      {"tokens": tokens, "token_table": token_table},
      params,
      {"y": out},
  )
  cases["et_stack_untied_sequence"] = {"function": meta["function"]}

  # Tied and untied stacks on a labelled graph with padding (clutrr
  # EdgeTransformerEncoder: label embedding, unbiased EdgeAttention).
  for name, share in (
      ("et_stack_tied_graph", True),
      ("et_stack_untied_graph", False),
  ):
    config = types.SimpleNamespace(
        num_heads=heads,
        dropout=dropout,
        dim=d,
        ff_factor=ff_factor,
        flat_attention=False,
        lesion_scores=False,
        lesion_values=False,
        edge_types=6,
        share_layers=share,
        num_message_rounds=3,
    )
    module = clutrr.EdgeTransformerEncoder(config)
    module.eval()
    params = randomise(module)
    if share:  # only layers.0 is used; drop the unused clones
      params = {
          k: v
          for k, v in params.items()
          if not k.startswith("layers.") or k.startswith("layers.0.")
      }
    labels = rng.integers(0, config.edge_types + 1, (b, n, n)).astype(np.int64)
    lengths = np.array([n, n - 2])
    pad = np.arange(n)[None, :] >= lengths[:, None]  # True = padding
    with torch.no_grad():
      out = module({
          "batched_graphs": torch.from_numpy(labels),
          "masks": torch.from_numpy(pad),
      }).numpy()
    meta = meta_for(
        f"clutrr/model.py EdgeTransformerEncoder (share_layers={share}, "
        "3 message rounds, padding mask)",
        {
            **sizes,
            "num_layers": 3,
            "tied": share,
            "num_labels": config.edge_types + 1,
            "lengths": lengths.tolist(),
        },
    )
    _save(
        name,
        meta,
        {"labels": labels.astype(np.int32), "padding": pad},
        params,
        {"y": out},
    )
    cases[name] = {"function": meta["function"]}
  _update_readme("et", ET_URL, commit, cases, ET_SHIM)


ET_CFQ_SHIM = (
    "stub modules transformers.configuration_utils (PretrainedConfig: keeps"
    " its keyword arguments as attributes), transformers.modeling_outputs"
    " (BaseModelOutput, Seq2SeqLMOutput: plain dataclasses) and"
    " transformers.generation_utils (GenerationMixin: empty) registered"
    " before importing cfq-semantic-parsing/model.py; its forward uses them"
    " only as containers"
)


def make_et_cfq(reference, commit):
  """Their CFQ encoder-decoder (cfq-semantic-parsing/model.py,
  `EdgeTransfomerForConditionalGeneration`, input_encoding='relational',
  decode_from='i_to_i') teacher-forced on a batch with a padded source:
  logits and their loss (mean cross-entropy over labels != -100); tied
  (share_layers=True, their default) and untied. Built with dropout 0.1,
  run in eval(); every parameter, the bos vectors too, random."""
  import dataclasses  # pylint: disable=g-import-not-at-top

  source = pathlib.Path(reference).resolve() / "cfq-semantic-parsing"
  if not (source / "model.py").exists():
    raise SystemExit(
        f"{source / 'model.py'} not found: is --et_reference a checkout of "
        f"{ET_URL}?"
    )
  import torch  # pylint: disable=g-import-not-at-top

  class PretrainedConfig:

    def __init__(self, **kwargs):
      for key, value in kwargs.items():
        setattr(self, key, value)

  @dataclasses.dataclass
  class BaseModelOutput:
    last_hidden_state: object = None

  @dataclasses.dataclass
  class Seq2SeqLMOutput:
    loss: object = None
    logits: object = None
    decoder_hidden_states: object = None

  stubs = {
      "transformers": types.ModuleType("transformers"),
      "transformers.configuration_utils": types.ModuleType("c"),
      "transformers.modeling_outputs": types.ModuleType("m"),
      "transformers.generation_utils": types.ModuleType("g"),
  }
  stubs["transformers.configuration_utils"].PretrainedConfig = PretrainedConfig
  stubs["transformers.modeling_outputs"].BaseModelOutput = BaseModelOutput
  stubs["transformers.modeling_outputs"].Seq2SeqLMOutput = Seq2SeqLMOutput
  stubs["transformers.generation_utils"].GenerationMixin = object
  saved = {name: sys.modules.get(name) for name in stubs}
  sys.modules.update(stubs)
  try:
    spec = importlib.util.spec_from_file_location(
        "et_cfq_model", source / "model.py"
    )
    cfq = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cfq)
  finally:
    for name, module in saved.items():
      if module is None:
        sys.modules.pop(name, None)
      else:
        sys.modules[name] = module
  torch.manual_seed(0)
  torch.set_num_threads(1)
  rng = np.random.default_rng(20261129)
  sizes = dict(
      batch=2, src_len=5, tgt_len=4, width=8, heads=2, expand_ff=2,
      num_layers=2, vocab=11, max_rel_len=32, pad=0, start=1,
  )  # fmt: skip
  dropout = 0.1  # eval() must switch it off
  b, v = sizes["batch"], sizes["vocab"]
  src = rng.integers(2, v, (b, sizes["src_len"]))
  attention_mask = np.ones_like(src)
  attention_mask[1, 3:] = 0  # Row 1: two padded source tokens.
  src[attention_mask == 0] = sizes["pad"]
  labels = rng.integers(2, v, (b, sizes["tgt_len"]))
  labels[0, -1] = -100  # Ignored by their loss (and shifted in as pad).
  inputs = {
      "src": src.astype(np.int32),
      "attention_mask": attention_mask.astype(np.int32),
      "labels": labels.astype(np.int32),
  }
  cases = {}
  for name, share in (
      ("et_cfq_seq2seq", True),
      ("et_cfq_seq2seq_untied", False),
  ):
    config = cfq.EdgeConfig(
        vocab_size=v,
        dim=sizes["width"],
        expand_ff=sizes["expand_ff"],
        num_heads=sizes["heads"],
        num_message_rounds=sizes["num_layers"],
        share_layers=share,
        dropout=dropout,
        pad_token_id=sizes["pad"],
        decoder_start_token_id=sizes["start"],
    )
    model = cfq.EdgeTransfomerForConditionalGeneration(config)
    model.eval()
    params = _randomise_torch(torch, rng, model)
    with torch.no_grad():
      out = model(
          torch.from_numpy(attention_mask).long(),
          input_ids=torch.from_numpy(src).long(),
          labels=torch.from_numpy(labels).long(),
      )
    meta = _et_meta(
        commit,
        "cfq-semantic-parsing/model.py "
        "EdgeTransfomerForConditionalGeneration.forward (teacher forcing, "
        f"share_layers={share}, {sizes['num_layers']} message rounds, "
        "input_encoding='relational', decode_from='i_to_i', padded source)",
        {**sizes, "tied": share},
        ET_CFQ_SHIM,
    )
    _save(
        name,
        meta,
        inputs,
        params,
        {"logits": out.logits.numpy(), "loss": out.loss.numpy()},
    )
    cases[name] = {"function": meta["function"]}
  _update_readme("et", ET_URL, commit, cases, f"{ET_SHIM}; {ET_CFQ_SHIM}")


def _clutrr_batch(torch, rng, sizes):
  """A padded CLUTRR batch of `sizes` as their collate builds it: (our
  inputs, their batch dict)."""
  b, n = sizes["batch"], sizes["nodes"]
  lengths = np.array(sizes["lengths"])
  padding = np.arange(n)[None, :] >= lengths[:, None]  # their masks
  # Fact labels 1..edge_types on about half the real pairs, 0 (their "no
  # edge") elsewhere and on padding, as their collate builds them.
  labels = rng.integers(1, sizes["edge_types"] + 1, (b, n, n))
  labels[rng.random((b, n, n)) < 0.5] = 0
  labels[padding[:, :, None] | padding[:, None, :]] = 0
  query = np.stack(
      [rng.choice(m, size=2, replace=False) for m in lengths]
  ).astype(np.int64)
  targets = rng.integers(0, sizes["target_size"], (b,))
  inputs = {
      "labels": labels.astype(np.int32),
      "padding_mask": padding,  # True = padded node (their `masks`)
      "query": query.astype(np.int32),
      "query_labels": targets.astype(np.int32),
  }
  batch = {
      "batched_graphs": torch.from_numpy(labels).long(),
      "masks": torch.from_numpy(padding),
      "query_edges": torch.cat(
          (torch.arange(b)[:, None], torch.from_numpy(query)), dim=1
      ),
      "query_labels": torch.from_numpy(targets).long(),
  }
  return inputs, batch


def _loss_and_grads(model, batch):
  """Their `_calculate_loss(batch)` and its backward: ({'loss', 'logits',
  'grad/<parameter>'...}, the parameters that get no gradient); 'logits'
  as their model returns it."""
  loss, logits = model._calculate_loss(batch)  # pylint: disable=protected-access
  loss.backward()
  outputs, no_grad = {"loss": loss.detach().numpy(), "logits": logits}, []
  for pname, p in model.named_parameters():
    if p.grad is None:
      no_grad.append(pname)
    else:
      outputs[f"grad/{pname}"] = p.grad.numpy()
  return outputs, no_grad


def _et_meta(commit, function, sizes, shim, **extra):
  """The meta of an ET golden: their module built with dropout 0.1, run in
  eval(); `extra` (e.g. no_grad) added."""
  return dict(
      reference="et",
      repository=ET_URL,
      commit=commit,
      function=function,
      sizes=sizes,
      eval_mode=True,
      config_dropout=0.1,
      layer_norm_epsilon=1e-5,
      shim=shim,
      **extra,
  )


def make_et_rat(reference, commit):
  """Their CLUTRR RAT (clutrr/rat.py) on a padded batch: logits, their loss
  (`RAT._calculate_loss`: CrossEntropyLoss, mean) and the gradient of that
  loss for every parameter that gets one (those read only with
  update_relations, and share_layers' unused clones, get none); tied
  (share_layers=True, their default) and untied. Built with dropout 0.1,
  run in eval()."""
  torch, _, _ = _import_et(reference)
  source = pathlib.Path(reference).resolve() / "clutrr" / "rat.py"
  if not source.exists():
    raise SystemExit(
        f"{source} not found: is --et_reference a checkout of {ET_URL}?"
    )
  spec = importlib.util.spec_from_file_location("et_clutrr_rat", source)
  rat = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(rat)
  torch.manual_seed(0)
  torch.set_num_threads(1)
  rng = np.random.default_rng(20260413)
  sizes = ET_RAT_SIZES
  d = sizes["width"]
  dropout = 0.1  # eval() must switch it off
  inputs, batch = _clutrr_batch(torch, rng, sizes)
  cases = {}
  for name, share in (("rat_clutrr", True), ("rat_clutrr_untied", False)):
    config = types.SimpleNamespace(
        update_relations=False,  # train.py default: the plain RAT
        zero_init=True,  # train.py default: nodes start at zero
        num_heads=sizes["heads"],
        dropout=dropout,
        dim=d,
        ff_factor=sizes["ff_factor"],
        edge_types=sizes["edge_types"],
        share_layers=share,
        num_message_rounds=sizes["num_layers"],
        target_size=sizes["target_size"],
    )
    model = rat.RAT(config)
    model.eval()
    params = _randomise_torch(torch, rng, model)
    outputs, no_grad = _loss_and_grads(model, batch)
    outputs["logits"] = outputs["logits"].detach().numpy()
    function = (
        f"clutrr/rat.py RAT._calculate_loss (share_layers={share}, "
        f"{sizes['num_layers']} message rounds, update_relations=False, "
        "zero_init=True, padded batch)"
    )
    meta = _et_meta(
        commit, function, {**sizes, "tied": share}, ET_RAT_SHIM, no_grad=no_grad
    )
    _save(name, meta, inputs, params, outputs)
    cases[name] = {"function": function}
  _update_readme("et_rat", ET_URL, commit, cases, ET_RAT_SHIM)


def make_et_clutrr(reference, commit):
  """Their whole CLUTRR Edge Transformer (clutrr/model.py `EdgeTransformer`,
  as clutrr/train.py builds it: the encoder, then decoder2vocab on x^L of
  each query edge) on the padded batch of the RAT goldens' sizes: logits,
  their loss (`_calculate_loss`: CrossEntropyLoss, mean) and every
  parameter's gradient (share_layers' unused clones get none). Tied
  (share_layers=True, their CLUTRR default), built with dropout 0.1, run in
  eval()."""
  torch, _, clutrr = _import_et(reference)
  torch.manual_seed(0)
  torch.set_num_threads(1)
  rng = np.random.default_rng(20261129)
  sizes = ET_RAT_SIZES
  dropout = 0.1  # eval() must switch it off
  inputs, batch = _clutrr_batch(torch, rng, sizes)
  config = types.SimpleNamespace(
      num_heads=sizes["heads"],
      dropout=dropout,
      dim=sizes["width"],
      ff_factor=sizes["ff_factor"],
      edge_types=sizes["edge_types"],
      share_layers=True,
      num_message_rounds=sizes["num_layers"],
      target_size=sizes["target_size"],
      flat_attention=False,  # train.py defaults: the paper's attention
      lesion_scores=False,
      lesion_values=False,
  )
  model = clutrr.EdgeTransformer(config)
  model.eval()
  params = _randomise_torch(torch, rng, model)
  outputs, no_grad = _loss_and_grads(model, batch)
  outputs["logits"] = outputs["logits"].detach().numpy()
  function = (
      "clutrr/model.py EdgeTransformer._calculate_loss (share_layers=True, "
      f"{sizes['num_layers']} message rounds, padded batch)"
  )
  meta = _et_meta(
      commit, function, {**sizes, "tied": True}, ET_SHIM, no_grad=no_grad
  )
  _save("et_clutrr", meta, inputs, params, outputs)
  _update_readme(
      "et_clutrr",
      ET_URL,
      commit,
      {"et_clutrr": {"function": function}},
      ET_SHIM,
  )


# Their COGS parser at small sizes: 2 untied layers (their encoder applies
# every clone; share_layers is read only by their Lightning hook
# on_post_move_to_device, for TPU weight tying), sentences of 6 and 4 tokens
# (ids >= 2; 1 is their padding_idx) and label vocabularies of 5, 4, 3 and 6
# (0 = their ignored padding label).
ET_COGS_SIZES = dict(
    batch=2,
    nodes=6,
    lengths=(6, 4),
    width=8,
    heads=2,
    ff_factor=4,
    num_layers=2,
    vocab=11,
    label_sizes=(5, 4, 3, 6),
)


def make_et_cogs(reference, commit):
  """Their whole COGS parser (cogs/model.py `Parser`, model_type=
  'edge_transformer', input_encoding='relational') on a padded batch: the
  parent scores (their -1e3 on pairs with a padded node), the four label
  heads' logits (padded tokens' rows zeroed: their padded rows are not ours
  by design, and neither loss reads them), their loss (`_calculate_loss`:
  the five cross-entropies, each a mean over its unignored targets, summed)
  and every parameter's gradient. Built with dropout 0.1, run in eval()."""
  torch, cogs, _ = _import_et(reference)
  torch.manual_seed(0)
  torch.set_num_threads(1)
  rng = np.random.default_rng(20261130)
  sizes = ET_COGS_SIZES
  b, n = sizes["batch"], sizes["nodes"]
  lengths = np.array(sizes["lengths"])
  padding = np.arange(n)[None, :] >= lengths[:, None]  # their `mask`
  tokens = rng.integers(2, sizes["vocab"], (b, n))
  tokens[padding] = 1  # their word_emb's padding_idx
  parent = np.stack([rng.integers(0, m, n) for m in lengths])
  parent[padding] = 99999  # their parent_pad_index
  labels = [rng.integers(1, size, (b, n)) for size in sizes["label_sizes"]]
  for label in labels:
    label[padding] = 0  # their pad_index
  fields = ("role", "category", "noun_type", "verb")  # their batch keys
  heads = ("role", "category", "noun_type", "verb_name")  # our LABEL_FIELDS
  args = types.SimpleNamespace(
      model_type="edge_transformer",
      token_vocab_size=sizes["vocab"],
      dim=sizes["width"],
      num_heads=sizes["heads"],
      dropout=0.1,  # eval() must switch it off
      ff_factor=sizes["ff_factor"],
      edge_attention_flat=False,
      lesion_scores=False,
      lesion_values=False,
      num_message_rounds=sizes["num_layers"],
      share_layers=False,
      input_encoding="relational",
      **{
          f"{name}_vocab_size": size
          for name, size in zip(
              heads,
              sizes["label_sizes"],
          )
      },
  )
  model = cogs.Parser(args)
  model.eval()
  params = _randomise_torch(torch, rng, model)
  batch = {
      "tokens": torch.from_numpy(tokens).long(),
      "parent": torch.from_numpy(parent).long(),
      "mask": torch.from_numpy(padding),
      **{f: torch.from_numpy(v).long() for f, v in zip(fields, labels)},
  }
  outputs, no_grad = _loss_and_grads(model, batch)
  logits = outputs.pop("logits")
  real = (~padding)[:, :, None]
  outputs["parent"] = logits[0].detach().numpy()
  for name, value in zip(heads, logits[1:]):
    outputs[name] = value.detach().numpy() * real
  inputs = {
      "tokens": tokens.astype(np.int32),
      "padding_mask": padding,
      "parent": parent.astype(np.int32),
      **{name: v.astype(np.int32) for name, v in zip(heads, labels)},
  }
  function = (
      "cogs/model.py Parser._calculate_loss (model_type='edge_transformer', "
      f"input_encoding='relational', {sizes['num_layers']} untied layers, "
      "padded batch)"
  )
  max_distance = model.encoder.spatial_relations_builder.max_rel_len
  sizes = {**sizes, "tied": False, "max_relative_distance": max_distance}
  meta = _et_meta(commit, function, sizes, ET_SHIM, no_grad=no_grad)
  _save("et_cogs_parser", meta, inputs, params, outputs)
  _update_readme(
      "et_cogs",
      ET_URL,
      commit,
      {"et_cogs_parser": {"function": function}},
      ET_SHIM,
  )


# ----------------------------------------------------------------------------
# CS: Csordas et al.'s PyTorch seq2seq Transformer (python with torch).
# ----------------------------------------------------------------------------

CS_SHIM = (
    "their repository root on sys.path; their `models` and `layers` "
    "packages imported unchanged"
)


def _import_cs(reference):
  root = pathlib.Path(reference).resolve()
  if not (root / "models" / "transformer_enc_dec.py").exists():
    raise SystemExit(
        f"{root / 'models' / 'transformer_enc_dec.py'} not found: "
        f"is --cs_reference a checkout of {CS_URL}?"
    )
  sys.path.insert(0, str(root))
  import torch  # pylint: disable=g-import-not-at-top
  from layers import transformer as layers  # pylint: disable=g-import-not-at-top
  from models import encoder_decoder, transformer_enc_dec  # pylint: disable=g-import-not-at-top

  return torch, layers, transformer_enc_dec, encoder_decoder


def make_cs(reference, commit):
  """Their TransformerEncDecModel as their `transformer_mixin` builds it for
  the relative variants (no input positional encoding, Xavier embeddings)
  and the absolute ones (their sinusoidal encoding; scale_mode 'none',
  'down' (PED) and 'opennmt' (TEU)), driven as their TransformerEncDecInterface drives it: EOS appended to the
  source (`add_eos`), the model prepends the encoder SOS and feeds the
  decoder [SOS/EOS, y...]. Outputs: teacher-forced logits and greedy
  tokens (eval mode)."""
  torch, layers, enc_dec, encoder_decoder = _import_cs(reference)
  torch.manual_seed(0)
  torch.set_num_threads(1)
  rng = np.random.default_rng(20261124)
  b, d, heads, ff_mult, n_layers = 2, 16, 2, 2.0, 2
  n_in, n_out = 6, 4  # words; their tables: n_in + 2 and n_out + 1 rows
  dropout = 0.3  # eval() must switch it off
  cases = {}
  relative_args = dict(
      pos_embeddig=(lambda x, offset: x), embedding_init="xavier"
  )
  # (name, variant, tied_embedding, their transformer_mixin args, our
  # positions and scaling): the relative variants, the three absolute ones
  # of their `trafos` table ('noscale', 'scaledinit', 'opennmt') and
  # 'universal_scaledinit'. New cases go last: each draws from `rng`.
  for name, variant, tied_embedding, args, positions, scaling in (
      (
          "cs_relative_universal",
          layers.UniversalRelativeTransformer,
          True,
          relative_args,
          "relative",
          "none",
      ),
      (
          "cs_relative",
          layers.RelativeTransformer,
          False,
          relative_args,
          "relative",
          "none",
      ),
      ("cs_absolute", layers.Transformer, False, {}, "absolute", "none"),
      (
          "cs_absolute_ped",
          layers.Transformer,
          False,
          dict(embedding_init="kaiming", scale_mode="down"),
          "absolute",
          "ped",
      ),
      (
          "cs_absolute_teu",
          layers.Transformer,
          False,
          dict(embedding_init="xavier", scale_mode="opennmt"),
          "absolute",
          "teu",
      ),
      # The model of Table 7's PED row (`universal_scaledinit` with the
      # trafo_scan profile's tied embedding): scan_cutoff26_absolute_universal.
      (
          "cs_universal_ped",
          layers.UniversalTransformer,
          True,
          dict(embedding_init="kaiming", scale_mode="down"),
          "absolute",
          "ped",
      ),
  ):
    model = enc_dec.TransformerEncDecModel(
        n_in,
        n_out,
        d,
        ff_multiplier=ff_mult,
        transformer=variant,
        tied_embedding=tied_embedding,
        nhead=heads,
        num_encoder_layers=n_layers,
        num_decoder_layers=n_layers,
        dropout=dropout,
        **args,
    )
    model.eval()
    params = _randomise_torch(torch, rng, model)
    src_len = np.array([5, 3])
    tgt_len = np.array([4, 2])
    src = rng.integers(0, n_in, (b, src_len.max())).astype(np.int64)
    tgt = rng.integers(0, n_out, (b, tgt_len.max())).astype(np.int64)
    for row in range(b):
      src[row, src_len[row] :] = 0
      tgt[row, tgt_len[row] :] = 0
    # As their interface: time-major add_eos, lengths + 1.
    src_eos = encoder_decoder.add_eos(
        torch.from_numpy(src.T.copy()),
        torch.from_numpy(src_len),
        model.encoder_eos,
    ).T.contiguous()
    tgt_eos = encoder_decoder.add_eos(
        torch.from_numpy(tgt.T.copy()),
        torch.from_numpy(tgt_len),
        model.decoder_sos_eos,
    ).T.contiguous()
    with torch.no_grad():
      forced = model(
          src_eos,
          torch.from_numpy(src_len + 1),
          tgt_eos,
          torch.from_numpy(tgt_len + 1),
          teacher_forcing=True,
      )
      greedy_len = int(tgt_len.max() + 3)
      greedy = model(
          src_eos,
          torch.from_numpy(src_len + 1),
          tgt_eos,
          torch.from_numpy(tgt_len + 1),
          teacher_forcing=False,
          max_len=greedy_len,
      )
    meta = dict(
        reference="cs",
        repository=CS_URL,
        commit=commit,
        function=(
            "models/transformer_enc_dec.py TransformerEncDecModel "
            f"({variant.__name__}, tied_embedding={tied_embedding}, "
            f"{positions}-variant args of tasks/transformer_mixin.py"
            + (
                ""
                if args is relative_args
                else f": {dict(sorted(args.items())) or 'none'}"
            )
            + "), inputs as interfaces/transformer/encoder_decoder_interface.py"
        ),
        sizes=dict(
            batch=b,
            width=d,
            heads=heads,
            ffn=int(ff_mult * d),
            num_layers=n_layers,
            universal=variant.__name__.startswith("Universal"),
            tied_embedding=tied_embedding,
            positions=positions,
            scaling=scaling,
            src_rows=n_in + 2,
            tgt_rows=n_out + 1,
            encoder_eos=model.encoder_eos,
            encoder_sos=model.encoder_sos,
            decoder_sos_eos=model.decoder_sos_eos,
            greedy_len=greedy_len,
        ),
        eval_mode=True,
        config_dropout=dropout,
        layer_norm_epsilon=1e-5,
        shim=CS_SHIM,
    )
    _save(
        name,
        meta,
        {
            "src_eos": src_eos.numpy().astype(np.int32),
            "src_len": src_len.astype(np.int32),
            "tgt_eos": tgt_eos.numpy().astype(np.int32),
            "tgt_len": tgt_len.astype(np.int32),
        },
        params,
        {
            "logits": forced.data.numpy(),
            "greedy_logits": greedy.data.numpy(),
            "greedy_tokens": greedy.data.argmax(-1).numpy().astype(np.int32),
            "greedy_len": greedy.length.numpy().astype(np.int32),
        },
    )
    cases[name] = {"function": meta["function"]}
  _cs_init_stats(torch, layers, enc_dec, commit)
  _update_readme("cs", CS_URL, commit, cases, CS_SHIM)


def _cs_init_stats(torch, layers, enc_dec, commit):
  """Their initialisation at the SCAN length-cutoff size (trafo_scan profile:
  d 128, 8 heads, FFN 256, Universal, tied embedding; SCAN's 13 input and 6
  output words), for both cutoff-26 models: per parameter its shape and the
  mean, standard deviation and max |value| over 5 seeds of their
  `reset_parameters`, into goldens/cs_init_scan.json (their
  'relative_universal') and goldens/cs_init_scan_universal_ped.json
  ('universal_scaledinit': absolute positions, PED, Kaiming-normal
  embeddings)."""
  # (file, variant, their transformer_mixin args, our config beyond the
  # shared sizes; the relative file predates those keys: relative, ped).
  for file_name, variant, args, ours in (
      (
          "cs_init_scan.json",
          layers.UniversalRelativeTransformer,
          dict(pos_embeddig=(lambda x, offset: x), embedding_init="xavier"),
          {},
      ),
      (
          "cs_init_scan_universal_ped.json",
          layers.UniversalTransformer,
          dict(embedding_init="kaiming", scale_mode="down"),
          dict(positions="absolute", scaling="ped", embedding_init="kaiming"),
      ),
  ):
    stats = {}
    for seed in range(5):
      torch.manual_seed(seed)
      model = enc_dec.TransformerEncDecModel(
          13,
          6,
          128,
          ff_multiplier=2.0,
          transformer=variant,
          tied_embedding=True,
          nhead=8,
          num_encoder_layers=3,
          num_decoder_layers=3,
          dropout=0.5,
          **args,
      )
      for pname, p in model.named_parameters():
        v = p.detach().double()
        entry = stats.setdefault(
            pname,
            {"shape": list(p.shape), "mean": [], "std": [], "absmax": []},
        )
        entry["mean"].append(float(v.mean()))
        entry["std"].append(float(v.std(unbiased=False)))
        entry["absmax"].append(float(v.abs().max()))
    sizes = {
        "src_words": 13,
        "tgt_words": 6,
        "width": 128,
        "heads": 8,
        "ffn": 256,
        "layers": 3,
        "universal": True,
        "tied_embedding": True,
        **ours,
    }
    args_text = (
        f"absolute-variant args {dict(sorted(args.items()))}"
        if ours
        else "the relative-variant args"
    )
    out = {
        "about": (
            "Initial parameters of their TransformerEncDecModel "
            f"({variant.__name__}, {args_text} of "
            "tasks/transformer_mixin.py) at the SCAN trafo_scan size, "
            "5 seeds; written by scripts/make_peer_goldens.py "
            "--cs_reference"
        ),
        "repository": CS_URL,
        "commit": commit,
        "sizes": sizes,
        "parameters": stats,
    }
    path = GOLDEN_DIR / file_name
    path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {path.relative_to(REPO)}")


# ----------------------------------------------------------------------------
# FloydNet: the FloydNet authors' PyTorch code (numpy + torch only).
# ----------------------------------------------------------------------------

FLOYD_SHIM = (
    "their src/ directory first on sys.path; their floydnet package "
    "imported unchanged"
)
# Their functional form: (name, sizes (B, H, I, K, J, D), mask, options).
# mask: None; 'bool' (B, H, I, K, J), True = masked, one row wholly masked;
# 'additive' (B, 1, I, 1, J) (its gradient is compared too).
FLOYD_FN_CASES = (
    ("pivotal_fn", (2, 2, 5, 5, 5, 4), None, {}),
    (
        "pivotal_fn_bool_mask_cap",
        (2, 2, 5, 5, 5, 4),
        "bool",
        {"softmax_cap": 2.0},
    ),
    (
        "pivotal_fn_additive_mask_scale",
        (2, 2, 5, 5, 5, 4),
        "additive",
        {"scale": 0.3},
    ),
    ("pivotal_fn_rectangular", (1, 2, 3, 4, 5, 4), "bool", {}),
)
# Their block, eval() (built with dropout 0.1): (name, kwargs, padded).
# padded: the second graph has 3 of 5 real nodes, masked as their FloydNet
# model does (attn_mask = ~pair_mask[:, None, :, None, :]).
FLOYD_BLOCK_CASES = (
    ("pivotal_block_pre", {}, True),
    (
        "pivotal_block_post_rmsnorm_bias_gelu",
        dict(
            norm_position="post",
            norm_fn="rmsnorm",
            bias=True,
            activation_fn="gelu",
            ffn_expansion_ratio=2,
        ),
        False,
    ),
    (
        "pivotal_block_pre_affine_silu_no_mix",
        dict(
            norm_fn="affine",
            activation_fn="silu",
            enable_symmetric_mix=False,
            bias=True,
            ffn_expansion_ratio=3,
        ),
        True,
    ),
    (
        "pivotal_block_post_none_no_ffn",
        dict(norm_position="post", norm_fn="none", enable_ffn=False),
        False,
    ),
)
FLOYD_BLOCK_SIZES = dict(batch=2, nodes=5, width=8, heads=2)
# Their example model (example/common/model.py FloydNet: adjacency
# embedding, `depth` blocks with the state zeroed off the pair mask after
# each, graph / node / edge linear heads), eval() with their ModelConfig's
# block choices (affine norm, silu); the second graph has 3 of 5 real nodes.
FLOYD_MODEL_CASES = (
    (
        "floyd_model_padded",
        dict(n_embd=8, n_head=2, depth=3, n_out=3, task_level="gve"),
    ),
)
FLOYD_MODEL_SHIM = (
    "their example/ directory on sys.path and a stub torch_geometric module"
    " (data.Data = object: example/common/model.py and graph.py import it,"
    " model.py's annotations name pyg.data.Data; the forward reads"
    " only graph.adj and graph.pair_mask, given as a namespace); model.py"
    " loaded unchanged"
)


def _import_floyd(reference):
  root = pathlib.Path(reference).resolve()
  source = root / "src" / "floydnet" / "functional.py"
  if not source.exists():
    raise SystemExit(
        f"{source} not found: is --floyd_reference a checkout of {FLOYD_URL}?"
    )
  sys.path.insert(0, str(root / "src"))
  import torch  # pylint: disable=g-import-not-at-top
  import floydnet  # pylint: disable=g-import-not-at-top

  if not pathlib.Path(floydnet.__file__).resolve().is_relative_to(root):
    raise SystemExit(
        f"imported floydnet from {floydnet.__file__}, not from {root}"
    )
  return torch, floydnet


def _randomise_floyd(torch, rng, module):
  """`_randomise_torch` for FloydNet modules: ffn_scale (a scalar) 1 + 0.2
  N(0, 1), the example model's embeddings (emb_*) N(0, 1) as their init."""
  params = {}
  with torch.no_grad():
    for name, p in module.named_parameters():
      if p.dim() == 0:  # ffn_scale
        value = np.asarray(np.float32(1.0 + 0.2 * rng.standard_normal()))
      elif name.startswith("emb_"):
        value = rng.standard_normal(tuple(p.shape)).astype(np.float32)
      else:
        value = _random_like(rng, name, tuple(p.shape))
      p.copy_(torch.from_numpy(value))
      params[name] = value
  return params


def make_floyd(reference, commit):
  """Their `pivotal_attention` and `PivotalAttentionBlock` on seeded random
  inputs and parameters: outputs and the gradients of sum(y * dy) (a stored
  random cotangent dy) with respect to every input and parameter."""
  torch, floydnet = _import_floyd(reference)
  torch.manual_seed(0)
  torch.set_num_threads(1)
  rng = np.random.default_rng(20260301)
  cases = {}

  def tensor(array, grad=True):
    value = torch.from_numpy(np.ascontiguousarray(array))
    return value.requires_grad_(grad)

  def normal(*shape):
    return rng.standard_normal(shape).astype(np.float32)

  names = ("q_ik", "k_ij", "k_jk", "v_ij", "v_jk")
  for name, (b, h, ni, nk, nj, d), mask_kind, options in FLOYD_FN_CASES:
    shapes_of = {
        "q_ik": (b, h, ni, nk, d),
        "k_ij": (b, h, ni, nj, d),
        "k_jk": (b, h, nj, nk, d),
        "v_ij": (b, h, ni, nj, d),
        "v_jk": (b, h, nj, nk, d),
    }
    inputs = {n: normal(*shapes_of[n]) for n in names}
    torch_inputs = {n: tensor(v) for n, v in inputs.items()}
    mask = None
    if mask_kind == "bool":
      inputs["attn_mask"] = rng.random((b, h, ni, nk, nj)) < 0.3
      inputs["attn_mask"][0, 0, 1, 2, :] = True  # every pivot masked
      mask = tensor(inputs["attn_mask"], grad=False)
    elif mask_kind == "additive":
      additive = 0.5 * normal(b, 1, ni, 1, nj)
      additive[rng.random(additive.shape) < 0.2] = -1e4
      inputs["attn_mask"] = additive
      mask = tensor(additive)
    inputs["dy"] = normal(b, h, ni, nk, d)
    y = floydnet.pivotal_attention(
        *[torch_inputs[n] for n in names], attn_mask=mask, **options
    )
    (y * torch.from_numpy(inputs["dy"])).sum().backward()
    outputs = {"y": y.detach().numpy()}
    for n in names:
      outputs[f"grad/{n}"] = torch_inputs[n].grad.numpy()
    if mask_kind == "additive":
      outputs["grad/attn_mask"] = mask.grad.numpy()
    meta = dict(
        reference="floyd",
        repository=FLOYD_URL,
        commit=commit,
        function=(
            "src/floydnet/functional.py pivotal_attention "
            f"(mask {mask_kind}, {options or 'defaults'})"
        ),
        sizes=dict(batch=b, heads=h, i=ni, k=nk, j=nj, head_width=d),
        mask=mask_kind,
        options=options,
        layer_norm_epsilon=1e-5,  # (no norm here; the block's default)
        shim=FLOYD_SHIM,
    )
    _save(name, meta, inputs, {}, outputs)
    cases[name] = {"function": meta["function"]}

  sizes = FLOYD_BLOCK_SIZES
  b, n, d = sizes["batch"], sizes["nodes"], sizes["width"]
  dropout = 0.1  # eval() must switch it off
  for name, kwargs, padded in FLOYD_BLOCK_CASES:
    block = floydnet.PivotalAttentionBlock(
        embed_dim=d, num_heads=sizes["heads"], dropout=dropout, **kwargs
    )
    block.eval()
    params = _randomise_floyd(torch, rng, block)
    # dy ~ 0.1 N(0, 1): the parameter gradients sum over every pair, and
    # with dy ~ N(0, 1) they reach |30|, where fp32 rounding alone (of
    # either side, against a float64 run) is ~1e-5.
    inputs = {"x": normal(b, n, n, d), "dy": 0.1 * normal(b, n, n, d)}
    mask = None
    if padded:
      node = np.ones((b, n), bool)
      node[1, 3:] = False
      pair = node[:, :, None] & node[:, None, :]
      inputs["attn_mask"] = ~pair[:, None, :, None, :]
      mask = tensor(inputs["attn_mask"], grad=False)
    x = tensor(inputs["x"])
    y = block(x, mask)
    (y * torch.from_numpy(inputs["dy"])).sum().backward()
    outputs = {"y": y.detach().numpy(), "grad/x": x.grad.numpy()}
    for pname, p in block.named_parameters():
      outputs[f"grad/{pname}"] = p.grad.numpy()
    meta = dict(
        reference="floyd",
        repository=FLOYD_URL,
        commit=commit,
        function=(
            "src/floydnet/transformer.py PivotalAttentionBlock "
            f"({kwargs or 'defaults'}{', padded' if padded else ''})"
        ),
        sizes=sizes,
        options=kwargs,
        padded=padded,
        eval_mode=True,
        config_dropout=dropout,
        layer_norm_epsilon=1e-5,
        shim=FLOYD_SHIM,
    )
    _save(name, meta, inputs, params, outputs)
    cases[name] = {"function": meta["function"]}
  cases.update(_make_floyd_model(torch, reference, commit, rng))
  _update_readme(
      "floyd", FLOYD_URL, commit, cases, f"{FLOYD_SHIM}; {FLOYD_MODEL_SHIM}"
  )


def _import_floyd_model(reference):
  """Their example/common/model.py with a stub torch_geometric."""
  stub = types.ModuleType("torch_geometric")  # annotations: pyg.data.Data
  stub.data = types.SimpleNamespace(Data=object)
  sys.modules.setdefault("torch_geometric", stub)
  sys.path.insert(0, str(pathlib.Path(reference).resolve() / "example"))
  from common import model  # pylint: disable=g-import-not-at-top

  return model


def _make_floyd_model(torch, reference, commit, rng):
  """Their FloydNet model on a padded batch: the three heads' outputs and
  the gradients of sum_h <pred_h, dy_h> (stored random cotangents) with
  respect to every parameter."""
  model_lib = _import_floyd_model(reference)
  cases = {}
  dropout = 0.1  # eval() must switch it off
  b, n = FLOYD_BLOCK_SIZES["batch"], FLOYD_BLOCK_SIZES["nodes"]
  for name, kwargs in FLOYD_MODEL_CASES:
    config = model_lib.ModelConfig(dropout=dropout, **kwargs)
    model = model_lib.FloydNet(config)
    model.eval()
    params = _randomise_floyd(torch, rng, model)
    node = np.ones((b, n), bool)
    node[1, 3:] = False
    pair = node[:, :, None] & node[:, None, :]
    adj = (rng.random((b, n, n)) < 0.4) & pair
    width = config.n_out
    inputs = {
        "node_mask": node,
        "adj": adj.astype(np.int64),
        "dy_g": 0.1 * rng.standard_normal((b, width)).astype(np.float32),
        "dy_v": 0.1 * rng.standard_normal((b, n, width)).astype(np.float32),
        "dy_e": 0.1 * rng.standard_normal((b, n, n, width)).astype(np.float32),
    }
    graph = types.SimpleNamespace(
        adj=torch.from_numpy(inputs["adj"]),
        pair_mask=torch.from_numpy(pair.astype(np.float32)),
    )
    preds = dict(zip("gve", model(graph)))
    loss = sum(
        (preds[h] * torch.from_numpy(inputs[f"dy_{h}"])).sum() for h in "gve"
    )
    loss.backward()
    outputs = {f"pred_{h}": preds[h].detach().numpy() for h in "gve"}
    for pname, p in model.named_parameters():
      outputs[f"grad/{pname}"] = p.grad.numpy()
    meta = dict(
        reference="floyd",
        repository=FLOYD_URL,
        commit=commit,
        function=(
            f"example/common/model.py FloydNet (ModelConfig {kwargs}, padded)"
        ),
        sizes=dict(
            batch=b,
            nodes=n,
            width=config.n_embd,
            heads=config.n_head,
            depth=config.depth,
            out=width,
        ),
        options=dict(
            norm_fn=config.norm_fn,
            activation_fn="silu",  # their model's blocks
            enable_ffn=config.enable_ffn,
        ),
        eval_mode=True,
        config_dropout=dropout,
        layer_norm_epsilon=1e-5,
        shim=f"{FLOYD_SHIM}; {FLOYD_MODEL_SHIM}",
    )
    _save(name, meta, inputs, params, outputs)
    cases[name] = {"function": meta["function"]}
  return cases


# ----------------------------------------------------------------------------
# G2G: the Graph2Graph Transformer authors' PyTorch code (numpy + torch only).
# ----------------------------------------------------------------------------

G2G_SHIM = (
    "stub modules for transformers (2.x names), pytorch_pretrained_bert, "
    "senttr's parser.utils.base / parser.utils.scalar_mix and statetr's "
    "file_utils (BERT loading and training only; PreTrainedModel = "
    "torch.nn.Module, add_start_docstrings a no-op); bare parser / "
    "parser.utils packages with __path__ into senttr/; graph.py, parser.py, "
    "statetr/utils.py and statetr/model.py loaded unchanged"
)
# B x N tokens of width D = H x K, their 3 relation ids; the second sentence
# has 3 real tokens of 5. Y relation labels for the classifier.
G2G_SIZES = dict(batch=2, nodes=5, width=8, heads=2, relations=3, labels=6)


class _StubModule(types.ModuleType):
  """A module whose every public name is a placeholder that raises."""

  def __getattr__(self, name):
    if name.startswith("__"):
      raise AttributeError(name)

    def unavailable(*args, **kwargs):
      raise RuntimeError(f"stub {self.__name__}.{name} called")

    return unavailable


def _import_g2g(reference):
  root = pathlib.Path(reference).resolve()
  senttr, statetr = root / "senttr", root / "statetr"
  for source in (
      senttr / "parser" / "utils" / "graph.py",
      senttr / "parser" / "parser.py",
      statetr / "model.py",
      statetr / "utils.py",
  ):
    if not source.exists():
      raise SystemExit(
          f"{source} not found: is --g2g_reference a checkout of {G2G_URL}?"
      )
  import torch  # pylint: disable=g-import-not-at-top

  for name in (
      "transformers",
      "transformers.modeling_bert",
      "transformers.configuration_bert",
      "transformers.file_utils",
      "transformers.modeling_utils",
      "pytorch_pretrained_bert",
      "pytorch_pretrained_bert.modeling",
      "parser.utils.base",
      "parser.utils.scalar_mix",
      "file_utils",
  ):
    sys.modules[name] = _StubModule(name)
  sys.modules["transformers.modeling_utils"].PreTrainedModel = torch.nn.Module
  sys.modules["transformers.file_utils"].add_start_docstrings = (
      lambda *docs: lambda obj: obj
  )
  for name, path in (
      ("parser", senttr / "parser"),
      ("parser.utils", senttr / "parser" / "utils"),
  ):
    package = types.ModuleType(name)
    package.__path__ = [str(path)]
    sys.modules[name] = package

  def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module

  graph = load("parser.utils.graph", senttr / "parser" / "utils" / "graph.py")
  parser = load("parser.parser", senttr / "parser" / "parser.py")
  load("utils", statetr / "utils.py")  # statetr/model.py: `from utils import`
  statetr_model = load("g2g_statetr_model", statetr / "model.py")
  return torch, graph, parser, statetr_model


def make_g2g(reference, commit):
  """Their graph-input attention (both parsers' copies) and Relation
  classifier on seeded random inputs and parameters: outputs and the
  gradients of sum(y * dy) for the (float) input and every parameter.

  Attention: their self-attention module followed by a torch.nn.Linear
  named `output.dense`, the first map of the BERT BertSelfOutput that
  follows it in their layer (its dropout and residual LayerNorm are the
  layer's, not the attention's). Parameter names are those of their
  attention block (`self.*`, `output.dense.*`). The padding mask is made as
  their BERT models make it: (1 - mask[:, None, None, :]) * -10000.0.
  statetr's relation tables have padding_idx=0 (row 0 starts at zero and
  gets no gradient), so their gradients are left out of that golden.
  Classifier: their `Classifier(2 D, D, Y)` (as their Parser builds
  `mlp_rel`) on [h_i; h_j] for every pair (i, j)."""
  torch, graph, parser, statetr_model = _import_g2g(reference)
  torch.manual_seed(0)
  torch.set_num_threads(1)
  rng = np.random.default_rng(20260412)
  sizes = G2G_SIZES
  b, n, d, h = sizes["batch"], sizes["nodes"], sizes["width"], sizes["heads"]
  dropout = 0.1  # eval() must switch it off
  cases = {}

  def normal(*shape):
    return rng.standard_normal(shape).astype(np.float32)

  randomise = functools.partial(_randomise_torch, torch, rng)

  def meta_for(function, **extra):
    return dict(
        reference="g2g",
        repository=G2G_URL,
        commit=commit,
        function=function,
        sizes=sizes,
        eval_mode=True,
        # No LayerNorm in these goldens (their BERT layers' own is 1e-12).
        layer_norm_epsilon=None,
        shim=G2G_SHIM,
        **extra,
    )

  mask = np.ones((b, n), bool)
  mask[1, 3:] = False
  config = types.SimpleNamespace(
      hidden_size=d,
      num_attention_heads=h,
      attention_probs_dropout_prob=dropout,
      output_attentions=False,  # senttr
      layernorm_key=False,  # both; their default and run scripts'
      layernorm_value=False,  # senttr
      graph_input=True,  # statetr
  )
  for name, function, build, call, skip in (
      (
          "g2g_attention",
          (
              "senttr/parser/utils/graph.py BertGraphSelfAttention + "
              "output.dense (padded)"
          ),
          lambda: graph.BertGraphSelfAttention(config),
          lambda m, x, ext, arc: m(x, ext, None, None, None, arc)[0],
          (),
      ),
      (
          "g2g_statetr_attention",
          (
              "statetr/model.py BertSelfAttention(graph_input=True) + "
              "output.dense (padded)"
          ),
          lambda: statetr_model.BertSelfAttention(config),
          lambda m, x, ext, arc: m(x, ext, arc),
          ("self.dp_relation_k.weight", "self.dp_relation_v.weight"),
      ),
  ):
    block = torch.nn.Module()
    block.add_module("self", build())
    block.add_module("output", torch.nn.Module())
    block.output.add_module("dense", torch.nn.Linear(d, d))
    block.eval()
    params = randomise(block)
    inputs = {
        "x": normal(b, n, d),
        "relations": rng.integers(0, sizes["relations"], (b, n, n)),
        "mask": mask,
        "dy": normal(b, n, d),
    }
    x = torch.from_numpy(inputs["x"]).requires_grad_(True)
    ext = (1.0 - torch.from_numpy(mask).float()[:, None, None, :]) * -10000.0
    arc = torch.from_numpy(inputs["relations"]).long()
    y = block.output.dense(call(block.self, x, ext, arc))
    (y * torch.from_numpy(inputs["dy"])).sum().backward()
    outputs = {"y": y.detach().numpy(), "grad/x": x.grad.numpy()}
    for pname, p in block.named_parameters():
      if pname not in skip:
        outputs[f"grad/{pname}"] = p.grad.numpy()
    inputs["relations"] = inputs["relations"].astype(np.int32)
    meta = meta_for(function, config_dropout=dropout, grads_left_out=skip)
    _save(name, meta, inputs, params, outputs)
    cases[name] = {"function": function}

  classifier = parser.Classifier(2 * d, d, sizes["labels"])
  classifier.eval()
  params = randomise(classifier)
  inputs = {"h": normal(b, n, d), "dy": normal(b, n, n, sizes["labels"])}
  hid = torch.from_numpy(inputs["h"]).requires_grad_(True)
  pairs = torch.cat(
      (
          hid[:, :, None, :].expand(b, n, n, d),
          hid[:, None, :, :].expand(b, n, n, d),
      ),
      dim=-1,
  )
  y = classifier(pairs)
  (y * torch.from_numpy(inputs["dy"])).sum().backward()
  outputs = {"y": y.detach().numpy(), "grad/h": hid.grad.numpy()}
  for pname, p in classifier.named_parameters():
    outputs[f"grad/{pname}"] = p.grad.numpy()
  function = "senttr/parser/parser.py Classifier(2 D, D, Y) on [h_i; h_j]"
  meta = meta_for(function, config_dropout=0.0, grads_left_out=())
  _save("g2g_relation_classifier", meta, inputs, params, outputs)
  cases["g2g_relation_classifier"] = {"function": function}
  _update_readme("g2g", G2G_URL, commit, cases, G2G_SHIM)


# ----------------------------------------------------------------------------
# --record: ours vs theirs (main python), into README.json.
# ----------------------------------------------------------------------------


def record():
  os.environ.setdefault("JAX_PLATFORMS", "cpu")
  sys.path.insert(0, str(REPO))
  from experiments.compare import goldens as fidelity  # pylint: disable=g-import-not-at-top

  readme = json.loads(README_JSON.read_text()) if README_JSON.exists() else {}
  goldens = readme.setdefault("goldens", {})
  rows = []
  for case in fidelity.available_cases():
    if not _selected(case):
      continue
    diffs = fidelity.max_abs_diffs(case)
    if case in fidelity.WHOLE_MODEL_CASES:
      # Whole-model goldens: per group (loss, grad/*, eval_hint/*, ...), the
      # max abs difference and the test's scaled one (see max_abs_diffs).
      scaled = fidelity.max_abs_diffs(case, scaled=True)
      grouped, grouped_scaled = {}, {}
      for key, value in diffs.items():
        group = key.split("/", 1)[0]
        grouped[group] = max(grouped.get(group, 0.0), value)
        grouped_scaled[group] = max(grouped_scaled.get(group, 0.0), scaled[key])
      diffs = grouped
      goldens.setdefault(case, {})["max_scaled_diff"] = {
          k: float(f"{v:.3g}") for k, v in grouped_scaled.items()
      }
      worst = max(grouped_scaled.values())
    else:
      worst = max(diffs.values())
    goldens.setdefault(case, {})["max_abs_diff"] = {
        k: float(f"{v:.3g}") for k, v in diffs.items()
    }
    rows.append((case, worst, diffs))
  readme["tolerance"] = fidelity.TOLERANCE
  readme.pop("tolerance_rt_net_scaled", None)  # the name before 2026-11-29
  readme["tolerance_whole_model_scaled"] = fidelity.WHOLE_MODEL_TOLERANCE
  README_JSON.write_text(json.dumps(readme, indent=2, sort_keys=True) + "\n")
  print(
      f"\n{'golden':36s} {'max |ours - theirs|':>20s}  per output "
      "(whole models: scaled, per group)"
  )
  for case, worst, diffs in rows:
    detail = ", ".join(f"{k} {v:.2e}" for k, v in diffs.items())
    tolerance = (
        fidelity.WHOLE_MODEL_TOLERANCE
        if case in fidelity.WHOLE_MODEL_CASES
        else fidelity.TOLERANCE
    )
    flag = "" if worst <= tolerance else "  > tolerance"
    print(f"{case:36s} {worst:20.2e}  {detail}{flag}")


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--rt_reference", help=f"checkout of {RT_URL}")
  parser.add_argument(
      "--rt_net_reference",
      help=(
          f"checkout of {RT_URL}; run in their Python "
          "(their whole clrs package, TensorFlow included)"
      ),
  )
  parser.add_argument("--et_reference", help=f"checkout of {ET_URL}")
  parser.add_argument("--cs_reference", help=f"checkout of {CS_URL}")
  parser.add_argument("--floyd_reference", help=f"checkout of {FLOYD_URL}")
  parser.add_argument("--g2g_reference", help=f"checkout of {G2G_URL}")
  parser.add_argument(
      "--commit", help="commit of the checkout, if not a git work tree"
  )
  parser.add_argument(
      "--cases",
      help=(
          "comma-separated fnmatch patterns: write and record only the "
          "goldens whose names match (default: all)"
      ),
  )
  parser.add_argument(
      "--record",
      action="store_true",
      help="measure ours vs each golden; write README.json",
  )
  args = parser.parse_args()
  global CASE_PATTERNS
  if args.cases:
    CASE_PATTERNS = [c.strip() for c in args.cases.split(",") if c.strip()]
  if not (
      args.rt_reference
      or args.rt_net_reference
      or args.et_reference
      or args.cs_reference
      or args.floyd_reference
      or args.g2g_reference
      or args.record
  ):
    print(FETCH_HELP, file=sys.stderr)
    return 2
  if args.rt_reference:
    make_rt(args.rt_reference, _commit_of(args.rt_reference, args.commit))
  if args.rt_net_reference:
    make_rt_net(
        args.rt_net_reference, _commit_of(args.rt_net_reference, args.commit)
    )
  if args.et_reference:
    commit = _commit_of(args.et_reference, args.commit)
    make_et(args.et_reference, commit)
    make_et_rat(args.et_reference, commit)
    make_et_clutrr(args.et_reference, commit)
    make_et_cogs(args.et_reference, commit)
    make_et_cfq(args.et_reference, commit)
  if args.cs_reference:
    make_cs(args.cs_reference, _commit_of(args.cs_reference, args.commit))
  if args.floyd_reference:
    make_floyd(
        args.floyd_reference, _commit_of(args.floyd_reference, args.commit)
    )
  if args.g2g_reference:
    make_g2g(args.g2g_reference, _commit_of(args.g2g_reference, args.commit))
  if args.record:
    record()
  return 0


if __name__ == "__main__":
  sys.exit(main())
