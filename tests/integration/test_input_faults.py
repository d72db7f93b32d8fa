"""Reliability, round 6 (issue 80): inputs that were a traceback or a silent loss, as a user gives them.

fairseq-interactive's ``--input`` (bytes that are not UTF-8, a directory, a missing file, a closed stdin,
a UTF-8 byte-order mark), an empty binarized split under fairseq-generate, ``--prune-auto ''``, a
``--lookahead-prior`` whose contents do not fit the model, and the prior-counting tool's bad
arguments. The command-line cases run in one process that imports fairseq once and forks per case
(``cli_cases.py``); the prior's contents are checked in process on the demo model.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import pytest
import torch

from conftest import DEMO, REPO, binarize, run_cli
from fairseq_stream.errors import FairseqStreamError

CKPT = os.path.join(DEMO, "checkpoint.pt")
PRIOR = os.path.join(DEMO, "lookahead_prior.pt")
PREFIX = "fairseq-stream: error: "
GOOD = ["Y dijo Dios", "la luz"]


@dataclass
class Case:
    argv: List[str]
    needles: List[str] = field(default_factory=list)  # in the one error line
    stdin: Optional[str] = None
    module: Optional[str] = None
    rc: int = 1
    errors: int = 1  # lines starting with `prefix`
    prefix: str = PREFIX
    translated: List[int] = field(default_factory=list)  # H- ids expected


def _interactive(*extra: str) -> List[str]:
    return ["fairseq-interactive", DEMO, "--user-dir", "fairseq_stream", "--path", CKPT, "--cpu", "--source-lang", "es",
            "--target-lang", "en", "--max-len-b", "10", *extra]


def _gen(data: str, *extra: str) -> List[str]:
    return ["fairseq-generate", data, "--user-dir", "fairseq_stream", "--path", CKPT, "--cpu", "--gen-subset", "test",
            "-s", "es", "-t", "en", "--max-len-b", "10", *extra]


def _prior_tool(root: str, *extra: str, dictionary: str = os.path.join(DEMO, "dict.en.txt")) -> Case:
    return Case(["lookahead_prior", "--dict", dictionary, "--text", os.path.join(root, "outputs.en"), *extra],
                module="fairseq_stream.tools.lookahead_prior")


def files(root: str) -> Dict[str, str]:
    """The inputs of the cases, made once per module."""
    out = {name: os.path.join(root, name) for name in ("bad.txt", "bom.txt", "plain.txt", "outputs.en", "readonly")}
    with open(out["bad.txt"], "wb") as f:  # line 2 holds bytes that are not UTF-8 (latin-1 "ñ", 0xff)
        f.write(f"{GOOD[0]}\nY dijo \xf1\xff Dios.\n{GOOD[1]}\n".encode("latin-1"))
    with open(out["bom.txt"], "wb") as f:
        f.write(b"\xef\xbb\xbf" + f"{GOOD[0]}\n".encode())
    with open(out["plain.txt"], "w", encoding="utf-8") as f:
        f.write(f"{GOOD[0]}\n")
    with open(out["outputs.en"], "w", encoding="utf-8") as f:
        f.write("In the beginning God created the heaven and the earth .\nAnd God said , Let there be light .\n")
    out["dict"] = shutil.copy(os.path.join(DEMO, "dict.en.txt"), root)  # a copy: a run without the check overwrote it
    os.makedirs(out["readonly"])
    os.chmod(out["readonly"], 0o555)  # the mode bits: root passes access() checks but not these
    out["bin"] = binarize(os.path.join(root, "bin"), {"test": 0, "valid": 2})  # an empty split, as preprocess writes it
    out["raw"] = os.path.join(root, "raw-empty")  # --dataset-impl raw on empty text files
    os.makedirs(out["raw"])
    for lang in ("es", "en"):
        shutil.copy(os.path.join(DEMO, f"dict.{lang}.txt"), out["raw"])
        open(os.path.join(out["raw"], f"test.es-en.{lang}"), "w").close()
    return out


def catalogue(root: str) -> Dict[str, Case]:
    f = files(root)
    return {
        # fairseq-interactive's input: one line each, the good lines translated (was: tracebacks, or <unk>)
        "input-invalid-utf8": Case(_interactive("--input", f["bad.txt"]), ["input line 2 is not valid UTF-8"],
                                   translated=[0, 2]),
        "input-invalid-utf8-fairseq-beam": Case(_interactive("--search", "beam", "--input", f["bad.txt"]),
                                                ["input line 2 is not valid UTF-8"], translated=[0, 2]),
        "input-directory": Case(_interactive("--input", root), [f"--input {root} is a directory"]),
        "input-missing": Case(_interactive("--input", os.path.join(root, "none.txt")),
                              ["--input", "none.txt", "No such file"]),
        "input-bom-file": Case(_interactive("--input", f["bom.txt"]), rc=0, errors=0, translated=[0]),
        "input-bom-stdin": Case(_interactive(), stdin="\ufeff" + GOOD[0] + "\n", rc=0, errors=0, translated=[0]),
        "input-plain-file": Case(_interactive("--input", f["plain.txt"]), rc=0, errors=0, translated=[0]),
        # an input with no sentences (was fairseq's "cannot mmap an empty file"; raw: a ZeroDivisionError)
        "generate-empty-split": Case(_gen(f["bin"]), ["--gen-subset test", "no sentences", "test.es-en.es.bin is empty"]),
        "generate-empty-raw-split": Case(_gen(f["raw"], "--dataset-impl", "raw"), ["--gen-subset test", "no sentences"]),
        # --prune-auto '' (was "got 'None'")
        "prune-auto-empty": Case(_gen(f["bin"], "--gen-subset", "valid", "--prune-auto", ""),
                                 ["--prune-auto", "empty value", "'on' or 'off'"], rc=2, prefix="fairseq-generate: error:"),
        # the prior-counting tool: refused before counting, naming its own options (were tracebacks)
        "prior-tool-out-dev-full": _prior_tool(root, "--out", "/dev/full"),
        "prior-tool-out-readonly-folder": _prior_tool(root, "--out", os.path.join(f["readonly"], "p.pt")),
        "prior-tool-out-is-the-dict": _prior_tool(root, "--out", f["dict"], dictionary=f["dict"]),
        "prior-tool-binary-dict": _prior_tool(root, "--out", os.path.join(root, "p.pt"), dictionary=CKPT),
        "prior-tool-ngram-1": _prior_tool(root, "--ngram", "1", "--out", os.path.join(root, "p.pt")),
    }


NEEDLES = {  # the tool's cases: what the one line names
    "prior-tool-out-dev-full": ["--out /dev/full", "cannot write"],
    "prior-tool-out-readonly-folder": ["--out", "readonly", "not writable"],
    "prior-tool-out-is-the-dict": ["--out", "is the --dict file", "destroy"],
    "prior-tool-binary-dict": ["--dict", "checkpoint.pt", "not a fairseq dictionary"],
    "prior-tool-ngram-1": ["--ngram must be in [2, 16]", "got 1"],
}

CASE_IDS = [  # the keys of catalogue() (which needs files), listed for parametrize
    "input-invalid-utf8", "input-invalid-utf8-fairseq-beam", "input-directory", "input-missing", "input-bom-file",
    "input-bom-stdin", "input-plain-file", "generate-empty-split", "generate-empty-raw-split", "prune-auto-empty",
    "prior-tool-out-dev-full", "prior-tool-out-readonly-folder", "prior-tool-out-is-the-dict", "prior-tool-binary-dict",
    "prior-tool-ngram-1",
]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("input_faults"))
    cases = catalogue(root)
    payload = [{"argv": c.argv, "stdin": c.stdin, "module": c.module} for c in cases.values()]
    proc = subprocess.run([sys.executable, os.path.join(REPO, "tests", "integration", "cli_cases.py")], cwd=REPO,
                          input=json.dumps(payload), capture_output=True, text=True,
                          env=dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1"))
    os.chmod(os.path.join(root, "readonly"), 0o755)  # pytest removes its temporary folders
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root, dict(zip(cases, zip(cases.values(), json.loads(proc.stdout))))


def _hypothesis_ids(stdout: str) -> List[int]:
    return sorted(int(m.group(1)) for m in re.finditer(r"^H-(\d+)\t", stdout, re.M))


@pytest.mark.quick_every_case  # every case is a CLI contract; all run in the one fixture above
@pytest.mark.parametrize("name", CASE_IDS)
def test_a_faulty_input_is_one_line_and_the_rest_is_translated(results, name):
    case, got = results[1][name]
    stderr = got["stderr"]
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr[-3000:]
    errors = [line for line in stderr.splitlines() if line.startswith(case.prefix)]
    assert len(errors) == case.errors, stderr[-3000:]
    assert got["rc"] == case.rc, (got["rc"], stderr[-2000:])
    for needle in case.needles + NEEDLES.get(name, []):
        assert needle in errors[0], errors[0]
    assert _hypothesis_ids(got["stdout"]) == case.translated, got["stdout"][-2000:]


def test_the_catalogue_lists_every_case(results):
    assert sorted(results[1]) == sorted(CASE_IDS)


def test_a_byte_order_mark_is_not_part_of_the_first_word(results):
    """The BOM made line 1's first word <unk> (S-0 "<unk> dijo Dios"): file and stdin now read as without it."""
    table = results[1]
    plain = table["input-plain-file"][1]["stdout"]
    source = re.search(r"^S-0\t(.*)$", plain, re.M).group(1)
    hypothesis = re.search(r"^H-0\t(.*)$", plain, re.M).group(1)
    for name in ("input-bom-file", "input-bom-stdin"):
        stdout = table[name][1]["stdout"]
        assert re.search(r"^S-0\t(.*)$", stdout, re.M).group(1) == source and "<unk>" not in source, stdout
        assert re.search(r"^H-0\t(.*)$", stdout, re.M).group(1) == hypothesis


