r"""docs/results.md and README.md's results table, written from results/*.json.

  python3 scripts/results_doc.py write   # render both from their templates
  python3 scripts/results_doc.py check   # exit 1, naming each that differs

Every number in the two is read from a committed JSON under `results/` when
this script renders them, so neither can drift from its JSON (check mode, run
by tests/test_results_doc.py, fails when a committed file differs from its
rendering; exit 2 names a template line whose reference does not resolve).

  docs/results.md.in         -> docs/results.md (the whole file)
  docs/readme_results.md.in  -> README.md, between the BEGIN and END markers

A template is Markdown with these tags:

  {# a comment, dropped #}
  {% set et = load('clutrr/clutrr_et_k23_paper.json') %}  (a name, no output)
  {% for run in runs %} ... {% endfor %}                  (the body per item)
  {% if len(run.published) %} ... {% endif %}             (the body or not)
  {% assert all(d > 0 for d in diffs) %}    (stops if the prose's claim fails)
  {{ et.final.accuracies.k6 | a3 }}                       (a value, formatted)

`{{ EXPR | FILTER | ... }}` evaluates the Python expression EXPR with the
names bound by `set` and `for` and the helpers of `NAMESPACE` (`mean`, `sd` =
the sample standard deviation, ddof = 1, `ks`, `sub`, `div`, `history`, ...),
then applies each filter (`FILTERS`: `a3` = 3 decimals without the leading
zero, `f2`, `int` = rounded, with thousands commas, `g`, `x100`, `pct1`,
`pm('a3')` = mean +- sample sd of a list, `join(', ')`; inside an expression,
`fmt.a3(x)`). A list renders as its items joined by " / "; a float needs a
format; an int renders with thousands commas.

`load(path)` reads `results/<path>`; the JSON's keys are its attributes
(`run.final.accuracies.k6`) or items (`run.evaluations.test.per_k['6']`). A
key that is not there, or a null on the way to it, stops the rendering with
the template's file and line, the JSON's file and the key path. A statement or
comment tag alone on its line leaves no blank line behind. The rendering is
refilled to 80 columns (`reflow`: paragraphs and list items only).
"""

import argparse
import bisect
import builtins
import functools
import json
import math
import pathlib
import re
import sys
import types

REPO = pathlib.Path(__file__).resolve().parents[1]
RESULTS = "results"

BEGIN = (
    "<!-- The results table: written by scripts/results_doc.py from"
    " docs/readme_results.md.in (edit that, then run it with `write`). -->"
)
END = "<!-- End of the results table. -->"

# output file -> (template, whether the output is only the block between
# BEGIN and END of the output file).
OUTPUTS = {
    "docs/results.md": ("docs/results.md.in", False),
    "README.md": ("docs/readme_results.md.in", True),
}


class RenderError(Exception):
  """A template that cannot be rendered; the message names where and why."""


class KeyMissing(RenderError):
  """A key path that a JSON under results/ does not have."""


# --- JSON values: attribute and item access that names the file and key. ---


class Ref:
  """A JSON object, array or null inside `file`, at key path `path`."""

  __slots__ = ("_value", "_file", "_path")

  def __init__(self, value, file, path=()):
    object.__setattr__(self, "_value", value)
    object.__setattr__(self, "_file", file)
    object.__setattr__(self, "_path", path)

  def __getattr__(self, name):
    if name.startswith("__"):
      raise AttributeError(name)
    return self[name]

  def __getitem__(self, key):
    value, path = self._value, self._path
    where = ".".join(path)
    if isinstance(value, dict):
      key = str(key)
      if key not in value:
        raise KeyMissing(
            f"{self._file}: no key {'.'.join(path + (key,))!r}"
            f" ({repr(where) if where else 'the top level'} has "
            + ", ".join(sorted(map(repr, value))[:12])
            + (", ..." if len(value) > 12 else "")
            + ")"
        )
      return _wrap(value[key], self._file, path + (key,))
    if isinstance(value, list):
      try:
        index = int(key)
        return _wrap(value[index], self._file, path + (str(index),))
      except (ValueError, IndexError):
        raise KeyMissing(
            f"{self._file}: no item {key!r} in {where!r}"
            f" (a list of {len(value)})"
        ) from None
    what = "null" if value is None else repr(value)
    raise KeyMissing(
        f"{self._file}: no key {'.'.join(path + (str(key),))!r}"
        f" ({where!r} is {what})"
    )

  def __iter__(self):
    self._need((dict, list), "iterate over")
    if isinstance(self._value, dict):
      return iter(list(self._value))
    return (self[i] for i in range(len(self._value)))

  def __len__(self):
    self._need((dict, list), "take the length of")
    return len(self._value)

  def _need(self, kinds, what):
    if not isinstance(self._value, kinds):
      where = ".".join(self._path) or "the top level"
      v = "null" if self._value is None else repr(self._value)
      raise KeyMissing(f"{self._file}: cannot {what} {where!r} ({v})")

  def __repr__(self):
    return f"Ref({self._file}:{'.'.join(self._path)})"


