r"""Convert a work directory written by an earlier layout to today's, once.

  python3 scripts/migrate_workdir.py /work/runs/floyd_bf_protocol

The library reads only today's layout; this standalone script (imported by
nothing in the library) converts:

- a `clrs_rt_protocol` work directory (the RT paper's CLRS protocol as the
  comparison harness ran it: `config.json` with `processors` and a
  `protocol.steps` field, runs in `<processor>/<algorithm>/seed<s>/`) to the
  CLRS task's: `config.json` the `relational_jax.training.clrs` config of
  `rt_protocol.config` with the old budget fields, runs in
  `<algorithm>_seed<42 + s>/` (the seed is run.py's model seed, as the task
  names it). A directory of several processors (`pair_models_clrs`, which
  still runs as that task) is left as it is. The checkpoints and
  `metrics.jsonl` move unchanged (the task trains the same function from
  them); the old config is kept as `config.clrs_rt_protocol.json`.

  python3 scripts/migrate_workdir.py --pair_models_results \
      results/reproductions/pair_models_clrs_cpu__results.json

splits the harness's combined `pair_models_clrs` results JSON (every
processor's seeds, curves summarised) into the CLRS task's results JSON of
each `pair_models_clrs_<kind>` reproduction beside it
(`pair_models_clrs_<kind>_<budget>__results.json`, with its validation and
OOD plots): per run its validation and test curve, best point, test score,
parameters, wall time and resumed parts (the harness kept no per-evaluation
loss). The original is removed.

  python3 scripts/migrate_workdir.py --protocol_results \
      results/reproductions/rt_clrs_core8_paper__bellman_ford_seed0.json

converts a one-processor results JSON of that harness's RT-protocol runs the
same way, to the path today's command writes
(`rt_clrs_core8_paper__bellman_ford_seed42.json`).

Any other work directory of another version (the library refuses those
with one line naming this script) is converted in place:

- `config.json` in today's fields: CLRS records with the paths since moved
  into `train` (`protocol.train_steps`, `model.learning_rate`, ...) and the
  heads and layer norm that the model sections held (now
  `processor.nb_heads` / `.use_ln`); a `data.data_dir` at the old default
  data directory beside the repository becomes the shipped one holding the
  same files; a field added since takes the value that runs without it
  used (CLUTRR: `protocol.closure='sound'`, `rat.qkv_bias=False`; graph
  COGS: `edge_transformer.init='flax'`; seq2seq: the tree options of our
  choices, `tree_tokens='arity'`, `tree_end='eos'`, `tree_pe_init='spread'`,
  `tree_pos_bias=False`, and `tree_pe_norm='paper'` of those records, scaled
  by d_pos, as 'pe_width'; else today's default). The original
  is kept as `config.before_migration.json`.
- checkpoint records (`checkpoints/{latest,best}/<step>/meta`): the graph
  tasks' former loop record (no step, stream or losses) and seq2seq's
  former stream position ({seed, epoch, index, num_examples, batch_size},
  which becomes the step) in today's layout; a best without `selection`
  gets '' (the selection of the tasks that choose none); a record without
  an integrity record gets one of the record itself (no state checksums:
  nothing vouches for bits written before them).
- CLRS checkpoints whose optimiser state has dm-clrs's own layout
  (`BaselineModel`'s Adam, clipped when `train.clip` > 0): restored in that
  layout, their Adam moments and count moved into today's optimiser state
  (`optim.make_optimizer`, the same updates) and saved again; the originals
  are kept in `checkpoints.before_migration/`.
- a run's `result.json` without `select_on` gets what it tested ('last'
  where it selected the last state, else 'val').

It refuses (exit 2, one line) a directory it does not recognise, and never
overwrites a run directory that already exists.
"""

import argparse
import copy
import glob
import json
import os
import shutil
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

OLD_CONFIG = "config.clrs_rt_protocol.json"


def _is_clrs_rt_protocol(config) -> bool:
  return (
      isinstance(config, dict)
      and "processors" in config
      and "steps" in config.get("protocol", {})
  )


