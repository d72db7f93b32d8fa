"""Extending the package: a strategy in one file and one registration (the docs' example), a user's pruning rule
from a --user-dir, and the package's own rule that no function grows past 60 lines."""
import ast
import math
from argparse import Namespace
from pathlib import Path

import pytest

import fairseq_stream  # noqa: F401  (registers the strategies)
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.integration.build import build_generator
from fairseq_stream.search.registry import search_names, unregister_search
from helpers import fake_task, gen_cfg, make_dictionary, sample_for, stream_opts, tiny_transformer

REPO = Path(__file__).resolve().parents[2]
D = make_dictionary([f"w{i}" for i in range(40)])
SOURCES = [5 + (7 * i) % 30 for i in range(11)]


@pytest.fixture
def toy_registered():
    """The docs' example strategy (user_dir_examples/greedy_strategy), registered by its import."""
    import importlib
    import sys

    sys.path.insert(0, str(REPO / "user_dir_examples"))
    try:
        module = importlib.import_module("greedy_strategy")
        if "my-greedy" not in search_names():
            importlib.reload(module)  # registered again after an earlier test's unregister
    finally:
        sys.path.remove(str(REPO / "user_dir_examples"))
    yield "my-greedy"
    unregister_search("my-greedy")


def _decode(name, model, gen=None, **opts):
    g = build_generator(name, fake_task(D), [model], gen_cfg(**{"beam": 1, "max_len_a": 0, "max_len_b": 8, **(gen or {})}),
                        stream_opts(stream_capacity=3, **opts))
    return [[(h["tokens"].tolist(), round(float(h["score"]), 6)) for h in x] for x in g.generate([model], sample_for(D, SOURCES))]


def test_the_docs_example_strategy_is_one_file_and_one_registration(toy_registered):
    """docs/architecture.md shows the example whole. Streamed (capacity 3, refill at ε = 0.25: groups merge through the generic concat), its
    output is fixed-width beam search's at k = 1; its capabilities refuse --beam 2."""
    model = tiny_transformer(D, layers=1)
    assert _decode(toy_registered, model) == _decode("fixed-ours", model)
    with pytest.raises(FairseqStreamError, match="my-greedy with --beam 2"):
        _decode(toy_registered, model, gen={"beam": 2})
    with pytest.raises(FairseqStreamError, match="does not read --jacobi-block"):
        _decode(toy_registered, model, jacobi_block=5)


def test_the_architecture_doc_shows_the_example_strategy_whole():
    example = (REPO / "user_dir_examples" / "greedy_strategy" / "__init__.py").read_text(encoding="utf-8")
    code = example.split('"""\n', 1)[1].strip()  # without the module docstring
    doc = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert code in doc, "docs/architecture.md must show user_dir_examples/greedy_strategy/__init__.py's code whole"
    lines = [line for line in code.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert len(lines) <= 40, len(lines)


def test_user_pruning_rule_from_a_user_dir():
    from fairseq import utils

    utils.import_user_module(Namespace(user_dir=str(REPO / "user_dir_examples" / "prune_rule")))
    model = tiny_transformer(D, layers=1)
    runs = {}
    for rules in (None, "max-width:1"):
        g = build_generator("var-batch", fake_task(D), [model], gen_cfg(beam=4, max_len_a=0, max_len_b=8),
                            stream_opts(prune_rules=rules, prune_abs_threshold=math.inf))
        g.generate([model], sample_for(D, SOURCES))
        runs[rules] = g.stats
    # One candidate per sentence survives each step: one decoder row per sentence in flight.
    assert runs["max-width:1"].expansions == runs["max-width:1"].active_sentences
    assert runs[None].expansions > runs[None].active_sentences
    with pytest.raises(FairseqStreamError, match="max-width:N needs a whole number"):
        build_generator("var-batch", fake_task(D), [model], gen_cfg(beam=4), stream_opts(prune_rules="max-width:x"))


def test_unknown_pruning_rule_is_a_one_line_error():
    model = tiny_transformer(D, layers=1)
    with pytest.raises(FairseqStreamError, match="unknown --prune-rules 'nope'; registered rules: .*ap") as err:
        build_generator("var-stream", fake_task(D), [model], gen_cfg(beam=4), stream_opts(prune_rules="rpl:0.1,nope"))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("ended", ["prune", "keep"])
def test_prune_rules_compose_like_the_flags(ended):
    """``--prune-rules ap:1.0,rpl:0.2`` is ``--prune-abs-threshold 1 --prune-rel-local-threshold 0.2``,
    under either ``--prune-ended`` (a rule from --prune-rules inherits it, as the flags' rules do)."""
    model = tiny_transformer(D, layers=1)
    by_flags = _decode("var-batch", model, {"beam": 4}, prune_abs_threshold=1.0, prune_rel_local_threshold=0.2,
                       prune_ended=ended)
    by_rules = _decode("var-batch", model, {"beam": 4}, prune_abs_threshold=math.inf, prune_rules="ap:1.0,rpl:0.2",
                       prune_ended=ended)
    assert by_flags == by_rules
    rules = build_generator("var-batch", fake_task(D), [model], gen_cfg(beam=4),
                            stream_opts(prune_rules="ap:1.0", prune_ended=ended)).config.pruning.extra
    assert rules[0].ended == ended


def test_no_function_of_the_package_is_longer_than_60_lines():
    long = []
    for path in sorted((REPO / "fairseq_stream").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60:
                long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert not long, long