def _wrap(value, file, path):
  if isinstance(value, (dict, list)) or value is None:
    return Ref(value, file, path)
  return value


def plain(x):
  """`x` with every Ref replaced by its JSON value (a null stops it)."""
  # pylint: disable=protected-access
  if isinstance(x, Ref):
    if x._value is None:
      raise KeyMissing(f"{x._file}: {'.'.join(x._path)!r} is null")
    return x._value
  if isinstance(x, (list, tuple)):
    return [plain(v) for v in x]
  return x


@functools.lru_cache(maxsize=None)
def _read(path):
  full = REPO / RESULTS / path
  if not full.is_file():
    raise KeyMissing(f"{RESULTS}/{path}: no such file")
  with open(full) as f:
    return json.load(f)


def load(path):
  """The JSON `results/<path>`, as a Ref."""
  return Ref(_read(path), f"{RESULTS}/{path}")


# --- Helpers the templates call. ---


def _columns(xs):
  """A list of numbers, or a list of equal-length lists (columns)."""
  xs = plain(list(xs))
  if xs and isinstance(xs[0], list):
    if len({len(x) for x in xs}) != 1:
      raise RenderError(f"lists of unequal lengths: {xs}")
    return True, [list(c) for c in zip(*xs)]
  return False, xs


def mean(xs):
  """The mean of a list of numbers, or the per-position mean of lists."""
  by_column, cols = _columns(xs)
  f = lambda c: math.fsum(c) / len(c)
  return [f(c) for c in cols] if by_column else f(cols)


def sd(xs):
  """The sample standard deviation (ddof = 1), like `mean`."""

  def f(c):
    if len(c) < 2:
      raise RenderError(f"a sample sd needs two values or more: {c}")
    m = math.fsum(c) / len(c)
    return math.sqrt(math.fsum((v - m) ** 2 for v in c) / (len(c) - 1))

  by_column, cols = _columns(xs)
  return [f(c) for c in cols] if by_column else f(cols)


def ks(ref, lo=6, hi=10, prefix="k"):
  """[ref['k6'], ..., ref['k10']] (`prefix` '' for keys '6' .. '10')."""
  return [ref[f"{prefix}{k}"] for k in range(lo, hi + 1)]


def sub(a, b):
  """a - b, per position for lists."""
  a, b = plain(a), plain(b)
  if isinstance(a, list):
    if not isinstance(b, list):
      b = [b] * len(a)
    return [x - y for x, y in zip(a, b, strict=True)]
  return a - b


def div(a, b):
  """a / b, per position for lists."""
  a, b = plain(a), plain(b)
  if isinstance(a, list):
    if not isinstance(b, list):
      b = [b] * len(a)
    return [x / y for x, y in zip(a, b, strict=True)]
  return a / b


def steps_per_s(run):
  """A run's training steps over its training seconds (`train_seconds`)."""
  return run.steps / run.train_seconds


def cores(run):
  """CPU seconds over wall seconds, summed over the run's `sittings`."""
  return math.fsum(s.cpu_seconds for s in run.sittings) / math.fsum(
      s.seconds for s in run.sittings
  )


def history(run, key, first=0, last=math.inf):
  """`key` of the run's `history` entries from step `first` to `last`."""
  return [h[key] for h in run.history if first <= h.step <= last]


def at_step(run, key, step):
  """`key` of the `history` entry at `step`."""
  for h in run.history:
    if h.step == step:
      return h[key]
  # pylint: disable-next=protected-access
  raise KeyMissing(f"{run._file}: no history entry at step {step}")


def graphs(text):
  """'60 of 321' -> (60, 321)."""
  m = re.fullmatch(r"(\d+) of (\d+)", plain(text))
  if not m:
    raise RenderError(f"not 'N of M': {text!r}")
  return int(m.group(1)), int(m.group(2))


NAMESPACE = {
    "load": load,
    "plain": plain,
    "mean": mean,
    "sd": sd,
    "ks": ks,
    "sub": sub,
    "div": div,
    "steps_per_s": steps_per_s,
    "cores": cores,
    "history": history,
    "at_step": at_step,
    "graphs": graphs,
    "math": math,
    **{
        n: getattr(builtins, n)
        for n in (
            "abs all any dict enumerate float int len list max min range"
            " round sorted str sum tuple zip"
        ).split()
    },
}


