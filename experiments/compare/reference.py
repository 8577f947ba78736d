"""Where the authors' code is, and the message when it is not."""

import os
import subprocess
from typing import Optional


class MissingReferenceError(ValueError):
  """The comparison's reference checkout is absent or is not the expected
  repository (the entry point exits with status 2 and this message)."""


def require(
    name: str, path: Optional[str], repository: str, marker: str
) -> str:
  """The absolute checkout path, after checking that `marker` (a file of
  the authors' repository) is in it.

  Raises:
    MissingReferenceError: naming the repository to fetch and the flag.
  """
  how = (
      f"Comparison {name!r} runs the authors' code from a checkout of "
      f"https://github.com/{repository} (never vendored here). Fetch it "
      f"(e.g. `fetch github:{repository}`, then check out its snapshot "
      "into a scratch directory) and pass --reference=DIR."
  )
  if not path:
    raise MissingReferenceError(f"No --reference given. {how}")
  if not os.path.isfile(os.path.join(path, marker)):
    raise MissingReferenceError(
        f"--reference={path} has no {marker}: it is not a checkout of "
        f"{repository}. {how}"
    )
  return os.path.abspath(path)


def commit(path: str) -> Optional[str]:
  """The commit a checkout of the authors' code is at (`git rev-parse HEAD`),
  None when `path` is not a git work tree (a results JSON then names the
  commit some other way)."""
  try:
    return subprocess.run(
        ["git", "-C", path, "rev-parse", "HEAD"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    return None
