"""Every registered strategy: fairseq's output contract, its declared capabilities, clear refusals."""

import pytest
import torch

from helpers import required_opts

from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.search.registry import get_search, search_names

STANDARD = [n for n in search_names() if n != "ib-beam"]
N = 6


def gen_for(name: str) -> dict:
    return {"beam": 1 if not get_search(name).capabilities.beam else 3, "max_len_a": 1.2, "max_len_b": 10}


def opts_for(name: str) -> dict:
    """What a strategy cannot run without: a speculative draft (the demo's)."""
    return required_opts(name)


@pytest.mark.parametrize("name", STANDARD)
def test_output_contract_on_the_trained_model(demo_session, demo_sources, name):
    data = demo_session.encode(demo_sources[:N])
    result = demo_session.translate(data, search=name, gen=gen_for(name), opts=opts_for(name), batch_size=4)
    assert len(result.hypos) == N
    eos = demo_session.task.target_dictionary.eos()
    for nbest in result.hypos:
        assert nbest, "h[0] must exist"
        for h in nbest:
            assert set(h) >= {"tokens", "score", "attention", "alignment", "positional_scores"}
            assert h["tokens"].dtype == torch.long and int(h["tokens"][-1]) == eos
            assert int((h["tokens"] == eos).sum()) == 1
            assert h["positional_scores"].numel() == h["tokens"].numel()
    assert result.stats.timesteps > 0 and result.stats.expansions > 0
    assert all(s for s in result.strings)


@pytest.mark.parametrize("name", [n for n in STANDARD if not get_search(n).capabilities.beam])
def test_strategies_without_beam_refuse_it_with_the_reason(demo_session, name):
    with pytest.raises(FairseqStreamError, match="--beam 5.*(fixed point|Limitations|one prefix per sentence)"):
        demo_session.build_generator(name, {"beam": 5}, {})


@pytest.mark.parametrize("name", [n for n in STANDARD if get_search(n).capabilities.nbest and n != "beam"])
def test_nbest_lists(demo_session, demo_sources, name):
    data = demo_session.encode(demo_sources[:3])
    result = demo_session.translate(data, search=name, gen={"beam": 4, "nbest": 3, "max_len_b": 30}, opts=opts_for(name))
    variable = name.startswith("var-")
    for nbest in result.hypos:
        # Variable-width beams may prune every alternative: at least one, at most --nbest.
        assert 1 <= len(nbest) <= 3 if variable else len(nbest) == 3
        scores = [h["score"] for h in nbest]
        assert scores == sorted(scores, reverse=True)
        assert len({tuple(h["tokens"].tolist()) for h in nbest}) == len(nbest)
    if variable:  # without pruning the same strategy fills the list
        wide = demo_session.translate(data, search=name, gen={"beam": 4, "nbest": 3, "max_len_b": 30},
                                      opts={"prune_abs_threshold": float("inf"), "prune_max_cands_per_node": 4})
        assert all(len(nbest) == 3 for nbest in wide.hypos)


def test_standard_checkpoint_with_ib_beam_is_refused(demo_session):
    with pytest.raises(FairseqStreamError, match="IBDecoder-family checkpoints"):
        demo_session.build_generator("ib-beam", {"beam": 4}, {})


def _strategy_classes():
    return [(n, get_search(n).strategy, get_search(n).capabilities.hooks) for n in search_names()
            if get_search(n).strategy is not None]


@pytest.mark.quick_every_case
@pytest.mark.parametrize("name,cls,hooks", _strategy_classes(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_optional_hook_a_strategy_has_is_declared(name, cls, hooks):
    """A strategy has a hook's methods exactly where its capabilities declare the hook (the scheduler calls only
    declared hooks: a method left undeclared would never run, silently)."""
    from fairseq_stream.search.interface import HOOKS

    for hook, methods in HOOKS.items():
        has = all(callable(getattr(cls, m, None)) for m in methods)
        assert has == (hook in hooks), f"--search {name}: hook {hook!r} declared {hook in hooks}, methods {has}"


def test_a_declared_hook_without_its_methods_is_refused_when_it_registers():
    from fairseq_stream.search.registry import Capabilities, register_search, unregister_search

    class NoRegion:
        pass

    for hooks, says in ((frozenset({"region"}), "has no output_tail, share_pools"), (frozenset({"teleport"}), "unknown hook")):
        with pytest.raises(ValueError, match=says):
            register_search("toy-hooks", summary="a toy", capabilities=Capabilities(hooks=hooks))(NoRegion)
        unregister_search("toy-hooks")


def test_the_scheduler_finds_no_hook_by_name():
    """The scheduler branches on the declared hooks, never on ``getattr``/``hasattr`` of a strategy."""
    import inspect

    from fairseq_stream.engine import scheduler

    source = inspect.getsource(scheduler)
    assert "getattr(" not in source and "hasattr(" not in source