# --- Filters. ---


def _each(fn):
  """`fn` on a number, or on each item of a list."""

  @functools.wraps(fn)
  def apply(x):
    x = plain(x)
    if isinstance(x, list):
      return [apply(v) for v in x]
    if isinstance(x, bool) or not isinstance(x, (int, float)):
      raise RenderError(f"{apply.__name__} formats numbers, not {x!r}")
    return fn(x)

  return apply


def _fixed(digits):
  return _each(lambda v: f"{v:.{digits}f}")


def _acc(digits):
  """.822, -.26, 1.00: the leading zero dropped; 1 as 1.00."""

  def fmt(v):
    s = f"{v:.{digits}f}"
    if s.startswith("-") and float(s) == 0:
      s = s[1:]
    s = re.sub(r"^(-?)0\.", r"\1.", s)
    if re.fullmatch(r"1\.0+", s):
      s = "1.00"
    return s

  return _each(fmt)


def _pct(digits):
  return _each(lambda v: f"{100 * v:.{digits}f}%")


@_each
def _int(v):
  return f"{round(v):,}"


@_each
def _x100(v):
  return 100 * v


def _join(sep):
  def join(x):
    x = plain(x)
    if not isinstance(x, list):
      raise RenderError(f"join takes a list, not {x!r}")
    return sep.join(_text(v) for v in x)

  return join


def _pm(fmt):
  """mean +- sample sd (ddof = 1) of a list, each formatted by `fmt`."""
  f = FILTERS[fmt]

  def pm(x):
    return f"{f(mean(x))} +- {f(sd(x))}"

  return pm


FILTERS = {
    **{f"a{d}": _acc(d) for d in range(1, 5)},
    **{f"f{d}": _fixed(d) for d in range(0, 5)},
    **{f"pct{d}": _pct(d) for d in range(0, 3)},
    "g": _each(lambda v: f"{v:g}"),
    "int": _int,
    "x100": _x100,
    "join": _join,
    "pm": _pm,
}
for _name, _fn in FILTERS.items():
  _fn.__name__ = _name
NAMESPACE["fmt"] = types.SimpleNamespace(**FILTERS)


def _text(x):
  """How a value renders when no filter made it a string."""
  if isinstance(x, Ref):
    x = plain(x)
  if isinstance(x, str):
    return x
  if isinstance(x, bool):
    raise RenderError(f"a bool needs a filter or a conditional: {x!r}")
  if isinstance(x, int):
    return f"{x:,}"
  if isinstance(x, float):
    raise RenderError(
        f"the float {x!r} needs a format filter (a3, f2, int, ...)"
    )
  if isinstance(x, list):
    return " / ".join(_text(v) for v in x)
  raise RenderError(f"cannot render {x!r}")


# --- The template language. ---

_TAG = re.compile(r"(\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\})", re.S)
# A statement or comment tag alone on its line takes the line with it.
_LINE_TAG = re.compile(
    r"^[ \t]*(\{%(?:(?!%\})[^\n])*%\}|\{#.*?#\})[ \t]*\n", re.M | re.S
)


def _split_filters(src):
  """'a.b | a3 | join(" | ")' -> ['a.b', 'a3', 'join(" | ")']."""
  parts, depth, quote, start = [], 0, None, 0
  for i, c in enumerate(src):
    if quote:
      if c == quote and src[i - 1] != "\\":
        quote = None
    elif c in "'\"":
      quote = c
    elif c in "([{":
      depth += 1
    elif c in ")]}":
      depth -= 1
    elif c == "|" and depth == 0:
      parts.append(src[start:i])
      start = i + 1
  parts.append(src[start:])
  return [p.strip() for p in parts]


