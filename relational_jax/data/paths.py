"""The data files the library reads by default: shipped inside the package.

`OFFICIAL_DIR` holds the official SCAN, COGS, CLUTRR and semantic-parsing
(JOBS, GEO, ATIS) files with their
licences and provenance (`official/README.md`). Every default data path of
the tasks is one of the directories below; a config's `data_dir` points
elsewhere for other data. `verify` checks the shipped files against their
pinned SHA-256 sums.
"""

import hashlib
import os
from typing import Dict, Iterable, Mapping, Tuple

OFFICIAL_DIR = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "official"
)
SCAN_DIR = os.path.join(OFFICIAL_DIR, "scan")
COGS_DIR = os.path.join(OFFICIAL_DIR, "cogs")
CLUTRR_K23_DIR = os.path.join(OFFICIAL_DIR, "clutrr", "gen_train23_test2to10")
# Shiv & Quirk's Table 1 sets, one directory each (jobs, geo, atis).
SEMPARSE_DIR = os.path.join(OFFICIAL_DIR, "semparse")

# SHA-256 of each shipped file, by its path under OFFICIAL_DIR: the files as
# released (official/README.md says where from).
SHA256: Dict[str, str] = {
    "scan/LICENSE": (
        "5caff9408d400e1d9b271bf48b967154cdf6a37c16c965f91775da3af9291f67"
    ),
    "scan/tasks.txt": (
        "d824c7d9e9149ba497e25f701981dac79954e04bf670d22e5c209f076ac6c89f"
    ),
    "scan/tasks_train_simple.txt": (
        "941bb8a088c5f53ceff12fde902dc008933cf0c4203cc672c47b5f79d73262dd"
    ),
    "scan/tasks_test_simple.txt": (
        "1fe1c8f5a19d0dc40e41bab94278f45f66f3dc415a978bd29855a23440610fc6"
    ),
    "cogs/LICENSE": (
        "fad4a0b4259dd9f0fd6ce2b472541493bac2fb6e6f5fafee9fab7ec8f31aee4d"
    ),
    "cogs/train.tsv": (
        "220b3804b562c0156ee986eff1bdd15c27e52142549362a64f57baf86e304c78"
    ),
    "cogs/dev.tsv": (
        "ab66388a309c7ac1ad210c781a6a0ce12281a9ef24619a12422a752cef61bc21"
    ),
    "cogs/test.tsv": (
        "68f8e51e9f6d9cd22d64efe68dd21d7ea5ba327e9a2359481030161aea757035"
    ),
    "cogs/gen.tsv": (
        "d013d9eee0bafc153f8decc85f42814ac97260f84964d980e1e2b84577b82361"
    ),
    "clutrr/LICENSE": (
        "4b531055125dcda36059651634bdb424ad2612f4759b3d2067a731d2823d1cdc"
    ),
    "clutrr/gen_train23_test2to10/validation.csv": (
        "418d712579e6c9bb3f0e835cb0971372c06bc7816ea97c5e2ac5f24d9b896e51"
    ),
    "clutrr/gen_train23_test2to10/test.csv": (
        "d49c7cbe4f575b48b279313e706ef43e127bfa85b0e860db94fdeb617aea07e9"
    ),
    "semparse/LICENSE": (
        "164522eb7d5783512e086d809f170e156d65b3d0f8923b2d3f83009470ac437c"
    ),
    "semparse/jobs/train.tsv": (
        "8b20b1671ceae4048828d21f8ad843a8fe5e9d6c3a0c08c4b290b4c8703144ed"
    ),
    "semparse/jobs/test.tsv": (
        "dadd9dd1146ec793740ea4ac23ef58d090bf7368b16253e47d2207b0fbd25c1b"
    ),
    "semparse/geo/train.tsv": (
        "00c38e3f4bd2017c3395a9db74807fc4b9acaf92e85e901d210a895d5d286c19"
    ),
    "semparse/geo/test.tsv": (
        "2e81ac5bd1275598b623ad6465180304ef148405323033971af6bb5e6a2d20e6"
    ),
    "semparse/atis/train.tsv": (
        "5858bfd5592cd217db2d315322ada3cc42251adee6dc505b0446f6b27de2c722"
    ),
    "semparse/atis/dev.tsv": (
        "c44ff0bb2479d338db291d8207be1878e43b619b8ff53c807e071079c84a10c7"
    ),
    "semparse/atis/test.tsv": (
        "02ade84b7196b6c3941c7285025537fa8665bc1bb88e4fca356af169ecbb0065"
    ),
    "semparse/atis/lexicon.txt": (
        "4606ddbbf6128287b10d56765031a7935167ccc1623b6d9063a0972f201740ce"
    ),
}

# SCAN's length split is generated, not shipped: SHA-256 of the official
# tasks_{train,test}_length.txt lines, sorted, one '\n' after each line
# (`sorted_lines_sha256`); the generated split gives the same.
SCAN_LENGTH_SORTED_SHA256: Dict[str, str] = {
    "train": "7ffb97f45029871c94bede7e723f7a4aa179eb99fe2b977a18283310422c719d",
    "test": "3297fd0b676c391f7bc3a7385aa66a7fdf64f6f8e81ad584810c1d4ebd0eaa2c",
}


def file_sha256(path: str) -> str:
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()


def sorted_lines_sha256(lines: Iterable[str]) -> str:
  """SHA-256 of `lines` sorted, each followed by '\\n'."""
  return hashlib.sha256(
      "".join(line + "\n" for line in sorted(lines)).encode("utf-8")
  ).hexdigest()


def verify(
    root: str = OFFICIAL_DIR, sums: Mapping[str, str] = SHA256
) -> Tuple[str, ...]:
  """The shipped files checked against their pinned sums.

  Returns the checked paths (relative to `root`).

  Raises:
    FileNotFoundError: a pinned file is missing, named with its path.
    ValueError: a file whose SHA-256 is not the pinned one, named with both
      sums.
  """
  for name, expected in sums.items():
    path = os.path.join(root, name)
    if not os.path.isfile(path):
      raise FileNotFoundError(f"shipped data file {path} is missing.")
    got = file_sha256(path)
    if got != expected:
      raise ValueError(
          f"shipped data file {path} has SHA-256 {got}, expected {expected}"
          " (official/README.md says where it came from)."
      )
  return tuple(sums)
