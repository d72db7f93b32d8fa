"""fairseq-stream-ddgviz: arguments are checked up front; an unconverged run is marked as such."""
from __future__ import annotations

import os

import pytest

PREFIX = "fairseq-stream: error: "


def _run(argv, capsys):
    from fairseq_stream.viz.ddgviz import main

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


def test_an_unconverged_run_is_marked_not_drawn_as_greedy(demo_session, tmp_path, capsys):
    from fairseq_stream.viz.ddgviz import trace_jacobi, write_html

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
    from fairseq_stream.viz.ddgviz import main

    main(["--max-iterations", "1", "--out", str(tmp_path / "ddg")])
    err = capsys.readouterr().err
    assert "fairseq-stream: warning: Jacobi iteration did not converge within --max-iterations 1" in err, err
    assert os.path.getsize(tmp_path / "ddg.png") > 1000