def _parse(template, name):
  """Template text -> nodes: ('text', s) | ('expr', src, line) |
  ('set', target, src, line) | ('assert', src, line) |
  ('for', target, src, body, line) | ('if', None, src, body, line)."""
  text = _LINE_TAG.sub(lambda m: m.group(1), template)
  # Line numbers refer to the template as written: a position in `text`
  # gains the newlines that _LINE_TAG removed before it.
  removed_at, removed = [], []  # positions in `text`, newlines removed so far
  pos_out, count, last = 0, 0, 0
  for m in _LINE_TAG.finditer(template):
    pos_out += m.start() - last + len(m.group(1))
    count += m.group(0).count("\n") - m.group(1).count("\n")
    removed_at.append(pos_out)
    removed.append(count)
    last = m.end()
  newlines = [i for i, c in enumerate(text) if c == "\n"]

  def line_of(pos):
    i = bisect.bisect_right(removed_at, pos)
    return bisect.bisect_left(newlines, pos) + (removed[i - 1] if i else 0) + 1

  root, stack = [], []
  current = root
  pos = 0
  for m in _TAG.finditer(text):
    if m.start() > pos:
      current.append(("text", text[pos : m.start()]))
    pos = m.end()
    tag, line = m.group(0), line_of(m.start())
    if tag.startswith("{#"):
      continue
    body = tag[2:-2].strip()
    if tag.startswith("{{"):
      current.append(("expr", body, line))
      continue
    word = body.split(None, 1)[0] if body else ""
    rest = body[len(word) :].strip()
    if word == "set":
      target, eq, src = rest.partition("=")
      names = [n.strip() for n in target.split(",")]
      if not eq or not all(n.isidentifier() for n in names):
        raise RenderError(f"{name}:{line}: expected {{% set NAME = EXPR %}}")
      current.append(("set", target.strip(), src.strip(), line))
    elif word == "assert":
      current.append(("assert", rest, line))
    elif word in ("for", "if"):
      if word == "for":
        m2 = re.fullmatch(r"(.+?)\s+in\s+(.+)", rest, re.S)
        if not m2:
          raise RenderError(f"{name}:{line}: expected {{% for NAME in EXPR %}}")
        node = ("for", m2.group(1).strip(), m2.group(2).strip(), [], line)
      else:
        node = ("if", None, rest, [], line)
      current.append(node)
      stack.append((current, word, line))
      current = node[3]
    elif word in ("endfor", "endif"):
      if not stack or stack[-1][1] != word[3:]:
        raise RenderError(f"{name}:{line}: {word} without {word[3:]}")
      current = stack.pop()[0]
    else:
      raise RenderError(f"{name}:{line}: unknown tag {tag!r}")
  if stack:
    _, word, line = stack[-1]
    raise RenderError(f"{name}:{line}: {word} without end{word}")
  if pos < len(text):
    current.append(("text", text[pos:]))
  return root


@functools.lru_cache(maxsize=None)
def _compile(src, where):
  return compile(src, where, "eval")


def _eval(src, scope, where):
  try:
    # One dict for globals and the template's names: comprehensions see both.
    # pylint: disable-next=eval-used
    return eval(_compile(src, where), {**NAMESPACE, **scope})
  except RenderError as e:
    raise type(e)(f"{where}: {{{{ {src} }}}}: {e}") from None
  except Exception as e:  # pylint: disable=broad-except
    raise RenderError(
        f"{where}: {{{{ {src} }}}}: {type(e).__name__}: {e}"
    ) from None


def _bind(target, value, scope):
  names = [n.strip() for n in target.split(",")]
  if len(names) == 1:
    scope[names[0]] = value
  else:
    values = list(value)
    if len(values) != len(names):
      raise RenderError(f"cannot unpack {len(values)} values into {target}")
    scope.update(zip(names, values))


def _render_nodes(nodes, scope, name, out):
  for node in nodes:
    kind = node[0]
    if kind == "text":
      out.append(node[1])
    elif kind == "set":
      _, target, src, line = node
      _bind(target, _eval(src, scope, f"{name}:{line}"), scope)
    elif kind == "assert":
      _, src, line = node
      if not _eval(src, scope, f"{name}:{line}"):
        raise RenderError(
            f"{name}:{line}: the text's claim no longer holds: {src}"
        )
    elif kind == "if":
      _, _, src, body, line = node
      if _eval(src, scope, f"{name}:{line}"):
        _render_nodes(body, scope, name, out)
    elif kind == "for":
      _, target, src, body, line = node
      for value in _eval(src, scope, f"{name}:{line}"):
        inner = dict(scope)
        _bind(target, value, inner)
        _render_nodes(body, inner, name, out)
    else:  # expr
      _, src, line = node
      where = f"{name}:{line}"
      expr, *filters = _split_filters(src)
      value = _eval(expr, scope, where)
      try:
        for f in filters:
          # pylint: disable-next=eval-used
          fn = eval(_compile(f, where), {"__builtins__": {}}, FILTERS)
          value = fn(value)
        out.append(_text(value))
      except RenderError as e:
        raise type(e)(f"{where}: {{{{ {src} }}}}: {e}") from None
      except Exception as e:  # pylint: disable=broad-except
        raise RenderError(
            f"{where}: {{{{ {src} }}}}: {type(e).__name__}: {e}"
        ) from None


