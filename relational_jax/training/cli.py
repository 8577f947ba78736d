"""The mains' runner: `run(main)` in place of `absl.app.run(main)`.

* A bad command line prints one line, `<program>: error: <message>`, on
  stderr and exits with status 2 (no traceback, no usage text): an unknown
  flag or bad flag value (absl, enums included), an unknown config field
  (`--config.rt.no_such=3`, from a config flag defined with
  `define_config_flag`), a `UsageError`, and any
  `relational_jax.training.errors.UserError` raised by `main` (bad config
  values, unknown names, an unreadable work-directory JSON; mains build and
  validate their config inside `errors.user_input()` so these fail before
  any training).
* A clean console (`relational_jax.console`): the absl verbosity is WARNING
  unless --verbosity is given (orbax logs every save at INFO); the
  TensorFlow lines held back (its import, and the GPU probe it registers
  with `absl.app.call_after_init`, run here before `main`) are shown with
  --verbosity=1 or more, as are dm-clrs's sampler warnings.
"""

import os
import re
import sys
from typing import Callable, List, Mapping, Optional, Sequence

from absl import app
from absl import flags
from absl import logging
from ml_collections import config_dict
from ml_collections import config_flags

from relational_jax import console
from relational_jax.training import errors

EXIT_BAD_INPUT = 2
# Bad command-line values found while flags were defined (at import, before
# `run`); `run` reports the first.
_PENDING: List[str] = []


# Modules whose absl flags exist only because a library defines them on
# import and that no main here reads: dm-clrs's clrs_text generator
# (--seeds, --use_hints, --number_of_samples, --split_name, ...).
FOREIGN_FLAG_MODULES = ("clrs._src.clrs_text.generate_clrs_text",)


def drop_foreign_flags(flag_values=flags.FLAGS) -> None:
  """Deletes the flags of `FOREIGN_FLAG_MODULES`, so that passing one is an
  unknown-flag error rather than a value silently ignored. A main calls it
  after its imports (dm-clrs's among them) and before defining its flags."""
  by_module = flag_values.flags_by_module_dict()
  for module in FOREIGN_FLAG_MODULES:
    for flag in list(by_module.get(module, ())):  # delattr edits the list
      if flag.name in flag_values and flag_values[flag.name] is flag:
        delattr(flag_values, flag.name)


def program_name() -> str:
  return os.path.splitext(os.path.basename(sys.argv[0] or "main"))[0]


def exit_bad_input(message: str) -> None:
  """Prints `<program>: error: <message>` as one line; exits with 2."""
  line = " ".join(part.strip() for part in str(message).splitlines())
  sys.stdout.flush()
  sys.stderr.write(f"{program_name()}: error: {line.strip()}\n")
  sys.stderr.flush()
  sys.exit(EXIT_BAD_INPUT)


def unknown_config_field(
    name: str, default: config_dict.ConfigDict, arg: str
) -> Optional[str]:
  """The problem with command-line argument `arg` if it overrides a field
  of config flag `name` that `default` lacks (naming the valid fields), or
  gives a section (a ConfigDict) a value other than a dict literal (naming
  its fields); None otherwise."""
  match = re.match(rf"^--?(?:no)?{re.escape(name)}\.([^=]+)", arg)
  if not match:
    return None
  path = match.group(1)
  node, walked = default, [name]
  for part in path.split("."):
    key = part.split("[", 1)[0]
    if not isinstance(node, config_dict.ConfigDict):
      return (
          f"{'.'.join(walked)} is a value, not a section: {arg} names no "
          "config field"
      )
    if key not in node:
      return (
          f"unknown config field {name}.{path!s} in {arg}; valid fields of "
          f"{'.'.join(walked)} are {sorted(node.keys())}"
      )
    node = node[key]
    walked.append(key)
  value = arg.split("=", 1)[1].strip() if "=" in arg else None
  if isinstance(node, config_dict.ConfigDict) and not (value or "").startswith(
      "{"
  ):
    return (
        f"{'.'.join(walked)} is a section, not a value: {arg} sets none of "
        f"its fields; set one (--{'.'.join(walked)}.<field>=...) of "
        f"{sorted(node.keys())}, or give a dict ({{'field': value}})"
    )
  return None


def define_config_flag(
    name: str,
    default: config_dict.ConfigDict,
    help_string: str = "The run configuration.",
    flag_values: flags.FlagValues = flags.FLAGS,
    argv: Optional[Sequence[str]] = None,
    **kwargs,
):
  """`config_flags.DEFINE_config_dict`, except that an override of an
  unknown field (`--config.rt.no_such=3`, which fails with a traceback at
  import there) is left out and reported by `run` as one line (other
  `flag_values` than absl's global ones: raises `UserError` at once).
  `argv` (default sys.argv) is the command line to be parsed."""
  given = list(sys.argv if argv is None else argv)
  kept = given
  try:
    expanded = flag_values.read_flags_from_files(given, force_gnu=False)
  except flags.Error:  # A missing --flagfile: parse_flags reports it.
    expanded = None
  if expanded is not None and not kwargs.get("accept_new_attributes"):
    problems = [unknown_config_field(name, default, a) for a in expanded]
    if any(problems) and flag_values is not flags.FLAGS:
      raise errors.UserError(next(p for p in problems if p))
    if any(problems):
      _PENDING.extend(p for p in problems if p)
      kept = [a for a, p in zip(expanded, problems) if not p]
  return config_flags.DEFINE_config_dict(
      name,
      default,
      help_string,
      flag_values=flag_values,
      sys_argv=None if (argv is None and kept is given) else list(kept),
      **kwargs,
  )


def parse_flags(argv: Sequence[str]) -> List[str]:
  """absl's flag parsing, every error as one line and exit status 2."""
  if _PENDING:
    exit_bad_input(_PENDING[0])
  try:
    return flags.FLAGS(list(argv))
  except flags.UnrecognizedFlagError as e:
    exit_bad_input(f"{e} (--helpfull lists the flags)")
  except flags.Error as e:
    exit_bad_input(str(e))


def run(main: Callable[[List[str]], None], argv=None) -> None:
  """`absl.app.run(main)` with one-line bad-input errors and a clean
  console (see the module docstring). Flags of `FOREIGN_FLAG_MODULES` are
  unknown flags (`drop_foreign_flags`)."""
  drop_foreign_flags()
  init_callbacks = console.NativeCapture("absl.app ran its init callbacks")

  def parser(args):
    rest = parse_flags(args)
    init_callbacks.start()  # absl runs its init callbacks next, then main.
    return rest

  def main_guarded(args):
    init_callbacks.stop()
    if flags.FLAGS.verbosity >= logging.DEBUG:
      console.replay_captured()
    if not flags.FLAGS["verbosity"].present:
      logging.set_verbosity(logging.WARNING)  # orbax logs every save at INFO
    try:
      return main(args)
    except errors.UserError as e:
      exit_bad_input(str(e))
    except app.UsageError as e:
      exit_bad_input(str(e))

  try:
    app.run(main_guarded, argv=argv, flags_parser=parser)
  except BaseException:
    init_callbacks.stop(failed=True)
    raise
