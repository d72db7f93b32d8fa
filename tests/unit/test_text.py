"""The text pipeline: fastBPE codes read faithfully, typographic quotes detokenised."""
import os
import subprocess
import sys

import pytest

from conftest import DEMO, REPO, read_lines
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.integration.text import BpeCodes, detokenize, subword_nmt_codes, tokenize

# fastBPE format: "a b count", merges in file order, the word's last character carries </w>.
FASTBPE = ["t h 50", "th e</w> 40", "i n 30", "in g</w> 20"]


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def test_fastbpe_codes_apply_word_final_merges(tmp_path):
    # By hand: "the" = t h e</w> → th e</w> → the</w>; "thing" = t h i n g</w> → th i n g</w>
    # → th in g</w> → th ing</w>. Read as v0.1 codes they would give "th@@ e th@@ in@@ g".
    bpe = BpeCodes(write(tmp_path / "codes", FASTBPE))
    assert bpe.apply("the thing") == "the th@@ ing"
    assert subword_nmt_codes(FASTBPE) == ["#version: 0.2", "t h", "th e</w>", "i n", "in g</w>"]


def test_headerless_subword_nmt_codes_stay_version_0_1(tmp_path):
    # Two columns and no header is what subword-nmt < 0.2 wrote: those codes are v0.1.
    bpe = BpeCodes(write(tmp_path / "codes", ["t h", "th e</w>"]))
    assert bpe.apply("the") == "th@@ e"


def test_malformed_fastbpe_codes_are_refused(tmp_path):
    with pytest.raises(FairseqStreamError, match=r"codes:2: not a fastBPE code"):
        BpeCodes(write(tmp_path / "codes", ["t h 5", "th e</w> x"]))


def test_demo_codes_in_fastbpe_format_give_the_same_subwords(tmp_path):
    """The demo's v0.2 codes written as fastBPE (counts, no header) segment the demo text identically."""
    codes = read_lines(os.path.join(DEMO, "bpe.codes"))
    fast = [f"{line} {len(codes) - n}" for n, line in enumerate(codes[1:], 1)]
    lines = [tokenize(s, "en") for s in read_lines(os.path.join(DEMO, "test.en"), 40)]
    reference = BpeCodes(os.path.join(DEMO, "bpe.codes")).apply_all(lines)
    assert BpeCodes(write(tmp_path / "fast.codes", fast)).apply_all(lines) == reference
    assert any("@@" in line for line in reference)


@pytest.mark.slow  # a subprocess
def test_convert_codes_command(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "fairseq_stream.tools.text", "convert-codes"], input="\n".join(FASTBPE),
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["#version: 0.2", "t h", "th e</w>", "i n", "in g</w>"]


@pytest.mark.parametrize("lang, text", [
    ("en", "“Don’t die.”"),
    ("en", "He said: ‘I’m here’ and left."),
    ("en", "The disciples’ feet were washed; it’s Yahweh’s."),
    ("en", "Yahweh said, “What have you done?” He said, “I will not.”"),
    ("en", "It's the Lord's \"house\"."),
    ("es", "«No te mueras», dijo."),
    ("es", "“¿Qué has hecho?”, dijo él. “¡No!”"),
    ("de", "Er sagte: „Das geht nicht.“ Dann ‚ja‘."),
    ("fr", "« L’eau », dit-il."),
])
def test_detokenize_restores_typographic_quotes(lang, text):
    assert detokenize(tokenize(text, lang), lang) == text


def test_demo_model_output_keeps_the_apostrophe(demo_session):
    """The shipped model's tokens for "“Don’t die.”" (Moses-split) come back as one word."""
    line = "“ Don ’ t die . ”"
    assert detokenize(line, "en") == "“Don’t die.”"
    tokens = demo_session.task.target_dictionary.encode_line(
        BpeCodes(os.path.join(DEMO, "bpe.codes")).apply(line), add_if_not_exist=False)
    assert demo_session.detokenize(tokens) == "“Don’t die.”"


def test_fairseq_moses_tokenizer_attaches_the_closing_curly_quote():
    """fairseq's --tokenizer moses, as our tasks build it, decodes the D- lines with our detokeniser:
    the demo model's answer to "Y dijo Dios: Sea la luz." once printed `light. ”`."""
    from argparse import Namespace

    from fairseq.data import encoders
    from fairseq_stream.integration.task import TranslationStreamTask

    args = Namespace(tokenizer="moses", source_lang="es", target_lang="en", moses_no_dash_splits=False,
                     moses_no_escape=False)
    task = object.__new__(TranslationStreamTask)  # build_tokenizer reads nothing of the task
    tokenizer = task.build_tokenizer(args)
    assert encoders.build_tokenizer(args).decode("God said , “ Let the light be light . ”") == \
        "God said, “Let the light be light. ”"  # fairseq's own decoding, the bug
    assert tokenizer.decode("God said , “ Let the light be light . ”") == "God said, “Let the light be light.”"
    assert tokenizer.encode("Y dijo Dios: «Sea la luz».") == encoders.build_tokenizer(args).encode(
        "Y dijo Dios: «Sea la luz».")
    assert task.build_tokenizer(Namespace(tokenizer=None)) is None


def test_the_documented_module_command_prints_no_runpy_warning():
    """``python -m fairseq_stream.tools.text`` (the README's recipe): the package import must not import
    the module first, or runpy warns that it was "found in sys.modules" on every call."""
    proc = subprocess.run([sys.executable, "-m", "fairseq_stream.tools.text", "tokenize", "--lang", "es"], cwd=REPO,
                          input="Y dijo Dios: Sea la luz.\n", capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout == "Y dijo Dios : Sea la luz .\n"
    assert "RuntimeWarning" not in proc.stderr, proc.stderr
