"""docs/results.md and README.md's results table equal their rendering from
the templates and results/*.json (scripts/results_doc.py), and the script
names the file and key of a reference that is not there."""

import importlib.util
import pathlib
import shutil

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]


def _load_script():
  spec = importlib.util.spec_from_file_location(
      "results_doc", REPO / "scripts" / "results_doc.py"
  )
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


results_doc = _load_script()


def test_committed_docs_equal_their_rendering(capsys):
  assert results_doc.main(["check"]) == 0, capsys.readouterr().err


def _copy(tmp_path, edit=None):
  """A repository in `tmp_path`: the templates and outputs, results/ linked."""
  for out, (template, _) in results_doc.OUTPUTS.items():
    for name in (out, template):
      (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
      shutil.copy(REPO / name, tmp_path / name)
  (tmp_path / "results").symlink_to(REPO / "results")
  if edit:
    path, old, new = edit
    text = (tmp_path / path).read_text()
    assert old in text
    (tmp_path / path).write_text(text.replace(old, new, 1))


@pytest.mark.parametrize("out", ["docs/results.md", "README.md"])
def test_check_names_a_hand_edited_figure(tmp_path, monkeypatch, capsys, out):
  old = "**.804 / .734 / .636 / .681 / .560**"
  if out == "README.md":
    old = "| .804 / .734 / .636 / .681 / .560 |"
  _copy(tmp_path, (out, old, old.replace(".681", ".682")))
  monkeypatch.setattr(results_doc, "REPO", tmp_path)
  assert results_doc.main(["check"]) == 1
  err = capsys.readouterr().err
  assert f"{out} differs from its template" in err
  assert ("README.md" in err) == (out == "README.md")


def test_a_missing_key_names_the_template_line_file_and_key():
  template = (
      "intro\n"
      "{% set run = load('clutrr/clutrr_et_k23_paper.json') %}\n"
      "k = 6: {{ run.final.accuracies.k6 | a3 }}\n"
      "k = 11: {{ run.final.accuracies.k11 | a3 }}\n"
  )
  with pytest.raises(results_doc.KeyMissing) as e:
    results_doc.render_template(template, "t.md.in")
  message = str(e.value)
  assert message.startswith("t.md.in:4: ")
  assert "results/clutrr/clutrr_et_k23_paper.json" in message
  assert "no key 'final.accuracies.k11'" in message


def test_a_null_on_the_key_path_is_named():
  # This COGS JSON (a kept earlier run) has `final.gen_per_category`; its
  # `best` is null.
  template = (
      "{% set r = load('reproductions/cogs_graph_edge_transformer_cpu"
      "__full_eval__before_bergen_init__results.json') %}"
      "{{ r.best.gen_per_category.cp_recursion | a3 }}"
  )
  with pytest.raises(results_doc.KeyMissing, match="'best' is null"):
    results_doc.render_template(template, "t.md.in")


def test_check_mode_fails_with_the_message(tmp_path, monkeypatch, capsys):
  _copy(
      tmp_path,
      (
          "docs/readme_results.md.in",
          "main.reproduction.ours.bellman_ford",
          "main.reproduction.ours.bellman_fordd",
      ),
  )
  monkeypatch.setattr(results_doc, "REPO", tmp_path)
  assert results_doc.main(["check"]) == 2
  err = capsys.readouterr().err
  assert "docs/readme_results.md.in:" in err
  assert "results/reproductions/readme_main_job_cpu__results.json" in err
  assert "no key 'reproduction.ours.bellman_fordd'" in err
  assert results_doc.main(["write"]) == 2  # and writes nothing
  assert (tmp_path / "README.md").read_text() == (
      REPO / "README.md"
  ).read_text()


def test_a_missing_file_is_named():
  with pytest.raises(results_doc.KeyMissing, match="results/nope.json"):
    results_doc.render_template("{{ load('nope.json').x }}")


def test_a_claim_the_numbers_contradict_stops_the_rendering():
  template = (
      "{% set run = load('clutrr/clutrr_et_k23_paper.json') %}\n"
      "{% assert run.final.accuracies.k6 > 0.9 %}\n"
  )
  with pytest.raises(results_doc.RenderError, match="t:2: the text's claim"):
    results_doc.render_template(template, "t")


def test_spread_is_the_sample_sd():
  assert results_doc.sd([1.0, 2.0, 3.0]) == pytest.approx(1.0)
  assert results_doc.FILTERS["pm"]("a3")([0.8, 0.9]) == ".850 +- .071"
  assert results_doc.mean([[1, 2], [3, 4]]) == [2, 3]


def test_formats():
  f = results_doc.FILTERS
  assert f["a3"]([1.0, 0.8224, -0.0004, 0.05]) == [
      "1.00",
      ".822",
      ".000",
      ".050",
  ]
  assert f["a2"](-0.26) == "-.26"
  assert f["int"](23978.6) == "23,979"
  assert results_doc.render_template("{{ [1, 2] }} {{ 3500 }}") == "1 / 2 3,500"
  with pytest.raises(results_doc.RenderError, match="needs a format"):
    results_doc.render_template("{{ 0.5 }}")


def test_reflow_keeps_markdown_structure():
  text = (
      "a b c d - e f\n\n| x |\n```\nlong long\n```\n- item one two\n  three\n"
  )
  out = results_doc.reflow(text, width=5)
  assert "| x |\n```\nlong long\n```" in out
  assert not any(line.startswith("- ") for line in out.split("\n")[:4])
  assert "- item\n  one\n  two\n  three" in out
