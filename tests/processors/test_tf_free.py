"""processors and the CLRS experiment import and train where TensorFlow is absent."""

import os
import subprocess
import sys
import textwrap

import pytest

from processors import tf_free

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)

_SCRIPT = textwrap.dedent("""
    import sys
    try:
      import tensorflow
      raise SystemExit("tensorflow still importable")
    except ImportError:
      pass

    import processors
    from processors import tf_free
    from relational_jax.training.clrs import config as clrs_config
    from relational_jax.training.clrs import loop as clrs_loop
    assert tf_free.tensorflow_stubbed(), "expected stand-ins"
    assert tf_free.ensure_clrs_importable() == ["tensorflow", "tensorflow_datasets"]
    import clrs
    try:
      clrs.create_dataset(folder="/nonexistent", algorithm="bfs", split="train", batch_size=1)
      raise SystemExit("create_dataset should need TensorFlow")
    except tf_free.TensorFlowMissingError as e:
      assert "needs TensorFlow" in str(e)
    config = clrs_config.get_config({
        "algorithms": ("insertion_sort",), "protocol.train_lengths": (5,),
        "protocol.test_lengths": (5,), "train.batch_size": 2,
        "train.eval_batch_size": 2, "train.steps": 1, "train.eval_every": 1,
        "protocol.max_eval_samples": 2, "model.hidden_dim": 8,
        "processor.nb_heads": 2, "rt.head_dim": 4, "rt.num_layers": 1,
        "rt.node_ffn_dim": 4, "rt.edge_msg_dim": 4, "rt.edge_ffn_dim": 4,
        "train.progress": False})
    results = clrs_loop.train_and_evaluate(config, sys.argv[1])
    assert "tensorflow" not in sys.modules
    print("TRAINED_WITHOUT_TF", results["algorithms"]["insertion_sort"]["mean_test"])
""")


@pytest.mark.slow
def test_trains_without_tensorflow(tmp_path):
  # Shadow packages whose import fails, first on the path: `import tensorflow`
  # raises ImportError in the subprocess as on a machine without TensorFlow.
  shadow = tmp_path / "shadow"
  for name in ("tensorflow", "tensorflow_datasets"):
    (shadow / name).mkdir(parents=True)
    (shadow / name / "__init__.py").write_text(
        f"raise ImportError('{name} is absent in this test')\n"
    )
  env = dict(
      os.environ,
      PYTHONPATH=os.pathsep.join(
          [str(shadow), REPO, os.environ.get("PYTHONPATH", "")]
      ),
  )
  env.pop(tf_free.SKIP_ENV, None)  # A user's machine without TensorFlow.
  proc = subprocess.run(
      [sys.executable, "-c", _SCRIPT, str(tmp_path / "run")],
      cwd=REPO,
      env=env,
      capture_output=True,
      text=True,
      timeout=600,
  )
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
  assert "TRAINED_WITHOUT_TF" in proc.stdout
  # The stand-ins are announced once, through absl logging.
  assert proc.stderr.count("installed import-time stand-ins") == 1, proc.stderr[
      -4000:
  ]


@pytest.mark.slow  # A subprocess importing TensorFlow: 8 s.
def test_import_installs_no_stand_ins_where_tensorflow_is_installed():
  """Here TensorFlow is installed: importing processors changes nothing."""
  script = textwrap.dedent("""
      import importlib.util, sys
      if importlib.util.find_spec("tensorflow") is None:
        print("NO_TENSORFLOW")
        raise SystemExit(0)
      import processors
      from processors import tf_free
      assert not tf_free.tensorflow_stubbed()
      assert not isinstance(sys.modules["tensorflow"], tf_free._StubModule)
      assert getattr(sys.modules["tensorflow"], "__file__", None)
      print("REAL_TENSORFLOW")
  """)
  env = dict(os.environ)
  env.pop(tf_free.SKIP_ENV, None)  # The suite's own processes skip it.
  proc = subprocess.run(
      [sys.executable, "-c", script],
      cwd=REPO,
      env=env,
      capture_output=True,
      text=True,
      timeout=600,
  )
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
  if "NO_TENSORFLOW" in proc.stdout:
    pytest.skip("TensorFlow is not installed here.")
  assert "REAL_TENSORFLOW" in proc.stdout
  assert "installed import-time stand-ins" not in proc.stderr


def test_skip_env_keeps_tensorflow_out_and_names_bad_values(monkeypatch):
  """This process imported dm-clrs under the suite's SKIP_ENV=1
  (tests/conftest.py): stand-ins, no TensorFlow, whether or not it is
  installed."""
  assert os.environ[tf_free.SKIP_ENV] == "1" and tf_free.skip_requested()
  assert tf_free.tensorflow_stubbed()
  assert "tensorflow" not in sys.modules
  with pytest.raises(tf_free.TensorFlowMissingError, match=tf_free.SKIP_ENV):
    tf_free._fail("tensorflow_datasets.load")  # pylint: disable=protected-access
  for value, skip in (("0", False), ("1", True)):
    monkeypatch.setenv(tf_free.SKIP_ENV, value)
    assert tf_free.skip_requested() is skip
  monkeypatch.delenv(tf_free.SKIP_ENV)
  assert not tf_free.skip_requested()
  monkeypatch.setenv(tf_free.SKIP_ENV, "yes")
  with pytest.raises(ValueError, match=r"'yes'.*'0'.*'1'"):
    tf_free.skip_requested()