def test_the_invalid_line_is_reported_by_its_line_number_under_input(results):
    stderr = results[1]["input-invalid-utf8"][1]["stderr"]
    assert "input line 2 is not valid UTF-8 (byte 0xf1 at character 8)" in stderr, stderr[-2000:]


def test_a_closed_stdin_is_one_line():
    """``fairseq-interactive <&-`` (was AttributeError: 'NoneType' object has no attribute 'readline')."""
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "fairseq-interactive"), *_interactive()[1:]],
                          cwd=REPO, capture_output=True, text=True, preexec_fn=lambda: os.close(0),
                          env=dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1"))
    errors = [line for line in proc.stderr.splitlines() if line.startswith(PREFIX)]
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert len(errors) == 1 and "standard input is closed" in errors[0] and "--input" in errors[0], errors


# ---- the lookahead prior's contents, checked at load (were an IndexError in the native step, a KeyError,
# a RuntimeError, "no such file" for a directory) ----
def _bad_prior(kind: str, path: str) -> str:
    state = torch.load(PRIOR, map_location="cpu", weights_only=True)
    if kind == "directory":
        os.makedirs(path)
        return path
    if kind == "token-out-of-vocabulary":
        state["unigram"] = state["unigram"].long()
        state["unigram"][5, 1] = state["vocab"] + 7
    elif kind == "token-negative":
        state["bigram"][3, 0] = -1
    elif kind == "field-missing":
        del state["bigram_keys"]
    elif kind == "table-width":
        state["unigram"] = state["unigram"][:, :-1]
    elif kind == "keys-unsorted":
        state["bigram_keys"] = state["bigram_keys"].flip(0)
    elif kind == "table-float":
        state["bigram"] = state["bigram"].float()
    torch.save(state, path)
    return path


