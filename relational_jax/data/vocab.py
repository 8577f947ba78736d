"""Whitespace tokeniser and vocabulary for seq2seq tasks (SCAN, COGS, ...).

Ids are deterministic: the special tokens come first (`PAD=0`, `BOS=1`,
`EOS=2`, `UNK=3`), followed by the remaining tokens in sorted order, so a
vocabulary built from the same token set always assigns the same ids,
whatever the order of the data.

Unknown tokens: a vocabulary is built from the training data, so an
evaluation set may hold tokens it has never seen (e.g. COGS `gen.tsv`
targets use variable indices up to 40+, beyond those of `train.tsv`).
`Vocab.encode` maps every such token to `UNK` (id 3) instead of
raising; the seq2seq evaluation then scores a target row holding `UNK` as
never exactly matched (`relational_jax.training.seq2seq.evaluation`).
"""

from __future__ import annotations

import json
import os
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = [
    "Vocab",
    "tokenize",
    "PAD",
    "BOS",
    "EOS",
    "UNK",
    "PAD_ID",
    "BOS_ID",
    "EOS_ID",
    "UNK_ID",
    "SPECIAL_TOKENS",
]

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIAL_TOKENS: Tuple[str, ...] = (PAD, BOS, EOS, UNK)
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3

_FORMAT = "relational_jax.vocab"
_VERSION = 1

Text = Union[str, Sequence[str]]


def tokenize(text: Text) -> List[str]:
  """Whitespace tokenisation; a sequence of tokens is returned as a list."""
  if isinstance(text, str):
    return text.split()
  return list(text)


