"""Environment variables mean what they say (issue 80): a yes/no flag set to 0 is off, a value that is
neither is one error line, and the int8 activation width is checked only where int8 is used."""
from __future__ import annotations

import os

import pytest

from conftest import DEMO, binarize, run_cli
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.ops import extension
from fairseq_stream.ops.env_flags import FLAGS, KERNEL_ISA, env_flag, kernel_isa

PREFIX = "fairseq-stream: error: "


@pytest.mark.parametrize("value, expected", [("0", False), ("1", True), ("", False), ("false", False), ("No", False),
                                             (" off ", False), ("TRUE", True), ("yes", True), ("On", True)])
def test_a_flag_is_set_by_a_yes_and_unset_by_a_no(monkeypatch, value, expected):
    monkeypatch.setenv("FAIRSEQ_STREAM_VERBOSE", value)
    assert env_flag("FAIRSEQ_STREAM_VERBOSE") is expected


def test_a_flag_that_is_neither_yes_nor_no_is_one_line_naming_it(monkeypatch):
    monkeypatch.setenv("FAIRSEQ_STREAM_TRACEBACK", "maybe")
    with pytest.raises(FairseqStreamError, match=r"^FAIRSEQ_STREAM_TRACEBACK='maybe' is neither yes nor no: use 1, "
                                                 r"true, yes or on to set it, 0, false, no, off or nothing"):
        env_flag("FAIRSEQ_STREAM_TRACEBACK")
    assert env_flag("FAIRSEQ_STREAM_TRACEBACK", strict=False) is False
    monkeypatch.delenv("FAIRSEQ_STREAM_TRACEBACK")
    assert env_flag("FAIRSEQ_STREAM_TRACEBACK") is False


def test_no_kernel_0_keeps_the_kernels(monkeypatch):
    monkeypatch.setenv("FAIRSEQ_STREAM_NO_KERNEL", "0")
    assert not extension.disabled() and "C++ kernels" not in extension.unavailable()
    monkeypatch.setenv("FAIRSEQ_STREAM_NO_KERNEL", "1")
    assert extension.disabled() and "C++ kernels" in extension.unavailable()


def test_traceback_0_prints_the_one_line(monkeypatch, capsys):
    from fairseq_stream.integration import compat

    monkeypatch.setenv("FAIRSEQ_STREAM_TRACEBACK", "0")
    try:
        raise FairseqStreamError("--beam must be positive")
    except FairseqStreamError as exc:
        compat._excepthook(type(exc), exc, exc.__traceback__)
    assert capsys.readouterr().err == PREFIX + "--beam must be positive\n"


def test_every_flag_is_checked_when_the_package_is_imported(monkeypatch):
    from fairseq_stream.integration import quiet

    for name in FLAGS:
        monkeypatch.setenv(name, "2")
        with pytest.raises(FairseqStreamError, match=f"^{name}='2' is neither yes nor no"):
            quiet.check_environment()  # a Python session: the exception; a command line: the line below
        monkeypatch.delenv(name)


@pytest.fixture(scope="module")
def three_sentences(tmp_path_factory) -> str:
    return binarize(str(tmp_path_factory.mktemp("env_bin")), {"test": 3})


def _generate(data: str, *extra: str, env: dict):
    return run_cli(["fairseq-generate", data, "--user-dir", "fairseq_stream", "--path",
                    os.path.join(DEMO, "checkpoint.pt"), "--cpu", "--gen-subset", "test", "--max-len-b", "20",
                    "-s", "es", "-t", "en", *extra], env_extra=env)


def test_a_command_line_refuses_a_flag_that_is_neither_in_one_line(three_sentences):
    proc = _generate(three_sentences, env={"FAIRSEQ_STREAM_NO_KERNEL": "maybe"})
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith(PREFIX)]
    assert errors == [PREFIX + "FAIRSEQ_STREAM_NO_KERNEL='maybe' is neither yes nor no: use 1, true, yes or on to "
                      "set it, 0, false, no, off or nothing to leave it unset"]


SPECULATIVE = ("--search", "speculative", "--beam", "1", "--draft-path", os.path.join(DEMO, "draft.pt"))


