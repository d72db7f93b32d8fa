"""The step-backend test matrix: every fused operator × every backend available here × the shared
cases of ``tests/step_cases.py``, bit-identical to the reference over whole searches.

The C++ operators run in process (where a compiler is, they must build: a silent fallback would
hide a broken kernel); the Triton kernels under Triton's interpreter on the CPU (one subprocess
per operator: the interpreter must be on before Triton is imported) and compiled on CUDA where
there is one (``gpu``). Then the trained demo model end to end, the packet layout the C++
sources follow, the runner's fallbacks and records, and the kernel cache key.
"""
from __future__ import annotations

import logging
import os
import shutil
import textwrap

import pytest
import torch

import step_cases as cases
from fairseq_stream.ops import backends, extension, packets
from fairseq_stream.engine.stats import DecodeStats

HAVE_CXX = shutil.which(os.environ.get("CXX", "c++")) is not None
MATRIX = [(op, case) for op, (_, op_cases) in cases.RUNNERS.items() for case in op_cases]


def _ids(param):
    return cases.case_id(param) if isinstance(param, dict) else str(param)


# ---- C++ -------------------------------------------------------------------------------------
@pytest.mark.skipif(not HAVE_CXX, reason="no C++ compiler")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("op,case", MATRIX, ids=_ids)
def test_cpp_equals_the_reference(op, case, dtype):
    run, _ = cases.RUNNERS[op]
    seen = [run(case, "cpp", seed, dtype) for seed in range(3)]
    assert all(s["backend"] == ["cpp"] for s in seen)  # the operator ran, not a fallback
    assert max(s["steps"] for s in seen) > 2


@pytest.mark.parametrize("backend", [pytest.param("cpp", marks=pytest.mark.skipif(not HAVE_CXX, reason="no C++ compiler")),
                                     "reference"])
@pytest.mark.parametrize("case", [cases.BEAM_CASES[i] for i in (0, 1, 2, 5, 12, 15)], ids=_ids)
def test_a_beam_step_over_a_bucket_state_and_a_row_bucket_equals_the_reference(backend, case):
    """The padding contract (ops/beam_step.py) as a static step's region runs the search step: inert sentences
    after the live ones, padding rows (slot −1, garbage scores), finished sentences made inert on the device —
    the outcome of every step is the plain step's, by the C++ operator and by the reference."""
    for seed in range(2):
        seen = cases.run_beam_in_bucket(case, backend, seed, torch.float64)
        assert seen["backend"] == [backend] and seen["steps"] > 2
        # one bucket state a group, kept while its sentences end; a step searched after the region that finished some
        # splits the state off it (one more)
        assert seen["buckets"] <= 2 + seen["steps"] // 3


@pytest.mark.parametrize("backend", [pytest.param("cpp", marks=pytest.mark.skipif(not HAVE_CXX, reason="no C++ compiler")),
                                     "reference"])
@pytest.mark.parametrize("case", cases.JACOBI_CASES, ids=_ids)
def test_a_jacobi_iteration_over_a_bucket_state_and_a_row_bucket_equals_the_reference(backend, case):
    """A Jacobi iteration as a static step's region runs it: inert sentences after the live ones (past their
    maximum length: done at once, one token each, which the host subtracts), garbage predictions on their rows,
    finished sentences made inert on the device — every iteration's outcome is the plain iteration's, the
    accepted-token count too, by the C++ operator and by the reference."""
    for seed in range(2):
        seen = cases.run_jacobi_in_bucket(case, backend, seed, torch.float64)
        assert seen["backend"] == [backend] and seen["steps"] > 2
        assert seen["accepted"] == seen["expected_accepted"]


@pytest.mark.parametrize("backend", [pytest.param("cpp", marks=pytest.mark.skipif(not HAVE_CXX, reason="no C++ compiler")),
                                     "reference"])
@pytest.mark.parametrize("case", cases.IB_CASES, ids=_ids)
def test_an_ib_step_over_a_bucket_state_and_a_row_bucket_equals_the_reference(backend, case):
    """ib-beam's multi-word step as a static step's region runs it: inert sentences after the live ones (no
    candidate: done at once, no hypothesis, no row, which the host subtracts), padding rows (slot −1) with garbage
    candidates, the new state and next rows written into the bucket state — every step's outcome is the plain step's,
    by the C++ operator and by the reference."""
    for seed in range(2):
        seen = cases.run_ib_in_bucket(case, backend, seed, torch.float64)
        assert seen["backend"] == [backend] and seen["steps"] >= 2