def clrs_rt_protocol_config(old, processor: str):
  """The CLRS task's config of `processor`'s runs in the old config."""
  from relational_jax.training.clrs import rt_protocol  # pylint: disable=g-import-not-at-top

  p = old["protocol"]
  c = rt_protocol.config(
      processor,
      tuple(old["algorithms"]),
      tuple(rt_protocol.FIRST_SEED + s for s in old["seeds"]),
  )
  c.train.steps, c.train.eval_every = p["steps"], p["eval_every"]
  c.protocol.train_size = p["train_size"]
  c.protocol.max_eval_samples = p["max_eval_samples"]
  c.protocol.test_points = p.get("test_points", "every_evaluation")
  # Samples per predict call: run.py's, unless fewer samples are scored.
  batch = rt_protocol.RUN_PY_FLAGS["eval_batch_size"]
  if 0 < p["max_eval_samples"] < batch:
    c.train.eval_batch_size = p["max_eval_samples"]
  c.train.stop_at_step = old.get("stop_at_step", 0)
  c.results_path = old.get("results_path", "")
  return c


def migrate_clrs_rt_protocol(workdir: str, old, log=print):
  from relational_jax.training import config as config_lib  # pylint: disable=g-import-not-at-top

  if len(old["processors"]) != 1:
    raise ValueError(
        f"{workdir} holds runs of {old['processors']}: a pair_models_clrs "
        "work directory, which that task reads as it is; nothing changed."
    )
  (processor,) = old["processors"]
  new = clrs_rt_protocol_config(old, processor)
  moves = []
  for algorithm in old["algorithms"]:
    for seed in old["seeds"]:
      src = os.path.join(workdir, processor, algorithm, f"seed{seed}")
      dst = os.path.join(
          workdir, f"{algorithm}_seed{new.seeds[old['seeds'].index(seed)]}"
      )
      if not os.path.isdir(src):
        continue
      if os.path.exists(dst):
        raise ValueError(f"{dst} exists already: nothing was moved.")
      moves.append((src, dst))
  os.replace(
      os.path.join(workdir, "config.json"), os.path.join(workdir, OLD_CONFIG)
  )
  with open(os.path.join(workdir, "config.json"), "w") as f:
    json.dump(config_lib.to_dict(new), f, indent=1, sort_keys=True)
  for src, dst in moves:
    os.replace(src, dst)
    log(f"moved {src} -> {dst}")
  for path in (os.path.join(workdir, processor, a) for a in old["algorithms"]):
    if os.path.isdir(path) and not os.listdir(path):
      os.rmdir(path)
  if os.path.isdir(os.path.join(workdir, processor)) and not os.listdir(
      os.path.join(workdir, processor)
  ):
    os.rmdir(os.path.join(workdir, processor))
  log(
      f"{workdir}: a CLRS task work directory now ({processor}; the old "
      f"config kept as {OLD_CONFIG})"
  )


# Config paths renamed into today's (old path -> today's).
CLRS_RENAMED_PATHS = {
    "protocol.train_steps": "train.steps",
    "protocol.batch_size": "train.batch_size",
    "protocol.eval_batch_size": "train.eval_batch_size",
    "protocol.eval_every": "train.eval_every",
    "protocol.progress": "train.progress",
    "protocol.tensorboard": "train.tensorboard",
    "model.learning_rate": "train.learning_rate",
    "model.grad_clip_max_norm": "train.clip",
    "rt.num_heads": "processor.nb_heads",
    "et.num_heads": "processor.nb_heads",
    "floyd.num_heads": "processor.nb_heads",
    "rt.use_ln": "processor.use_ln",
}
BEFORE = "before_migration"