@pytest.mark.parametrize("args, refused", [
    (SPECULATIVE + ("--draft-quantize", "none"), False),  # was refused: no int8 anywhere in this run
    pytest.param(SPECULATIVE + ("--draft-quantize", "int8"), True, marks=pytest.mark.slow),
    pytest.param(("--search", "var-stream", "--quantize", "int8"), True, marks=pytest.mark.slow),
])
def test_the_int8_activation_width_is_checked_only_where_int8_is_used(three_sentences, args, refused):
    proc = _generate(three_sentences, *args, env={"FAIRSEQ_STREAM_INT8_ACTIVATION_BITS": "9"})
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    if not refused:
        assert proc.returncode == 0 and proc.stdout.count("\nH-") == 3, proc.stderr[-2000:]
        return
    errors = [line for line in proc.stderr.splitlines() if line.startswith(PREFIX)]
    assert proc.returncode == 1 and errors == [
        PREFIX + "FAIRSEQ_STREAM_INT8_ACTIVATION_BITS may only be 7 or 8 (the activations' bits), got '9'; "
        "unset it for the 8-bit activations"]


@pytest.mark.parametrize("value, expected", [("", "native"), ("native", "native"), ("avx2", "avx2"), (" AVX2 ", "avx2")])
def test_the_kernels_instruction_set_is_native_or_avx2(monkeypatch, value, expected):
    monkeypatch.setenv(KERNEL_ISA, value)
    assert kernel_isa() == expected


def test_another_instruction_set_is_one_line_and_refused_as_the_package_starts(monkeypatch):
    from fairseq_stream.integration import quiet

    monkeypatch.setenv(KERNEL_ISA, "avx512")
    with pytest.raises(FairseqStreamError, match=r"^FAIRSEQ_STREAM_KERNEL_ISA='avx512' is not an instruction set the "
                                                 r"kernels are built for: use native or avx2, or leave it unset"):
        quiet.check_environment()


def test_an_avx2_build_drops_avx512_and_has_its_own_cache_entry(monkeypatch):
    """Only -march=native kernels change; the limits come after -march=native (GCC: the last flag wins) and the
    build's name and manifest hold them, so an AVX2 build never replaces (or is taken for) the native one."""
    native_flags = ("-O3", "-march=native", "-ffp-contract=off")
    monkeypatch.delenv(KERNEL_ISA, raising=False)
    native = extension.build_dir("packed_linear.cpp", native_flags, "cpu")
    exact = extension.build_dir("beam_step.cpp", extension.EXACT_FLAGS, "cpu")
    assert extension.isa_flags(native_flags) == native_flags
    monkeypatch.setenv(KERNEL_ISA, "avx2")
    flags = extension.isa_flags(native_flags)
    assert flags == native_flags + ("-mno-avx512f", "-mno-avxvnni") and extension.isa_flags(flags) == flags
    assert extension.build_facts("packed_linear.cpp", native_flags, "cpu")["flags"] == list(flags)
    assert extension.build_dir("packed_linear.cpp", native_flags, "cpu") != native
    assert extension.build_dir("beam_step.cpp", extension.EXACT_FLAGS, "cpu") == exact  # no -march: the same binary


def test_the_closing_line_names_an_avx2_build(monkeypatch):
    from types import SimpleNamespace

    from fairseq_stream.integration.build import run_settings

    opts = SimpleNamespace(stream_input_order="sorted")
    monkeypatch.delenv(KERNEL_ISA, raising=False)
    assert "C++ kernels" not in run_settings([], opts)
    monkeypatch.setenv(KERNEL_ISA, "avx2")
    assert run_settings([], opts)["C++ kernels"] == "avx2 build (FAIRSEQ_STREAM_KERNEL_ISA)"


def test_every_instruction_set_the_variable_takes_has_its_flags_and_a_bench_environment():
    from fairseq_stream.ops.env_flags import KERNEL_ISAS
    from fairseq_stream.tools.user_bench import ISA_ENV

    assert set(extension.ISA_FLAGS) == set(KERNEL_ISAS) == set(ISA_ENV)
    assert all(ISA_ENV[isa].get(KERNEL_ISA, "native") == isa for isa in ISA_ENV)