@pytest.mark.skipif(not HAVE_CXX, reason="no C++ compiler")
def test_the_cases_reach_what_they_are_for():
    """Waiting ended candidates occur, and boundary thresholds (δ = 0, rp = 1, δ below float
    resolution) never end a sentence without a hypothesis."""
    waiting = sum(cases.run_beam(dict(beam=5), "cpp", seed, torch.float32)["waiting"] for seed in range(3))
    assert waiting > 0
    for case in (dict(beam=4, abs_threshold=0.0), dict(beam=3, rel_threshold=1.0, reference="active"),
                 dict(beam=5, abs_threshold=1e-12, reference="normalized")):
        for seed in range(3):
            assert cases.run_beam(case, "cpp", seed, torch.float32)["empty"] == 0, case


# ---- Triton ----------------------------------------------------------------------------------
TRITON_CHECK = textwrap.dedent("""
    import torch
    import step_cases as cases
    run, op_cases = cases.RUNNERS[{op!r}]
    for i, case in enumerate(op_cases):
        if "rungs" in case or "final_per_token" in case:  # the C++ operator only
            continue
        alternate = [torch.float64 if i % 2 else torch.float32]  # one seed each: the interpreter is slow
        for dtype in ([torch.float32, torch.float64] if {both_dtypes} else alternate):
            assert run(case, "triton", i, dtype)["backend"] == ["triton"], case
    if {op!r} == "beam_step":  # the padding contract: over a bucket state and a row bucket (the static step's region)
        for i in (0, 1, 12):
            assert cases.run_beam_in_bucket(cases.BEAM_CASES[i], "triton", i, torch.float32)["backend"] == ["triton"]
    if {op!r} == "jacobi_step":  # inert sentences after the live ones (the static step's region)
        for i in (0, 2, 3, 6):
            seen = cases.run_jacobi_in_bucket(cases.JACOBI_CASES[i], "triton", i, torch.float32)
            assert seen["backend"] == ["triton"] and seen["accepted"] == seen["expected_accepted"]
    if {op!r} == "ib_step":  # padding rows and inert sentences (the static step's region)
        for i in (0, 3, 4, 7):
            assert cases.run_ib_in_bucket(cases.IB_CASES[i], "triton", i, torch.float32)["backend"] == ["triton"]
    print("ok")
""")
# ib-beam end to end on a random IBDecoder and IMDecoder: the reference and the Triton kernels
# give the same hypotheses (tokens, scores, positional scores) in float32 and float64
IB_TRANSLATE_CHECK = textwrap.dedent("""
    import torch
    from helpers import fake_task, gen_cfg, make_dictionary, sample_for, stream_opts, tiny_ib_model
    from fairseq_stream.integration.build import build_generator
    d = make_dictionary([f"w{i}" for i in range(30)])
    for h, c, dtype in ((2, 1, torch.float32), (4, 1, torch.float64)):
        model = tiny_ib_model(d, h=h, c=c, dtype=dtype)
        out = {}
        for backend in ("reference", "triton"):
            gen = build_generator("ib-beam", fake_task(d), [model], gen_cfg(beam=3, nbest=3, max_len_a=0, max_len_b=9),
                                  stream_opts(search="ib-beam", step_backend=backend))
            hypos = gen.generate([model], sample_for(d, [5, 9, 14, 20, 23]))
            out[backend] = [[(x["tokens"].tolist(), x["score"], x["positional_scores"].tolist()) for x in n]
                            for n in hypos]
            assert gen.stats.step_backends == {"ib_step": [backend]}, gen.stats.step_backends
        assert out["reference"] == out["triton"], (h, c)
    print("ok")
""")


@pytest.mark.slow  # the Triton interpreter: ~1 min per operator on 2 cores
@pytest.mark.parametrize("op", ["beam_step", "jacobi_step", "ib_step"])
def test_triton_equals_the_reference_under_the_interpreter(op):
    pytest.importorskip("triton")
    from helpers import run_under_triton_interpreter

    # ib_step: every case in float32 and float64 (its steps are few: ~30 s in all)
    proc = run_under_triton_interpreter(TRITON_CHECK.format(op=op, both_dtypes=op == "ib_step"))
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


