"""The errors training raises, in one place."""


class NonFiniteLossError(RuntimeError):
  """A loss or gradient norm was NaN/Inf; the run stopped and its last good
  checkpoint is kept (the message names it)."""
