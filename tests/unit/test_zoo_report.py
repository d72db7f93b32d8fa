"""The zoo's record from user_bench's JSON files: the summary line a model, the halves, the sections, bad input."""
import json

import pytest

from fairseq_stream.errors import UsageError
from fairseq_stream.tools import zoo_report as zr


def _row(label, median, ref, bleu, identical_to=None, identical=None, n=4):
    return {"label": label, "command": f"fairseq-generate ... {label}", "seconds": [median, median * 1.1, median * 0.9],
            "median": median, "reference": ref, "ratio": None, "bleu": bleu, "identical_to": identical_to,
            "identical": identical, "sentences": n, "stable": True, "stats": {}}


def _with_ratios(rows):
    by = {r["label"]: r for r in rows}
    for r in rows:
        r["ratio"] = r["median"] / by[r["reference"]]["median"] if r["reference"] in by else None
    return rows


def _folder(tmp_path, name, half, **spec):
    folder = tmp_path / name
    folder.mkdir()
    full = {"src": "en", "tgt": "es", "layers": [6, 2], "dim": 384, "heads": 6, "ffn": 1536, "bpe": [5000],
            "label_smoothing": 0.0, "half": half, "of_run": "", "at_update": 0, **spec}
    (folder / "state.json").write_text(json.dumps({"spec": full, "stages": {"train": {"seconds": 600.0,
                                                                                        "updates": 1947}}}))
    return str(folder)


def _file(tmp_path, name, models):
    path = tmp_path / name
    meta = {"cpu": "Test CPU (AVX2)", "omp_num_threads": 1, "repeats": 3, "limit": 4, "revision": "abc1234",
            "date": "2026-12-07 09:00 UTC", "command": "python -m fairseq_stream.tools.user_bench --rows k5"}
    path.write_text(json.dumps({"meta": meta, "models": models}))
    return str(path)


def test_one_summary_line_a_model_tuning_half_first_and_a_section_each(tmp_path):
    held = _folder(tmp_path, "en-es-6x2", "held-out")
    tuning = _folder(tmp_path, "es-en-3x3", "tuning", src="es", tgt="en", layers=[3, 3], bpe=[6000, 4000])
    b1 = _with_ratios([_row("greedy", 6.0, "greedy", 27.4), _row("speculative", 4.5, "greedy", 27.4, "greedy", 4),
                       _row("lookahead", 5.4, "greedy", 27.4, "greedy", 3), _row("gs-jacobi", 6.0, "greedy", 27.4),
                       _row("hybrid-jacobi", 6.06, "greedy", 27.4), _row("CTranslate2 float32 batch1", 10.0, "greedy", 27.4)])
    k5 = _with_ratios([_row("fairseq beam k=5", 10.0, "fairseq beam k=5", 26.2),
                       _row("fixed-ours k=5", 4.0, "fairseq beam k=5", 26.3),
                       _row("var-stream k=5", 3.0, "fairseq beam k=5", 26.1)])
    first = _file(tmp_path, "b1.json", [{"model": held, "source_lang": "en", "target_lang": "es", "sentences": 4,
                                         "rows": b1, "why": [], "left_out": ["speculative-beam k=5: --skip"]}])
    second = _file(tmp_path, "k5.json", [{"model": held, "source_lang": "en", "target_lang": "es", "sentences": 4,
                                          "rows": k5, "why": [], "left_out": []},
                                         {"model": tuning, "source_lang": "es", "target_lang": "en", "sentences": 4,
                                          "rows": k5, "why": [], "left_out": []}])
    text = zr.report(zr.load_runs([first, second]))
    lines = text.splitlines()
    summary = [line for line in lines if line.startswith("| en-es-6x2") or line.startswith("| es-en-3x3")]
    assert summary[0].startswith("| es-en-3x3 | tuning |") and summary[1].startswith("| en-es-6x2 | held-out |")
    held_cells = [c.strip() for c in summary[1].strip("|").split("|")]
    assert held_cells[2:] == ["6.00 s, 27.40, 0.60×", "0.75×", "0.90× (**NOT identical**)",
                              "1.00× / 1.01×", "0.40× / 0.30× (0.75× fixed-ours); 26.20 / 26.30 / 26.10", ""]
    assert "### en-es-6x2 (held-out)" in lines and "### es-en-3x3 (tuning)" in lines
    assert any("es→en, 3 + 3 layers × 384" in line and "BPE es 6000 / en 4000" in line for line in lines)
    assert "left out: speculative-beam k=5: --skip" in text and "revision abc1234" in text and "(b1.json): `python -m fairseq_stream.tools.user_bench --rows k5`" in text
    assert "| speculative | 4.500 | 0.75× greedy | 27.40 | identical to greedy (4/4) |" in lines


def test_a_folder_the_zoo_did_not_build_and_files_that_are_not_the_harnesss(tmp_path):
    demo = tmp_path / "demo"
    demo.mkdir()
    info = zr.model_info(str(demo))
    assert info["half"] == "tuning" and "no state.json" in zr.describe(info)
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "other.json").write_text(json.dumps({"rows": []}))
    for name, match in (("bad.json", "not JSON"), ("other.json", "not a user_bench file"), ("missing.json", "cannot read")):
        with pytest.raises(UsageError, match=match):
            zr.load_runs([str(tmp_path / name)])
    with pytest.raises(SystemExit) as exc:
        zr.main(["--json", str(tmp_path / "bad.json")])
    assert exc.value.code == 2
