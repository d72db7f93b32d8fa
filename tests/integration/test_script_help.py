"""Every script under scripts/ answers ``--help`` with its usage and exit status 0, before it does anything.

The scripts are found when the tests are collected, so a new script is tested without a line here.
A shell script prints its header comment; a Python script its argparse usage, without loading a
model. ``--help`` installs nothing: the scripts that install (install.sh, demo.sh, test.sh,
gpu_check.sh) are pointed at a virtual environment in a temporary folder that must stay absent.
"""
import glob
import os
import subprocess
import sys

import pytest

from conftest import REPO

SCRIPTS = sorted(os.path.relpath(p, REPO) for ext in ("py", "sh")
                 for p in glob.glob(os.path.join(REPO, "scripts", "**", f"*.{ext}"), recursive=True))


def header_comment(path: str) -> list:
    """A shell script's leading comment (after the #! line), one line each, without the '# '."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    if lines and lines[0].startswith("#!"):
        lines = lines[1:]
    header = []
    for line in lines:
        if not line.startswith("#"):
            break
        header.append(line[2:] if line.startswith("# ") else line[1:])
    return header


def test_the_scripts_are_found():
    """The glob sees every folder's scripts (a broken glob would test nothing)."""
    assert {"scripts/install.sh", "scripts/test.sh", "scripts/papers/pruning_sweep.sh",
            "scripts/bench/native_step_time.py", "scripts/experiments/engine_counts.py"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_prints_its_usage_with_help(script, tmp_path):
    venv = tmp_path / "venv"
    env = dict(os.environ, PYTHON=sys.executable, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore",
               FAIRSEQ_STREAM_VENV=str(venv), GPU_VENV=str(venv), OUT=str(tmp_path / "out"))
    command = ["bash", script] if script.endswith(".sh") else [sys.executable, script]
    proc = subprocess.run([*command, "--help"], cwd=REPO, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-1000:] + proc.stderr[-2000:]
    if script.endswith(".sh"):
        header = header_comment(os.path.join(REPO, script))
        assert header and proc.stdout.splitlines()[0] == header[0], proc.stdout[:500]
    else:
        assert "usage:" in proc.stdout, proc.stdout[:500]
    assert not venv.exists() and not (tmp_path / "out").exists(), "--help did more than print its usage"
