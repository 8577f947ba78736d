"""relational_jax.training.cli / errors and relational_jax.console, in
process: the one-line errors of the mains and the held-back start-up noise
(the mains themselves: tests/experiments/test_clean_console.py)."""

import logging
import os

from absl import logging as absl_logging
from ml_collections import config_dict
import pytest

from relational_jax import console
from relational_jax.training import cli
from relational_jax.training import errors
from relational_jax.training import reporting


def _config():
  return config_dict.ConfigDict(
      {"model": "rt", "rt": {"num_layers": 3, "head_dim": 16}, "seeds": (1,)}
  )


def test_unknown_config_field_names_it_and_the_valid_fields():
  config = _config()
  assert (
      cli.unknown_config_field("config", config, "--config.rt.num_layers=2")
      is None
  )
  assert cli.unknown_config_field("config", config, "--workdir=x") is None
  assert cli.unknown_config_field("config", config, "--config_json=x") is None
  message = cli.unknown_config_field("config", config, "--config.rt.no_such=3")
  assert "config.rt.no_such" in message
  assert "['head_dim', 'num_layers']" in message
  message = cli.unknown_config_field("config", config, "--noconfig.nope")
  assert "config.nope" in message and "'rt'" in message
  message = cli.unknown_config_field("config", config, "--config.seeds.x=1")
  assert "config.seeds is a value" in message
  message = cli.unknown_config_field("config", config, "--config.rt=foo")
  assert "config.rt is a section" in message
  assert "['head_dim', 'num_layers']" in message
  assert "config.rt is a section" in cli.unknown_config_field(
      "config", config, "--config.rt"
  )
  # A dict literal sets the section's fields (ml_collections parses it).
  assert (
      cli.unknown_config_field("config", config, "--config.rt={'head_dim': 4}")
      is None
  )


def test_foreign_flags_are_dropped_and_only_those():
  from absl import flags  # pylint: disable=g-import-not-at-top

  fv = flags.FlagValues()
  (foreign,) = cli.FOREIGN_FLAG_MODULES
  flags.DEFINE_bool("use_hints", False, "", flag_values=fv, module_name=foreign)
  flags.DEFINE_list("seeds", ["0"], "", flag_values=fv, module_name=foreign)
  flags.DEFINE_integer("split", 1, "", flag_values=fv, module_name=foreign)
  flags.DEFINE_string("path", "", "", flag_values=fv, module_name=foreign)
  flags.DEFINE_string("workdir", "runs", "", flag_values=fv, module_name="ours")
  delattr(fv, "seeds")  # A main's own --seeds in its place stays.
  flags.DEFINE_string("seeds", None, "", flag_values=fv, module_name="ours")
  cli.drop_foreign_flags(fv)
  assert set(fv) == {"workdir", "seeds"}
  assert fv["seeds"].default is None
  with pytest.raises(flags.UnrecognizedFlagError, match="use_hints"):
    fv(["main", "--use_hints=true"])


def test_exit_bad_input_is_one_line_and_status_2(capsys):
  with pytest.raises(SystemExit) as exit_info:
    cli.exit_bad_input("bad value 'x';\nvalid choices are ['a', 'b']")
  assert exit_info.value.code == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1
  assert ": error: bad value 'x'; valid choices are ['a', 'b']" in err


def test_user_input_turns_value_errors_into_user_errors():
  with pytest.raises(errors.UserError, match="Unknown hint_mode 'x'"):
    with errors.user_input():
      raise ValueError("Unknown hint_mode 'x'; valid choices are ['a'].")
  with pytest.raises(errors.UserError, match="^missing$"):
    with errors.user_input((KeyError,)):
      raise KeyError("missing")
  with pytest.raises(RuntimeError):  # Not the user's: keeps its traceback.
    with errors.user_input():
      raise RuntimeError("a bug")
  assert issubclass(errors.UserError, ValueError)


def test_read_json_names_an_unreadable_file(tmp_path):
  path = tmp_path / "config.json"
  path.write_text('{"protocol": ')
  with pytest.raises(errors.UnreadableFileError, match=str(path)) as info:
    reporting.read_json(str(path))
  assert info.value.path == str(path)
  assert isinstance(info.value, ValueError)  # Old `except ValueError` hold.
  path.write_bytes(b"\xff\xfe\x00")
  with pytest.raises(errors.UnreadableFileError, match="UnicodeDecodeError"):
    reporting.read_json(str(path))
  with pytest.raises(FileNotFoundError):
    reporting.read_json(str(tmp_path / "absent.json"))


def test_native_capture_holds_fd2_and_replays_it(capfd):
  console._CAPTURED.clear()
  with console.NativeCapture("a test"):
    os.write(2, b"I0000 native start-up line\n")
  assert "native start-up line" not in capfd.readouterr().err
  assert console.captured() == [("a test", "I0000 native start-up line\n")]
  console.replay_captured()
  err = capfd.readouterr().err
  assert "held back while a test" in err
  assert "I0000 native start-up line" in err
  assert not console.captured()


def test_native_capture_shows_its_output_when_the_block_fails(capfd):
  console._CAPTURED.clear()
  with pytest.raises(ImportError):
    with console.NativeCapture("a failing import"):
      os.write(2, b"why it failed\n")
      raise ImportError("broken")
  assert "why it failed" in capfd.readouterr().err
  assert not console.captured()


def test_native_capture_is_off_with_the_verbose_env(capfd, monkeypatch):
  monkeypatch.setenv(console.VERBOSE_ENV, "1")
  with console.NativeCapture("a test"):
    os.write(2, b"live line\n")
  assert "live line" in capfd.readouterr().err


def _sampler_record(level=logging.WARNING):
  path = os.path.join("site-packages", "clrs", "_src", "samplers.py")
  return logging.LogRecord(
      "absl", level, path, 341, "Ignoring kwargs %s", ("x",), None
  )


def test_sampler_warnings_move_to_debug(monkeypatch):
  monkeypatch.delenv(console.VERBOSE_ENV, raising=False)
  console.install_log_filters()
  console.install_log_filters()  # Idempotent.
  logger = absl_logging.get_absl_logger()
  assert logger.filters.count(console._FILTER) == 1
  verbosity = absl_logging.get_verbosity()
  try:
    absl_logging.set_verbosity(absl_logging.INFO)
    record = _sampler_record()
    assert not console._FILTER.filter(record)
    assert record.levelno == logging.DEBUG
    absl_logging.set_verbosity(absl_logging.DEBUG)
    assert console._FILTER.filter(_sampler_record())
    other = logging.LogRecord(
        "absl", logging.WARNING, "mine.py", 1, "kept", (), None
    )
    absl_logging.set_verbosity(absl_logging.WARNING)
    assert console._FILTER.filter(other)
    assert other.levelno == logging.WARNING
  finally:
    absl_logging.set_verbosity(verbosity)