def upgrade_clrs(saved):
  """A copy of a nested CLRS config record in today's fields: the model
  sections' num_heads and use_ln leave every section, those of the section
  the run's processor_type read becoming processor.nb_heads / use_ln; the
  other `CLRS_RENAMED_PATHS` move (a record with both spellings keeps
  today's); the processor fields and the kind's withheld model fields that
  the run never read take today's defaults (today's config refuses other
  values there)."""
  import processors  # pylint: disable=g-import-not-at-top
  from relational_jax.training.clrs import config as clrs_config  # pylint: disable=g-import-not-at-top

  out = copy.deepcopy(dict(saved))
  spec = processors.PROCESSORS.get(out.get("processor_type"))
  for name in processors.factory.sections():
    section = out.get(name)
    if not isinstance(section, dict):
      continue
    for field, argument in processors.factory.ARGUMENT_FIELDS.items():
      if field in section:
        value = section.pop(field)
        if spec is not None and name == spec.section:
          out.setdefault("processor", {})[argument] = value
  for old, new in CLRS_RENAMED_PATHS.items():
    old_section, old_name = old.split(".")
    section = out.get(old_section)
    if not isinstance(section, dict) or old_name not in section:
      continue
    value = section.pop(old_name)
    new_section, new_name = new.split(".")
    out.setdefault(new_section, {}).setdefault(new_name, value)
  unread = clrs_config.unread_processor_fields(out.get("processor_type"))
  defaults = clrs_config.default_config()
  for name in set(unread) & set(out.get("processor", {})):
    out["processor"][name] = defaults.processor[name]
  section = out.get(spec.section) if spec is not None else None
  if isinstance(section, dict):
    for name in set(spec.withheld) & set(section):
      if name in defaults[spec.section]:
        section[name] = defaults[spec.section][name]
      else:
        del section[name]
  return out


def _task_defaults():
  """{task: (today's default record, the values of fields added since)}."""
  from relational_jax.training import clutrr  # pylint: disable=g-import-not-at-top
  from relational_jax.training import cogs_graph  # pylint: disable=g-import-not-at-top
  from relational_jax.training import config as config_lib  # pylint: disable=g-import-not-at-top
  from relational_jax.training.clrs import config as clrs_config  # pylint: disable=g-import-not-at-top
  from relational_jax.training.seq2seq import config as s2s_config  # pylint: disable=g-import-not-at-top

  then = {
      "clutrr": {"protocol.closure": "sound", "rat.qkv_bias": False},
      "cogs_graph": {"edge_transformer.init": "flax"},
      # Tree models before the authors' (icecaps) choices became defaults.
      "seq2seq": {
          "transformer.tree_pe_init": "spread",
          "transformer.tree_pos_bias": False,
          "transformer.tree_tokens": "arity",
          "transformer.tree_end": "eos",
      },
  }
  return {
      name: (config_lib.to_dict(module.default_config()), then.get(name, {}))
      for name, module in (
          ("clrs", clrs_config),
          ("seq2seq", s2s_config),
          ("clutrr", clutrr),
          ("cogs_graph", cogs_graph),
      )
  }


def _which_task(record, defaults) -> str:
  """The task whose default config shares most field paths with `record`."""
  from relational_jax.training import config as config_lib  # pylint: disable=g-import-not-at-top

  paths = set(config_lib.flatten(record))
  return max(
      defaults,
      key=lambda t: len(paths & set(config_lib.flatten(defaults[t][0]))),
  )


def _shipped_equivalent(path: str) -> str:
  """The shipped data directory that an old default one (the `data`
  directory of the `shared` folder beside the repository) held, else
  `path`."""
  from relational_jax.data import paths as data_paths  # pylint: disable=g-import-not-at-top

  norm = os.path.normpath(path)
  head, sep, tail = norm.rpartition(os.sep + os.path.join("shared", "data"))
  if not sep or not head:
    return path
  shipped = os.path.join(data_paths.OFFICIAL_DIR, tail.lstrip(os.sep))
  return os.path.normpath(shipped) if os.path.isdir(shipped) else path


