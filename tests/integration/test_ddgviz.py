"""fairseq-stream-ddgviz: arguments are checked up front; an unconverged run is marked as such."""
from __future__ import annotations

import os

import pytest

PREFIX = "fairseq-stream: error: "


def _run(argv, capsys):
    from fairseq_stream.tools.ddgviz import main

    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    return exit_info.value.code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("argv,needle", [
    (["--line", "-1"], "--line must be between 0 and "),  # was: silently the last line
    (["--line", "99999"], "--line must be between 0 and "),
    (["--max-iterations", "-1"], "--max-iterations must be >= 1, got -1"),
    (["--max-iterations", "0"], "--max-iterations must be >= 1, got 0"),
    (["--out", "/nonexistent/ddg"], "--out /nonexistent/ddg: the folder /nonexistent does not exist"),
    (["--out", "/proc/ddg"], "--out /proc/ddg: cannot write in /proc"),
    (["--sentence", "  "], "--sentence is empty"),
])
def test_bad_arguments_are_one_line_and_exit_2(capsys, tmp_path, argv, needle):
    if "--out" not in argv:
        argv = [*argv, "--out", str(tmp_path / "ddg")]
    code, err = _run(argv, capsys)
    assert code == 2 and len(err) == 1 and err[0].startswith(PREFIX) and needle in err[0], (code, err)


def test_a_folder_as_path_is_named_a_folder(capsys, tmp_path):
    # issue 38 item 9: a folder given as --path was reported as "not found"
    (tmp_path / "checkpoint_best.pt").write_bytes(b"")
    code, err = _run(["--path", str(tmp_path), "--out", str(tmp_path / "ddg")], capsys)
    assert code == 2 and len(err) == 1 and "is a folder, not a file (it holds checkpoint_best.pt)" in err[0], err


def test_a_folder_as_out_gets_named_files(tmp_path):
    # issue 38 item 9: --out DIR/ reported DIR/.png and wrote the hidden DIR/.png.png
    import argparse

    from fairseq_stream.tools.ddgviz import check_arguments

    for out in (str(tmp_path) + os.sep, str(tmp_path)):
        args = argparse.Namespace(line=3, max_iterations=None, out=out, sentence="Y la tierra.", source_lang="es")
        check_arguments(args)
        assert args.out == os.path.join(str(tmp_path), "ddgviz"), args.out


def test_an_unconverged_run_is_marked_not_drawn_as_greedy(demo_session, tmp_path, capsys):
    from fairseq_stream.tools.ddgviz import trace_jacobi, write_html

    sentence = "Y dijo Dios: Sea la luz: y fué la luz."
    cut = trace_jacobi(demo_session, sentence, max_iterations=1)
    assert not cut.converged and cut.iterations == 1
    full = trace_jacobi(demo_session, sentence)
    assert full.converged and full.iterations > 1
    write_html(cut, str(tmp_path / "cut.html"))
    write_html(full, str(tmp_path / "full.html"))
    cut_page, full_page = (tmp_path / "cut.html").read_text(), (tmp_path / "full.html").read_text()
    assert "Not converged" in cut_page and "230,120,20" in cut_page and "40,150,60" not in cut_page
    assert "Not converged" not in full_page and "40,150,60" in full_page


@pytest.mark.slow  # loads the model and draws with matplotlib
def test_the_command_warns_about_an_unconverged_run(tmp_path, capsys):
    from fairseq_stream.tools.ddgviz import main

    main(["--max-iterations", "1", "--out", str(tmp_path / "ddg")])
    err = capsys.readouterr().err
    assert "fairseq-stream: warning: Jacobi iteration did not converge within --max-iterations 1" in err, err
    assert os.path.getsize(tmp_path / "ddg.png") > 1000


def test_any_arguments_give_a_sentence_or_one_line_and_exit_2(tmp_path):
    """Property over the arguments ddgviz checks (the harness's and the demo's are another branch's)."""
    import argparse
    import contextlib
    import io

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from fairseq_stream.tools.ddgviz import check_arguments

    (tmp_path / "taken.png").mkdir()  # --out taken: taken.png is a folder
    outs = [str(tmp_path / "ddg"), "/nonexistent/ddg", "/proc/ddg", str(tmp_path / "taken")]

    @settings(max_examples=40, deadline=None, derandomize=True)
    @given(line=st.integers(-10**6, 10**6) | st.integers(-3, 990), iters=st.none() | st.integers(-5, 5),
           out=st.sampled_from(outs), sentence=st.none() | st.sampled_from(["", " \u00a0", "Y la tierra."]))
    def check(line, iters, out, sentence):
        args = argparse.Namespace(line=line, max_iterations=iters, out=out, sentence=sentence, source_lang="es")
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            try:
                got = check_arguments(args)
            except SystemExit as exc:
                lines = err.getvalue().strip().splitlines()
                assert exc.code == 2 and len(lines) == 1 and lines[0].startswith(PREFIX), (exc.code, lines)
                return
        assert got.strip() and (iters is None or iters >= 1) and out == outs[0], (got, iters, out)
        assert sentence is not None or 0 <= line

    check()