PRIOR_CASES = {
    "token-out-of-vocabulary": "'unigram' holds 6031, outside [0, 6024)",
    "token-negative": "'bigram' holds -1, outside [0, 6024)",
    "field-missing": "the field 'bigram_keys' is missing",
    "table-width": "the table 'unigram' has shape (3094, 2), expected (rows, 3)",
    "keys-unsorted": "'bigram_keys' is not sorted",
    "table-float": "the field 'bigram' must be an integer tensor, it is a torch.float32 tensor",
    "directory": "is a directory",
}


@pytest.mark.parametrize("kind", list(PRIOR_CASES))
def test_a_prior_that_does_not_fit_is_one_line_naming_the_file(demo_session, tmp_path, kind):
    path = _bad_prior(kind, str(tmp_path / "prior.pt"))
    data = demo_session.encode(["Y dijo Dios: Sea la luz."])
    with pytest.raises(FairseqStreamError) as refused:
        demo_session.translate(data, search="lookahead", gen={"beam": 1, "max_len_b": 10},
                               opts={"lookahead_ngram": 3, "lookahead_prior": path})
    message = str(refused.value)
    assert f"--lookahead-prior {path}" in message and PRIOR_CASES[kind] in message and "\n" not in message, message


def test_a_prior_with_an_out_of_vocabulary_token_is_one_line_on_the_command_line(tmp_path):
    """End to end: the run stops before decoding with the one line (was an IndexError traceback in the native step)."""
    data = binarize(str(tmp_path / "bin"), {"test": 2})
    path = _bad_prior("token-out-of-vocabulary", str(tmp_path / "prior.pt"))
    proc = run_cli(_gen(data, "--search", "lookahead", "--beam", "1", "--lookahead-ngram", "3",
                        "--lookahead-prior", path))
    errors = [line for line in proc.stderr.splitlines() if line.startswith(PREFIX)]
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert len(errors) == 1 and "outside [0, 6024)" in errors[0] and path in errors[0], errors