def upgrade_config(record):
  """(task, a copy of config `record` in today's fields); see the module
  docstring. Fields today's config lacks are dropped."""
  from relational_jax.training import config as config_lib  # pylint: disable=g-import-not-at-top

  defaults = _task_defaults()
  task = _which_task(record, defaults)
  out = upgrade_clrs(record) if task == "clrs" else copy.deepcopy(record)
  data = out.get("data")
  if isinstance(data, dict) and isinstance(data.get("data_dir"), str):
    data["data_dir"] = _shipped_equivalent(data["data_dir"])
  default, then = defaults[task]
  flat = config_lib.flatten(out)
  if task == "seq2seq" and "transformer.tree_tokens" not in flat:
    # 'paper' scaled by d_pos then; that is 'pe_width' today.
    if flat.get("transformer.tree_pe_norm") == "paper":
      flat["transformer.tree_pe_norm"] = "pe_width"
  result = {}
  for path, value in config_lib.flatten(default).items():
    result[path] = flat.get(path, then.get(path, value))
  return task, _nested(result)


def _nested(flat):
  out = {}
  for path, value in flat.items():
    *parents, last = path.split(".")
    node = out
    for part in parents:
      node = node.setdefault(part, {})
    node[last] = value
  return out


# The position of seq2seq's former batch stream (its keys, exactly).
_OLD_SEQ2SEQ_STREAM = frozenset(
    ("seed", "epoch", "index", "num_examples", "batch_size")
)


def upgrade_record(meta, step: int):
  """A checkpoint's JSON record (without its integrity entry) of step
  `step` in today's layout (module docstring)."""
  meta = dict(meta)
  if "stream" not in meta:  # The graph tasks' former loop.
    scored = [h for h in meta["history"] if "val_accuracy" in h]
    top = max(scored, key=lambda h: h["val_accuracy"], default=None)
    meta.update(
        step=step,
        stream={"step": step},
        losses=[],
        best=top and {"step": top["step"], "score": top["val_accuracy"]},
    )
  elif isinstance(meta["stream"], dict) and (
      set(meta["stream"]) == _OLD_SEQ2SEQ_STREAM
  ):
    meta["stream"] = {"step": int(meta["step"])}
  meta.setdefault("sittings", [])
  meta.setdefault("train_seconds", 0.0)
  if meta.get("best") is not None and "selection" not in meta["best"]:
    meta["best"] = dict(meta["best"], selection="")
  return meta


def _meta_files(checkpoint_dir):
  for which in ("latest", "best"):
    for path in sorted(
        glob.glob(os.path.join(checkpoint_dir, which, "*", "meta", "metadata"))
    ):
      yield which, int(path.split(os.sep)[-3]), path


def upgrade_records(checkpoint_dir, log=print) -> int:
  """Rewrites every checkpoint record in `checkpoint_dir` in today's layout
  (its integrity entry recomputed; the state checksums kept); the number
  changed."""
  from relational_jax.training import checkpoints as ckpt_lib  # pylint: disable=g-import-not-at-top

  changed = 0
  for _, step, path in _meta_files(checkpoint_dir):
    with open(path) as f:
      raw = json.load(f)
    record = {k: v for k, v in raw.items() if k != ckpt_lib.INTEGRITY_KEY}
    integrity = raw.get(ckpt_lib.INTEGRITY_KEY, {"state": {}})
    new = upgrade_record(record, step)
    new[ckpt_lib.INTEGRITY_KEY] = {
        "state": integrity["state"],
        "meta": ckpt_lib._record_hash(new),  # pylint: disable=protected-access
    }
    if new != raw:
      with open(path, "w") as f:
        json.dump(new, f)
      changed += 1
      log(f"record {path} in today's layout")
  return changed


def stock_clrs_optimizer(train):
  """The optimiser dm-clrs's `BaselineModel` builds for `train` (Adam at a
  constant rate, clipped when clip > 0); None where it has none."""
  import optax  # pylint: disable=g-import-not-at-top

  if train.optimizer != "adam" or train.schedule != "constant":
    return None
  if train.warmup_steps:
    return None
  if train.clip:
    return optax.chain(
        optax.clip_by_global_norm(train.clip),
        optax.scale_by_adam(),
        optax.scale(-train.learning_rate),
    )
  return optax.adam(train.learning_rate)


