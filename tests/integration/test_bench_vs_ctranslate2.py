"""scripts/bench/bench_vs_ctranslate2.py end to end in smoke mode (needs the optional ctranslate2)."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from conftest import REPO


@pytest.mark.slow  # converts the demo model and decodes with eleven systems at k=5 and k=50
@pytest.mark.skipif(importlib.util.find_spec("ctranslate2") is None, reason="needs ctranslate2 (pip install .[bench])")
def test_smoke_run_prints_every_row_and_ctranslate2_matches_fairseq_mostly(tmp_path):
    out = tmp_path / "rows.json"
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "scripts/bench/bench_vs_ctranslate2.py", "--smoke", "--prune-auto", "--json", str(out)], cwd=REPO,
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    systems = {r["system"] for r in rows}
    assert {"fairseq beam", "var-stream int8", "var-stream --prune-auto", "var-stream --prune-auto int8",
            "CTranslate2 float32", "CTranslate2 int8"} <= systems
    assert {r["k"] for r in rows} == {5, 50} and len(rows) == 2 * len(systems)
    table = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    assert len(table) == len(rows) + 1  # the header and one line per row
    # The same model, search and length limit: CTranslate2's float32 beam mostly agrees with fairseq's.
    ct2 = next(r for r in rows if r["system"] == "CTranslate2 float32" and r["k"] == 5)
    assert ct2["identical"] >= ct2["sentences"] // 2 and ct2["bleu"] > 0