def render_template(text, name="<template>"):
  """The rendering of template `text` (`name` for messages)."""
  out = []
  _render_nodes(_parse(text, name), {}, name, out)
  return "".join(out)


# --- Line wrapping. ---

# A word that must not begin a line: it would start a list, heading, quote,
# table row or setext underline there.
_RISKY = re.compile(r"([-+*>]|#+|\d+[.)]|=+|-{2,}|[|#>].*)")
_ITEM = re.compile(r"(\s*)([-*+]|\d+[.)])\s+")
_SPECIAL = re.compile(r"\s*(\||#|<!--|```|$)")


def _wrap_words(words, first, rest, width):
  """Greedy filling; a risky word takes the words before it to the next line
  (as many as it needs for that line to start with a plain word)."""
  lines, line = [], []
  for w in words:
    indent = rest if lines else first
    if not line or len(indent) + len(" ".join(line + [w])) <= width:
      line.append(w)
    elif _RISKY.fullmatch(w) and len(line) > 1:
      moved = [line.pop(), w]  # until the new line starts with a plain word
      while _RISKY.fullmatch(moved[0]) and len(line) > 1:
        moved.insert(0, line.pop())
      lines.append(indent + " ".join(line))
      line = moved
    else:
      lines.append(indent + " ".join(line))
      line = [w]
  lines.append((rest if lines else first) + " ".join(line))
  return lines


def reflow(text, width=80):
  """Paragraphs and list items of Markdown `text` refilled to `width`
  columns; tables, headings, code blocks and HTML comments kept as they are."""
  out, para, fenced, comment = [], [], False, False

  def flush():
    if para:
      m = _ITEM.match(para[0])
      if m:
        first = m.group(0).rstrip() + " "
        rest = " " * len(first)
        words = " ".join([para[0][m.end() :]] + para[1:]).split()
      else:
        first = rest = re.match(r"\s*", para[0]).group(0)
        words = " ".join(para).split()
      out.extend(_wrap_words(words, first, rest, width))
      para.clear()

  for line in text.split("\n"):
    if fenced or comment:
      out.append(line)
      fenced = fenced and not line.lstrip().startswith("```")
      comment = comment and "-->" not in line
      continue
    if _SPECIAL.match(line) or _ITEM.match(line):
      flush()
      if _ITEM.match(line):
        para.append(line)
        continue
      out.append(line)
      fenced = line.lstrip().startswith("```")
      comment = line.lstrip().startswith("<!--") and "-->" not in line
      continue
    para.append(line)
  flush()
  return "\n".join(out)


# --- Files. ---


def _splice(current, block, path):
  """`current` with the text between BEGIN and END replaced by `block`."""
  if current.count(BEGIN) != 1 or current.count(END) != 1:
    raise RenderError(f"{path}: needs the markers once each:\n{BEGIN}\n{END}")
  head, rest = current.split(BEGIN, 1)
  _, tail = rest.split(END, 1)
  return head + BEGIN + "\n" + block.rstrip("\n") + "\n" + END + tail


def render(repo=None):
  """{output path: its text as the templates and JSONs make it}."""
  repo = repo or REPO
  texts = {}
  for out, (template, block_only) in OUTPUTS.items():
    text = reflow(render_template((repo / template).read_text(), template))
    if block_only:
      text = _splice((repo / out).read_text(), text, out)
    texts[out] = text
  return texts


def check(repo=None):
  """The outputs that differ from their rendering (empty: all agree)."""
  repo = repo or REPO
  return [
      out
      for out, text in render(repo).items()
      if (repo / out).read_text() != text
  ]


def main(argv=None):
  parser = argparse.ArgumentParser(
      description=__doc__.split("\n\n", 1)[0],
      formatter_class=argparse.RawDescriptionHelpFormatter,
  )
  parser.add_argument("mode", choices=("write", "check"))
  args = parser.parse_args(argv)
  try:
    if args.mode == "write":
      for out, text in render().items():
        path = REPO / out
        if path.read_text() != text:
          path.write_text(text)
          print(f"wrote {out}")
        else:
          print(f"{out} unchanged")
      return 0
    stale = check()
  except RenderError as e:
    print(f"results_doc: {e}", file=sys.stderr)
    return 2
  for out in stale:
    print(
        f"results_doc: {out} differs from its template and results/ JSONs"
        " (python3 scripts/results_doc.py write)",
        file=sys.stderr,
    )
  return 1 if stale else 0


if __name__ == "__main__":
  sys.exit(main())