def upgrade_stock_opt_state(old, fresh):
  """`fresh` (today's optimiser state) holding the Adam moments and count of
  `old` (a `stock_clrs_optimizer` state)."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import optax  # pylint: disable=g-import-not-at-top

  kinds = (optax.ScaleByAdamState, optax.ScaleByScheduleState)
  is_state = lambda x: isinstance(x, kinds)
  adam = [
      x
      for x in jax.tree_util.tree_leaves(old, is_leaf=is_state)
      if isinstance(x, optax.ScaleByAdamState)
  ]
  if len(adam) != 1:
    raise ValueError(f"expected one Adam state in {old!r}.")

  def swap(x):
    if isinstance(x, optax.ScaleByAdamState):
      return adam[0]
    if isinstance(x, optax.ScaleByScheduleState):
      return x._replace(count=jnp.copy(adam[0].count))
    return x

  return jax.tree_util.tree_map(swap, fresh, is_leaf=is_state)


def upgrade_clrs_optimizer_states(workdir, config, log=print) -> int:
  """Re-saves the CLRS checkpoints of `workdir` (`config`: today's) whose
  optimiser state has dm-clrs's own layout in today's; the number
  converted. The originals move to `checkpoints.before_migration/`."""
  import jax  # pylint: disable=g-import-not-at-top
  import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top
  from relational_jax.training import checkpoints as ckpt_lib  # pylint: disable=g-import-not-at-top
  from relational_jax.training.clrs import loop as clrs_loop  # pylint: disable=g-import-not-at-top

  stock = stock_clrs_optimizer(config.train)
  if stock is None or config.multi_algorithm != "separate":
    return 0
  converted = 0
  for algorithm in config.algorithms:
    for seed in config.seeds:
      run_dir = os.path.join(workdir, f"{algorithm}_seed{seed}")
      ckpt_dir = os.path.join(run_dir, "checkpoints")
      if not os.path.isdir(ckpt_dir):
        continue
      model, _, _, _ = clrs_loop.model_for_run(config, algorithm, seed, run_dir)
      today = clrs_loop.ClrsTask(model, None, seed, None).abstract_state()
      rep = model._replicated  # pylint: disable=protected-access
      old_abstract = {
          "params": today["params"],
          "opt_state": ckpt_lib.abstract_like(
              jax.eval_shape(stock.init, today["params"]), rep
          ),
      }
      states = {}
      for which, step, _ in _meta_files(ckpt_dir):
        mgr = ocp.CheckpointManager(os.path.join(ckpt_dir, which))
        try:
          mgr.restore(
              step,
              args=ocp.args.Composite(
                  state=ocp.args.StandardRestore(today),
                  meta=ocp.args.JsonRestore(),
              ),
          )
          continue  # Today's layout already.
        except Exception:  # pylint: disable=broad-except
          restored = mgr.restore(
              step,
              args=ocp.args.Composite(
                  state=ocp.args.StandardRestore(old_abstract),
                  meta=ocp.args.JsonRestore(),
              ),
          )
        state = restored["state"]
        fresh = jax.jit(model.opt.init, out_shardings=rep)(state["params"])
        state = {
            "params": state["params"],
            "opt_state": upgrade_stock_opt_state(state["opt_state"], fresh),
        }
        meta = {
            k: v
            for k, v in dict(restored["meta"]).items()
            if k != ckpt_lib.INTEGRITY_KEY
        }
        states[which, step] = (state, meta)
      if not states:
        continue
      aside = ckpt_dir + "." + BEFORE
      if os.path.exists(aside):
        raise ValueError(f"{aside} exists already: nothing was changed.")
      kept = {
          (w, s) for w, s, _ in _meta_files(ckpt_dir) if (w, s) not in states
      }
      if kept:
        raise ValueError(
            f"{ckpt_dir} mixes layouts ({sorted(kept)} are today's): "
            "nothing was changed."
        )
      os.rename(ckpt_dir, aside)
      with ckpt_lib.RunCheckpoints(ckpt_dir) as ckpts:
        for (which, step), (state, meta) in sorted(states.items()):
          ckpts.save_to(which, step, state, meta)
      converted += len(states)
      log(
          f"{ckpt_dir}: {len(states)} checkpoint(s) in today's optimiser layout"
      )
  return converted


def migrate_other_version(workdir: str, record, log=print) -> None:
  """Converts a work directory of another version in place (module
  docstring)."""
  task, new = upgrade_config(record)
  path = os.path.join(workdir, "config.json")
  if new != record:
    shutil.copy(path, os.path.join(workdir, f"config.{BEFORE}.json"))
    with open(path, "w") as f:
      json.dump(new, f, indent=1, sort_keys=True)
    log(f"{path}: today's fields ({task})")
  if task == "clrs":
    from relational_jax.training.clrs import config as clrs_config  # pylint: disable=g-import-not-at-top

    upgrade_clrs_optimizer_states(workdir, clrs_config.load(new), log)
  for ckpt_dir in glob.glob(
      os.path.join(workdir, "**", "checkpoints"), recursive=True
  ):
    upgrade_records(ckpt_dir, log)
  for result in glob.glob(os.path.join(workdir, "*", "result.json")):
    with open(result) as f:
      done = json.load(f)
    if "select_on" not in done:
      done["select_on"] = "last" if done.get("selected") == "last" else "val"
      with open(result, "w") as f:
        json.dump(done, f, indent=1)
      log(f"{result}: select_on recorded")


def migrate(workdir: str, log=print) -> None:
  """Converts `workdir` (module docstring); ValueError if it cannot."""
  path = os.path.join(workdir, "config.json")
  if not os.path.isfile(path):
    raise ValueError(f"{path} not found: not a work directory.")
  with open(path) as f:
    config = json.load(f)
  if _is_clrs_rt_protocol(config):
    migrate_clrs_rt_protocol(workdir, config, log)
    return
  if (
      not isinstance(config, dict)
      or "train" not in config
      and not any(k in config for k in ("protocol", "model"))
  ):
    raise ValueError(
        f"{workdir}: no layout recognised (known: a clrs_rt_protocol work "
        "directory, a task's config.json); nothing changed."
    )
  if upgrade_config(config)[1] == config and not _old_records(workdir):
    raise ValueError(
        f"{workdir} is in this version's format already; nothing changed."
    )
  migrate_other_version(workdir, config, log)


def _old_records(workdir) -> bool:
  """Whether a checkpoint record or run result of `workdir` is not today's."""
  from relational_jax.training import checkpoints as ckpt_lib  # pylint: disable=g-import-not-at-top

  for ckpt_dir in glob.glob(
      os.path.join(workdir, "**", "checkpoints"), recursive=True
  ):
    for _, step, path in _meta_files(ckpt_dir):
      with open(path) as f:
        raw = json.load(f)
      record = {k: v for k, v in raw.items() if k != ckpt_lib.INTEGRITY_KEY}
      if (
          ckpt_lib.INTEGRITY_KEY not in raw
          or upgrade_record(record, step) != record
      ):
        return True
  for result in glob.glob(os.path.join(workdir, "*", "result.json")):
    with open(result) as f:
      if "select_on" not in json.load(f):
        return True
  return False


def _task_runs(by_algorithm, steps):
  """The CLRS task's per-algorithm runs of the harness's
  {algorithm: {'seeds': {s: run}}} (seed s is run.py's model seed 42 + s)."""
  from relational_jax.training.clrs import evaluation  # pylint: disable=g-import-not-at-top
  from relational_jax.training.clrs import rt_protocol  # pylint: disable=g-import-not-at-top

  length = str(rt_protocol.TEST_LENGTH)
  algorithms = {}
  for algorithm, entry in by_algorithm.items():
    runs = []
    for s, run in entry["seeds"].items():
      tests = dict((step, t) for step, t in run["ood_test"])
      history = [
          {
              "step": step,
              "val": val,
              **({"test": tests[step]} if step in tests else {}),
          }
          for step, val in run["validation"]
      ]
      runs.append({
          "algorithm": algorithm,
          "seed": rt_protocol.FIRST_SEED + int(s),
          "steps": steps,
          "complete": True,
          "num_params": run["num_params"],
          "train_seconds": run["train_seconds"],
          "sittings": run.get("sittings", []),
          "history": history,
          "best": {"step": run["best_step"], "score": run["best_val"]},
          "checkpoint_fallbacks": run.get("checkpoint_fallbacks", []),
          "best_val": run["best_val"],
          "best_step": run["best_step"],
          "select_on": "val",
          "selected": f"val (step {run['best_step']})",
          "test": {length: run["test"]},
      })
    algorithms[algorithm] = {
        "runs": runs,
        "mean_test": evaluation.mean_over_runs(runs, [length]),
        "mean_best_val": sum(r["best_val"] for r in runs) / len(runs),
    }
  return algorithms


def _write_task_results(name, budget, config, algorithms, out, converted, log):
  """The CLRS task's results JSON of reproduction `name` at `out`."""
  from experiments import reproductions  # pylint: disable=g-import-not-at-top
  from relational_jax.training import config as config_lib  # pylint: disable=g-import-not-at-top
  from relational_jax.training.clrs import evaluation  # pylint: disable=g-import-not-at-top
  from relational_jax.training.clrs import rt_protocol  # pylint: disable=g-import-not-at-top

  reproduction = reproductions.get(name)
  length = str(rt_protocol.TEST_LENGTH)
  ours = {a: 100.0 * e["mean_test"][length] for a, e in algorithms.items()}
  ours["mean"] = sum(ours.values()) / len(algorithms)
  command = f"python -m experiments.reproduce {name} --budget={budget}"
  defaults = reproduction.build(budget)
  for path in ("algorithms", "seeds"):
    if tuple(config[path]) != tuple(defaults[path]):
      text = "".join(
          f'"{v}",' if isinstance(v, str) else f"{v}," for v in config[path]
      )
      command += f" --set='{path}=({text})'"
  if config.results_path != defaults.results_path:
    command += f" --set=results_path={config.results_path}"
  results = {
      "config": config_lib.to_dict(config),
      "algorithms": algorithms,
      "wall_time_s": sum(
          r["train_seconds"] for e in algorithms.values() for r in e["runs"]
      ),
      "reproduction": {
          "name": name,
          "paper": reproduction.paper,
          "where": reproduction.where,
          "metric": reproduction.metric,
          "budget": budget,
          "published": dict(reproduction.published),
          **reproduction.published_errors(),
          "ours": ours,
          "notes": reproduction.notes,
          "results_path": os.path.relpath(out, REPO),
          "command": command,
          "converted": converted,
      },
  }
  evaluation.write_results(results, out, validation=True)
  log(f"wrote {out}")


def _remove_with_png(path):
  os.remove(path)
  png = os.path.splitext(path)[0] + ".png"
  if os.path.exists(png):
    os.remove(png)


def split_pair_models_results(path: str, log=print) -> None:
  """The CLRS task's results of each processor in the harness's combined
  `pair_models_clrs` results JSON at `path` (module docstring)."""
  from experiments import reproductions  # pylint: disable=g-import-not-at-top

  with open(path) as f:
    old = json.load(f)
  if not (isinstance(old, dict) and {"results", "budget"} <= set(old)):
    raise ValueError(f"{path}: not a pair_models_clrs results JSON.")
  budget = old["reproduction"]["budget"]
  for processor, by_algorithm in old["results"].items():
    name = f"pair_models_clrs_{processor}"
    out = os.path.join(os.path.dirname(path), f"{name}_{budget}__results.json")
    _write_task_results(
        name,
        budget,
        reproductions.get(name).build(budget),
        _task_runs(by_algorithm, old["budget"]["steps"]),
        out,
        "from the comparison harness's combined pair_models_clrs results "
        "(scripts/migrate_workdir.py); it kept no per-evaluation loss",
        log,
    )
  _remove_with_png(path)


def convert_protocol_results(path: str, log=print) -> None:
  """The CLRS task's results JSON of a one-processor harness run of the RT
  paper's protocol (`<kind>_clrs_core8_paper__<algorithm>_seed<s>.json`,
  written by the former task clrs_rt_protocol) beside it, named as today's
  command writes it (seed 42 + s)."""
  from experiments import reproductions  # pylint: disable=g-import-not-at-top
  from relational_jax.training import config as config_lib  # pylint: disable=g-import-not-at-top
  from relational_jax.training.clrs import rt_protocol  # pylint: disable=g-import-not-at-top

  with open(path) as f:
    old = json.load(f)
  if not (
      isinstance(old, dict)
      and {"results", "budget", "reproduction"} <= set(old)
      and len(old["results"]) == 1
  ):
    raise ValueError(f"{path}: not a one-processor protocol results JSON.")
  ((processor, by_algorithm),) = old["results"].items()
  name, budget = old["reproduction"]["name"], old["reproduction"]["budget"]
  algorithms = tuple(by_algorithm)
  seeds = tuple(
      rt_protocol.FIRST_SEED + int(s)
      for s in next(iter(by_algorithm.values()))["seeds"]
  )
  stem = (
      f"{name}_{budget}__{'_'.join(algorithms)}_seed{'_'.join(map(str, seeds))}"
  )
  out = os.path.join(os.path.dirname(path), stem + ".json")
  config = config_lib.override(
      reproductions.get(name).build(budget),
      {
          "algorithms": algorithms,
          "seeds": seeds,
          "results_path": os.path.relpath(out, REPO),
      },
  )
  if config.processor_type != processor:
    raise ValueError(
        f"{path}: processor {processor!r}, but {name} trains "
        f"{config.processor_type!r}."
    )
  _write_task_results(
      name,
      budget,
      config,
      _task_runs(by_algorithm, old["budget"]["steps"]),
      out,
      "from the comparison harness's results of the RT paper's protocol "
      "(scripts/migrate_workdir.py); it kept no per-evaluation loss",
      log,
  )
  _remove_with_png(path)


def upgrade_comparison_record(path: str, log=print) -> None:
  """Rewrites a comparison record (`results/compare/<name>*.json`) whose
  description of their side was worded by another version in today's
  words, so `experiments.compare --reuse_reference` takes it: clutrr_et's
  data named the generator's module before its rename (the same rows);
  scan_relative_universal's records before `scoring` was recorded scored
  their side the same way (today's `SCORING`)."""
  from experiments.compare import clutrr_et  # pylint: disable=g-import-not-at-top
  from experiments.compare import scan_relative_universal  # pylint: disable=g-import-not-at-top

  with open(path) as f:
    record = json.load(f)
  name = record.get("name") if isinstance(record, dict) else None
  before = dict(record)
  if name == "clutrr_et":
    old = clutrr_et._DATA.format(module="relational_jax.data.clutrr")  # pylint: disable=protected-access
    if record.get("data") == old:
      comparison = clutrr_et.ClutrrEt()
      record["data"] = comparison.describe(
          comparison.budget(record["budget_name"])
      )["data"]
  elif name == "scan_relative_universal":
    if "scoring" not in record:
      record["scoring"] = scan_relative_universal.SCORING
  else:
    raise ValueError(
        f"{path}: not a clutrr_et or scan_relative_universal comparison."
    )
  if record == before:
    raise ValueError(f"{path} is in this version's words already.")
  with open(path, "w") as f:
    json.dump(record, f, indent=1)
  log(f"{path}: their side described in today's words")


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("workdir", nargs="?")
  parser.add_argument("--pair_models_results", default="")
  parser.add_argument("--protocol_results", default="")
  parser.add_argument("--comparison_record", default="")
  args = parser.parse_args(argv)
  try:
    if args.pair_models_results:
      split_pair_models_results(args.pair_models_results)
    elif args.protocol_results:
      convert_protocol_results(args.protocol_results)
    elif args.comparison_record:
      upgrade_comparison_record(args.comparison_record)
    elif args.workdir:
      migrate(args.workdir)
    else:
      raise ValueError(
          "give a work directory, --pair_models_results, --protocol_results "
          "or --comparison_record."
      )
  except ValueError as e:
    print(f"migrate_workdir: {e}", file=sys.stderr)
    return 2
  return 0


if __name__ == "__main__":
  sys.exit(main())
