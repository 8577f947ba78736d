"""The errors training raises, in one place.

`UserError` is a bad value the user gave (a flag, a config field, a name)
or a work-directory file that cannot be read: the mains
(`relational_jax.training.cli.run`) print its message as one line and exit
with status 2, without a traceback. It is a `ValueError`, so callers that
catch `ValueError` keep working.
"""

import contextlib
from typing import Iterator, Tuple, Type


class NonFiniteLossError(RuntimeError):
  """A loss or gradient norm was NaN/Inf; the run stopped and its last good
  checkpoint is kept (the message names it)."""


class UserError(ValueError):
  """A bad value given by the user; the message names it and the valid
  choices."""


# The one-off converter of work directories written by other versions.
MIGRATE = "scripts/migrate_workdir.py"


class OtherFormatError(UserError):
  """A work-directory file (config.json, a checkpoint) that is not in this
  version's format; `MIGRATE` converts such a directory once. Nothing was
  changed."""


class UnreadableFileError(UserError):
  """A work-directory file (config.json, a results or run record JSON) that
  cannot be read or parsed; nothing in the work directory was changed."""

  def __init__(self, path: str, cause: BaseException):
    self.path = path
    super().__init__(
        f"cannot read {path} ({type(cause).__name__}: {cause}); nothing in "
        "its directory was changed: repair or move this file away and rerun."
    )


@contextlib.contextmanager
def user_input(
    kinds: Tuple[Type[BaseException], ...] = (ValueError,),
) -> Iterator[None]:
  """Inside the block, an exception of `kinds` is the user's bad input: it
  becomes a `UserError` with the same message. Wrap only the checking of
  what the user gave (building and validating the config), not the work, so
  that a bug still shows its traceback."""
  try:
    yield
  except UserError:
    raise
  except kinds as e:
    message = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
    raise UserError(str(message)) from e