@pytest.mark.slow  # the Triton interpreter: ~10 s
def test_ib_beam_translates_alike_by_the_reference_and_triton_under_the_interpreter():
    pytest.importorskip("triton")
    from helpers import run_under_triton_interpreter

    proc = run_under_triton_interpreter(IB_TRANSLATE_CHECK, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


@pytest.mark.gpu
@pytest.mark.parametrize("op,case", [m for m in MATRIX if not {"rungs", "final_per_token"} & set(m[1])], ids=_ids)
def test_triton_equals_the_reference_on_cuda(op, case):
    run, _ = cases.RUNNERS[op]
    extra = {"score_tolerance": 1e-4} if op == "jacobi_step" else {}  # a GPU scan may round the sum differently
    for dtype in (torch.float32, torch.float64):
        assert run(case, "triton", 0, dtype, device="cuda", **extra)["backend"] == ["triton"]


@pytest.mark.gpu
@pytest.mark.parametrize("case", cases.IB_CASES, ids=_ids)
def test_ib_step_runs_on_cuda_by_the_reference_under_auto_and_by_the_triton_kernels_when_asked(case):
    assert cases.run_ib(case, "auto", 0, torch.float64, device="cuda")["backend"] == ["reference"]
    assert cases.run_ib(case, "triton", 0, torch.float64, device="cuda")["backend"] == ["triton"]


# ---- the trained demo model ------------------------------------------------------------------
@pytest.mark.skipif(not HAVE_CXX, reason="no C++ compiler")
@pytest.mark.parametrize("search,gen,opts", [
    ("var-stream", {"beam": 5}, {}),
    ("fixed-ours", {"beam": 4}, {"beam_finalize": "fairseq"}),
    ("gs-jacobi", {"beam": 1}, {"jacobi_block": 3}),
])
def test_reference_and_cpp_translate_the_demo_alike(demo_session, demo_sources, search, gen, opts):
    data = demo_session.encode(demo_sources[:24])
    out = {be: demo_session.translate(data, search=search, gen=gen, opts=dict(opts, step_backend=be))
           for be in ("reference", "cpp")}
    for a, b in zip(out["reference"].hypos, out["cpp"].hypos):
        assert [(h["tokens"].tolist(), h["score"]) for h in a] == [(h["tokens"].tolist(), h["score"]) for h in b]
    op = "jacobi_step" if "jacobi" in search else "beam_step"
    assert out["cpp"].stats.step_backends == {op: ["cpp"]}
    assert out["reference"].stats.step_backends == {op: ["reference"]}
    assert f"step operators: {op}=cpp" in out["cpp"].stats.summary()


# ---- the packet layout -----------------------------------------------------------------------
@pytest.mark.parametrize("op", sorted(backends.OPERATORS))
def test_the_cpp_sources_follow_the_packet_specification(op):
    source, _, _ = extension.OPERATORS[op]
    with open(os.path.join(extension.CSRC, source), encoding="utf-8") as f:
        names = packets.names_in(f.read())
    assert list(names) == list(backends.OPERATORS[op].packet.names)


def test_a_packet_is_read_by_name():
    spec = packets.BEAM_STEP
    s, z = 2, 3
    assert spec.starts(s, z)[-1] == spec.size(s, z) == 3 + 4 * s + 2 * s * z
    values = torch.arange(spec.size(s, z), dtype=torch.float64)
    view = spec.read(values, s, z)
    assert view.scalar("widest") == 2 and view["row_count"] == [3.0, 4.0]
    assert view["final_total"] == [float(x) for x in range(3 + 3 * s + s * z, 3 + 3 * s + 2 * s * z)]
    with pytest.raises(RuntimeError, match="specification"):
        spec.read(values[:-1], s, z)


# ---- the runner ------------------------------------------------------------------------------
def _stranger(*args, **kwargs):
    raise RuntimeError("out of resources: shared memory")


def test_a_backend_that_fails_falls_back_with_one_warning_and_is_recorded(monkeypatch, caplog):
    """A compile failure leaves the state to the reference, says so once, and the statistics name both."""
    import dataclasses

    op = dataclasses.replace(backends.BEAM_STEP, implementations={"cpp": "test_step_backends:_stranger"})
    monkeypatch.setitem(backends.OPERATORS, "beam_step", op)
    monkeypatch.setattr("fairseq_stream.search.beam.BEAM_STEP", op)
    monkeypatch.setattr(backends, "why_not", lambda *a: None)
    with caplog.at_level(logging.WARNING, logger="fairseq_stream"):
        seen = cases.run_beam(dict(beam=3), "cpp", 0, torch.float32)
    lines = [r.getMessage() for r in caplog.records if "cannot run" in r.getMessage()]
    assert len(lines) == 1 and "beam_step" in lines[0] and "cpp" in lines[0] and "out of resources" in lines[0]
    assert seen["backend"] == ["reference"]


def test_an_unavailable_backend_is_named_in_one_warning(monkeypatch, caplog):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with caplog.at_level(logging.WARNING, logger="fairseq_stream"):
        seen = cases.run_jacobi(dict(block=3), "triton", 0, torch.float32)  # Triton kernels need CUDA here
    lines = [r.getMessage() for r in caplog.records if "cannot run" in r.getMessage()]
    assert len(lines) == 1 and "jacobi_step" in lines[0] and "triton" in lines[0]
    assert seen["backend"] == ["reference"]


def test_a_user_rule_runs_the_reference_quietly_under_auto(caplog):
    from fairseq_stream.search.beam import BeamConfig, BeamSearch, Pruning

    class KeepTwo:
        def prune(self, view, keep):
            return keep & (torch.cumsum(keep.long(), dim=1) <= 2)

    stats = DecodeStats()
    search = BeamSearch(BeamConfig(beam=4, pruning=Pruning(abs_threshold=1.0, extra=(KeepTwo(),))), None, eos=cases.EOS,
                        pad=cases.PAD, bos=cases.BOS, stats=stats)
    assert search.kernel_rules is None
    state = search.init_state(torch.tensor([0]), torch.tensor([4]), torch.tensor([5])).state
    g = torch.Generator().manual_seed(0)
    with caplog.at_level(logging.WARNING, logger="fairseq_stream"):
        search.search_step(state, *cases.beam_candidates(g, state, search, torch.float32))
    assert stats.step_backends == {"beam_step": ["reference"]} and not caplog.records


def test_a_step_feature_a_backend_lacks_runs_the_reference_for_those_steps_only(caplog):
    """BEAM_STEP.lacks: the Triton kernel has no final margin β (it has the surprisal-scaled δ, var-*'s default);
    steps that need β run the reference (one warning when Triton was asked for), other steps keep the backend."""
    assert backends.lacking(backends.BEAM_STEP, "triton", ("--prune-abs-scale",)) == []
    assert backends.lacking(backends.BEAM_STEP, "triton", ("--prune-final-per-token",)) == ["--prune-final-per-token"]
    assert backends.lacking(backends.BEAM_STEP, "cpp", ("--prune-final-per-token",)) == []
    runner = backends.KernelRunner("cpp")
    x = [torch.zeros(2)]
    assert runner.choose(backends.BEAM_STEP, x, True, ("--prune-final-per-token",)) == "cpp"
    assert "does not implement --prune-final-per-token" in backends.why_not(
        backends.BEAM_STEP, "triton", x, True, ("--prune-final-per-token",))
    runner = backends.KernelRunner("triton")
    with caplog.at_level(logging.WARNING, logger="fairseq_stream"):
        for _ in range(3):
            assert runner.choose(backends.BEAM_STEP, x, True, ("--prune-final-per-token",)) == "reference"
    assert not runner.failed  # not a failure of the backend: only these steps
    assert len([r for r in caplog.records if "--prune-final-per-token" in r.getMessage()]) == 1


def test_the_choice_is_refused_when_unknown():
    with pytest.raises(ValueError, match="--step-backend"):
        backends.KernelRunner("cuda-graphs")


def test_first_contact_runs_a_new_signature_on_copies_first():
    from fairseq_stream.ops import triton_common

    pytest.importorskip("triton")
    calls = []
    assert triton_common.first_contact(("test", 1), lambda dry: calls.append(dry) or len(calls)) == 2
    assert triton_common.first_contact(("test", 1), lambda dry: calls.append(dry) or len(calls)) == 3
    assert calls == [True, False, False]


def test_step_kernels_specialise_on_their_size_classes_only():
    pytest.importorskip("triton")
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("the interpreter does not specialise")
    from fairseq_stream.ops import triton_beam_step, triton_ib_step, triton_jacobi_step

    for kernel in (triton_beam_step._sentence_step, triton_beam_step._rows_and_packet, triton_jacobi_step._iteration,
                   triton_jacobi_step._packet, triton_ib_step._continuations, triton_ib_step._sentence_step,
                   triton_ib_step._rows_and_packet):
        runtime = [p for p in kernel.params if not p.is_constexpr]
        assert runtime and all(p.do_not_specialize and p.do_not_specialize_on_alignment for p in runtime), kernel


# ---- the C++ build cache ---------------------------------------------------------------------
def test_the_cache_key_follows_every_source_torch_and_the_python_abi(monkeypatch, tmp_path):
    base = dict(torch_version="2.13.0", compiler="gcc 12.2", cpu="x86_64 avx2", abi=".cpython-311-x86_64-linux-gnu.so")
    key = extension.kernel_cache_key(b"src", ("-O2",), **base)
    for change in ({"abi": ".cpython-312-x86_64-linux-gnu.so"}, {"torch_version": "2.14.0"}):
        assert extension.kernel_cache_key(b"src", ("-O2",), **{**base, **change}) != key
    for name in ("beam_step.cpp", "step_common.h"):
        (tmp_path / name).write_text("// " + name)
    monkeypatch.setattr(extension, "CSRC", str(tmp_path))
    before = extension.sources_digest("beam_step.cpp")
    (tmp_path / "step_common.h").write_text("// changed")  # a header the source includes
    assert extension.sources_digest("beam_step.cpp") != before


def test_a_cached_library_that_does_not_import_is_rebuilt(monkeypatch, tmp_path):
    name = "fairseq_stream_broken"
    folder = tmp_path / name
    folder.mkdir()
    (folder / f"{name}.so").write_bytes(b"not a library")
    built = []
    monkeypatch.setattr("torch.utils.cpp_extension.load", lambda **kw: built.append(kw["name"]) or "module")
    assert extension._import_or_build("beam_step.cpp", ("-O2",), name, str(folder), "test") == "module"
    assert built == [name] and not (folder / f"{name}.so").exists()


def test_a_lock_left_by_a_killed_build_does_not_hang_the_next_one(monkeypatch, tmp_path):
    name = "fairseq_stream_killed"
    folder = tmp_path / name
    folder.mkdir()
    (folder / "lock").write_text("")  # torch's builder waits while this file exists
    seen = []
    monkeypatch.setattr("torch.utils.cpp_extension.load",
                        lambda **kw: seen.append((folder / "lock").exists()) or "module")
    assert extension._import_or_build("beam_step.cpp", ("-O2",), name, str(folder), "test") == "module"
    assert seen == [False]


def test_every_kernel_source_ships_with_the_package():
    """An installed copy must hold every file a kernel includes (a missing header fails its build)."""
    import fnmatch
    import re

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(repo, "setup.py"), encoding="utf-8") as f:
        globs = re.search(r'"fairseq_stream\.ops": \[([^\]]*)\]', f.read()).group(1)
    patterns = [p.strip().strip('"') for p in globs.split(",")]
    for name in os.listdir(extension.CSRC):
        assert any(fnmatch.fnmatch(f"csrc/{name}", p) for p in patterns), name


