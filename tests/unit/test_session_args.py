"""TranslationSession's arguments (tools/session_args.py): a wrong type or value is one FairseqStreamError
line naming the argument and what it expects (issue 80: raw TypeErrors, numpy's UFuncTypeError, an
interpreter exit through argparse, ``encode("a string")`` decoded one character a sentence, and
``batch_size=-1``, ``stream_capacity=2.5``, ``required_batch_size_multiple=0`` taken)."""
from __future__ import annotations

import os
import re

import pytest

from conftest import DEMO
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.tools.session import TranslationSession

CKPT = os.path.join(DEMO, "checkpoint.pt")
LANGS = ["--source-lang", "es", "--target-lang", "en"]


@pytest.fixture(scope="module")
def data(demo_session):
    return demo_session.encode(["Y dijo Dios."])


# (call, what the one line must hold); the session is the shared demo_session
CASES = {
    "translate-none": (lambda s, d: s.translate(None), ["translate(dataset)", "session.encode(lines)", "None"]),
    "load-checkpoints-none": (lambda s, d: TranslationSession.load(DEMO, None), ["load(checkpoints)", "a path", "None"]),
    "load-extra-args-string": (lambda s, d: TranslationSession.load(DEMO, CKPT, extra_args="--source-lang es"),
                               ["load(extra_args=...)", "list of command-line words", "shlex.split"]),
    "gen-beam-none": (lambda s, d: s.translate(d, gen={"beam": None}), ["--beam must be an integer, got None"]),
    "gen-string": (lambda s, d: s.translate(d, gen="beam=5"), ["translate(gen=...)", "a dict", "'beam=5' (str)"]),
    "gen-lenpen-string": (lambda s, d: s.translate(d, gen={"lenpen": "1"}), ["--lenpen must be a number, got '1'"]),
    "opts-list": (lambda s, d: s.translate(d, opts=["stream_capacity", 16]), ["translate(opts=...)", "a dict"]),
    "opts-capacity-float": (lambda s, d: s.translate(d, search="var-stream", opts={"stream_capacity": 2.5}),
                            ["--stream-capacity must be an integer or None, got 2.5"]),
    "encode-none-line": (lambda s, d: s.encode([None]), ["encode(lines): line 0", "a str", "None"]),
    "encode-int-line": (lambda s, d: s.encode(["a", 123]), ["encode(lines): line 1", "a str", "123 (int)"]),
    "encode-one-string": (lambda s, d: s.encode("a string"), ["encode(lines)", "not one string", "[text]"]),
    "max-tokens-string": (lambda s, d: s.translate(d, max_tokens="100"), ["translate(max_tokens=...)", "'100' (str)"]),
    "batch-size-negative": (lambda s, d: s.translate(d, batch_size=-1), ["translate(batch_size=...)", "integer >= 1",
                                                                         "-1"]),
    "required-multiple-zero": (lambda s, d: s.translate(d, required_batch_size_multiple=0),
                               ["translate(required_batch_size_multiple=...)", "integer >= 1", "got 0"]),
    "search-none": (lambda s, d: s.translate(d, search=None), ["translate(search=...)", "a --search name"]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_wrong_argument_is_one_line_naming_it(demo_session, data, name):
    call, needles = CASES[name]
    with pytest.raises(FairseqStreamError) as refused:
        call(demo_session, data)
    message = str(refused.value)
    assert "\n" not in message and message.startswith("TranslationSession."), message
    for needle in needles:
        assert needle in message, message


def test_the_values_callers_pass_are_still_taken(demo_session, data):
    """What the API documents or callers pass: True for --prune-auto, an int for a float option, a tuple of
    lines, a generator of lines; the checks refuse only what failed."""
    result = demo_session.translate(demo_session.encode(line for line in ("Y dijo Dios.",)), search="var-stream",
                                    gen={"beam": 2, "lenpen": 1}, opts={"prune_auto": True, "stream_capacity": 4},
                                    batch_size=1, required_batch_size_multiple=1, max_tokens=1000)
    assert result.strings == demo_session.translate(data, search="var-stream", gen={"beam": 2}).strings
    assert len(demo_session.encode(("a", "b"))) == 2


def test_a_non_integer_generation_option_keeps_the_runs_own_wording(demo_session):
    """The run's own check (engine/validation.py) says "--beam must be an integer, got 2.7"; the session's says the same."""
    with pytest.raises(FairseqStreamError, match=re.escape("--beam must be an integer, got 2.7")):
        demo_session.build_generator("var-stream", {"beam": 2.7}, {})