class Vocab:
  """Token <-> id mapping with PAD/BOS/EOS/UNK specials.

  Tokens not in the vocabulary -- e.g. words of an evaluation set that the
  training data (from which the vocabulary was built) never used -- encode
  to `UNK_ID` (`encode`, `encode_batch`,
  `token_to_id`); they never raise.

  Args:
    tokens: the (non-special) tokens; duplicates and special tokens are
      dropped and the rest are sorted.
  """

  def __init__(self, tokens: Iterable[str] = ()):
    unique = set(tokens) - set(SPECIAL_TOKENS)
    for t in unique:
      if not isinstance(t, str) or len(t.split()) != 1 or t != t.strip():
        raise ValueError(
            f"invalid token {t!r}: tokens must be non-empty strings "
            "without whitespace"
        )
    regular = sorted(unique)
    self._itos: List[str] = list(SPECIAL_TOKENS) + regular
    self._stoi: Dict[str, int] = {t: i for i, t in enumerate(self._itos)}

  # -- construction ---------------------------------------------------------

  @classmethod
  def build(cls, sequences: Iterable[Text]) -> "Vocab":
    """Build from strings (whitespace-tokenised) or token sequences."""
    tokens = set()
    for seq in sequences:
      tokens.update(tokenize(seq))
    return cls(tokens)

  # -- basic protocol -------------------------------------------------------

  def __len__(self) -> int:
    return len(self._itos)

  def __contains__(self, token: object) -> bool:
    return token in self._stoi

  def __eq__(self, other: object) -> bool:
    return isinstance(other, Vocab) and self._itos == other._itos

  def __repr__(self) -> str:
    return f"Vocab(size={len(self)})"

  @property
  def tokens(self) -> List[str]:
    """All tokens in id order, specials included."""
    return list(self._itos)

  pad_id, bos_id, eos_id, unk_id = PAD_ID, BOS_ID, EOS_ID, UNK_ID

  def token_to_id(self, token: str) -> int:
    """Id of `token` (`UNK_ID` for unknown tokens)."""
    return self._stoi.get(token, UNK_ID)

  def id_to_token(self, idx: int) -> str:
    """Token of id `idx`; raises ValueError for an out-of-range id."""
    idx = int(idx)
    if not 0 <= idx < len(self._itos):
      raise ValueError(
          f"token id {idx} out of range for a vocabulary of size {len(self)}"
      )
    return self._itos[idx]

  # -- encoding -------------------------------------------------------------

  def encode(
      self, text: Text, *, add_bos: bool = False, add_eos: bool = False
  ) -> List[int]:
    """Encode a string or token sequence to ids.

    Every token not in the vocabulary (e.g. a word seen only at
    evaluation) maps to `UNK_ID` (3); no error is raised, and decoding
    gives `'<unk>'` back for it.

    Args:
      text: a string (split on whitespace) or a sequence of tokens.
      add_bos, add_eos: prepend BOS / append EOS.
    """
    ids = [self._stoi.get(t, UNK_ID) for t in tokenize(text)]
    if add_bos:
      ids.insert(0, BOS_ID)
    if add_eos:
      ids.append(EOS_ID)
    return ids

  def decode_tokens(
      self,
      ids: Iterable[int],
      *,
      skip_special: bool = True,
      stop_at_eos: bool = True,
  ) -> List[str]:
    """Decode ids to tokens.

    Args:
      ids: token ids (a list or a 1-D array).
      skip_special: drop PAD, BOS and EOS (UNK is kept as `'<unk>'`).
      stop_at_eos: stop at the first EOS (useful for model outputs).
    """
    seq = (
        np.asarray(ids).reshape(-1).tolist()
        if hasattr(ids, "shape")
        else list(ids)
    )
    out: List[str] = []
    for i in seq:
      i = int(i)
      if stop_at_eos and i == EOS_ID:
        if not skip_special:
          out.append(EOS)
        break
      if skip_special and i in (PAD_ID, BOS_ID, EOS_ID):
        continue
      out.append(self.id_to_token(i))
    return out

  def decode(
      self,
      ids: Iterable[int],
      *,
      skip_special: bool = True,
      stop_at_eos: bool = True,
  ) -> str:
    """Decode ids to a space-joined string (see `decode_tokens`)."""
    return " ".join(
        self.decode_tokens(
            ids, skip_special=skip_special, stop_at_eos=stop_at_eos
        )
    )

  def encode_batch(
      self,
      texts: Sequence[Text],
      *,
      add_bos: bool = False,
      add_eos: bool = False,
      length: Optional[int] = None,
  ) -> Tuple[np.ndarray, np.ndarray]:
    """Encode and right-pad a batch with PAD (id 0); unknown tokens map
    to `UNK_ID` as in `encode`.

    Args:
      texts: strings or token sequences.
      add_bos, add_eos: add BOS/EOS to every sequence.
      length: pad to this length (default: the longest sequence).

    Returns:
      `(ids, lengths)`: an int32 array of shape `[batch, length]` and
      an int32 array of shape `[batch]` with the unpadded lengths
      (BOS/EOS included).

    Raises:
      ValueError: if a sequence is longer than `length`.
    """
    encoded = [self.encode(t, add_bos=add_bos, add_eos=add_eos) for t in texts]
    lengths = np.asarray([len(e) for e in encoded], dtype=np.int32)
    max_len = int(lengths.max()) if len(encoded) else 0
    if length is None:
      length = max_len
    elif max_len > length:
      i = int(np.argmax(lengths))
      raise ValueError(
          f"sequence {i} has {max_len} tokens, longer than length={length}"
      )
    ids = np.full((len(encoded), length), PAD_ID, dtype=np.int32)
    for row, e in enumerate(encoded):
      ids[row, : len(e)] = e
    return ids, lengths

  def decode_batch(
      self,
      ids: np.ndarray,
      lengths: Optional[Sequence[int]] = None,
      *,
      skip_special: bool = True,
      stop_at_eos: bool = True,
  ) -> List[str]:
    """Decode a `[batch, length]` array (optionally cut to `lengths`)."""
    ids = np.asarray(ids)
    if ids.ndim != 2:
      raise ValueError(f"expected a 2-D array of ids, got shape {ids.shape}")
    out = []
    for row in range(ids.shape[0]):
      seq = ids[row] if lengths is None else ids[row, : int(lengths[row])]
      out.append(
          self.decode(
              seq.tolist(), skip_special=skip_special, stop_at_eos=stop_at_eos
          )
      )
    return out

  # -- persistence ----------------------------------------------------------

  def to_dict(self) -> dict:
    return {
        "format": _FORMAT,
        "version": _VERSION,
        "specials": list(SPECIAL_TOKENS),
        "tokens": self._itos[len(SPECIAL_TOKENS) :],
    }

  @classmethod
  def from_dict(cls, data: dict, *, source: str = "<dict>") -> "Vocab":
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
      raise ValueError(f"{source}: not a relational_jax vocabulary file")
    if data.get("version") != _VERSION:
      raise ValueError(
          f"{source}: unsupported vocabulary version {data.get('version')!r}"
      )
    if list(data.get("specials", [])) != list(SPECIAL_TOKENS):
      raise ValueError(
          f"{source}: special tokens {data.get('specials')!r} differ from"
          f" {list(SPECIAL_TOKENS)!r}"
      )
    tokens = data.get("tokens")
    if not isinstance(tokens, list):
      raise ValueError(f"{source}: missing 'tokens' list")
    vocab = cls(tokens)
    if vocab._itos[len(SPECIAL_TOKENS) :] != tokens:
      raise ValueError(f"{source}: tokens are not unique and sorted")
    return vocab

  def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
    """Write the vocabulary as JSON, atomically (a temporary file in the
    same directory, then a rename)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
      json.dump(self.to_dict(), f, ensure_ascii=False, indent=1)
      f.write("\n")
    os.replace(tmp, path)

  @classmethod
  def load(cls, path: Union[str, "os.PathLike[str]"]) -> "Vocab":
    """Read a vocabulary written by `save`."""
    path = os.fspath(path)
    if not os.path.isfile(path):
      raise FileNotFoundError(f"vocabulary file not found: {path}")
    with open(path, encoding="utf-8") as f:
      try:
        data = json.load(f)
      except json.JSONDecodeError as e:
        raise ValueError(f"{path}: invalid JSON ({e})") from e
    return cls.from_dict(data, source=path)