def test_the_install_prebuilds_every_kernel_under_csrc(monkeypatch):
    """``kernels.prebuild`` (scripts/install.sh) knows every C++ source, so none is left to a first run."""
    sources = {name for name in os.listdir(extension.CSRC) if name.endswith(".cpp")}
    from fairseq_stream.ops import kernels

    assert set(kernels.all_kernels()) == sources
    said = []
    monkeypatch.setenv("FAIRSEQ_STREAM_NO_KERNEL", "1")
    assert kernels.prebuild(write=said.append) == 0 and said == ["C++ kernels: not built (FAIRSEQ_STREAM_NO_KERNEL is set)"]


@pytest.mark.parametrize("op_name, state", [("beam_step", "fairseq_stream.search.beam:BeamState"),
                                            ("jacobi_step", "fairseq_stream.search.jacobi:JacobiState"),
                                            ("ib_step", "fairseq_stream.search.ib_beam:IBState")])
def test_an_operators_fields_are_declared_by_its_strategys_state(op_name, state):
    """The reference (the strategy's state), the C++ operator and the Triton kernels read the state
    by the operator's ``fields``: each is a typed field of the strategy's state class."""
    import dataclasses
    import importlib

    module, _, name = state.partition(":")
    declared = {f.name for f in dataclasses.fields(getattr(importlib.import_module(module), name))}
    op = backends.OPERATORS[op_name]
    assert set(op.fields) <= declared, sorted(set(op.fields) - declared)
