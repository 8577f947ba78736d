"""A stand-in task for the seed-sweep tests of `experiments.reproduce`: no
training, a score that depends on the seed, resumable (a finished work
directory is read back, and `TRAINED` counts the runs that were not)."""

import json
import os

from relational_jax.training import config as config_lib
from relational_jax.training import task as task_lib

SEED_PATH = "train.seed"
TRAINED = []  # The work directories trained (not read back).


def default_config():
  c = config_lib.ConfigDict()
  c.train = config_lib.ConfigDict(dict(seed=42, steps=3))
  c.results_path = ""
  return c


def validate(config):
  if config.train.steps < 1:
    raise ValueError(f"train.steps must be >= 1, got {config.train.steps}.")


def results_path(config, workdir):
  return config.results_path or os.path.join(workdir, "results.json")


def train_and_evaluate(config, workdir, log=None):
  path = results_path(config, workdir)
  if os.path.exists(path):
    with open(path) as f:
      return json.load(f)
  TRAINED.append(workdir)
  os.makedirs(workdir, exist_ok=True)
  seed = config.train.seed
  results = {
      "config": config.to_dict(),
      "final": {"accuracy": seed / 100.0, "label": "text"},
      "evaluations": {"test": [seed, 2 * seed]},
  }
  with open(path, "w") as f:
    json.dump(results, f)
  return results


def headline(results):
  return dict(results["final"])


def aggregate(results):
  return {"test_sums": [sum(r["evaluations"]["test"]) for r in results]}


class Seeded(task_lib.Task):
  SEED_PATH = SEED_PATH

  def default_config(self):
    return default_config()

  def validate(self, config):
    validate(config)

  def results_path(self, config, workdir):
    return results_path(config, workdir)

  def train_and_evaluate(self, config, workdir, log=None):
    return train_and_evaluate(config, workdir, log)

  def headline(self, results):
    return headline(results)

  def aggregate(self, results):
    return aggregate(results)


TASK = Seeded()
