"""DDGviz: the decoding dependency graph of parallel Jacobi decoding (Santilli2023 §3.5, §4.3).

For one source sentence, run plain Jacobi iteration (PJ, Algorithm 1, no prefix freezing):
every iteration feeds ``[BOS] + draft`` through the decoder in one causal block and replaces
the whole draft by the arg-max predictions, starting from PAD, until nothing changes. The
picture has the iterations on one axis and the target tokens (greedy's output, the fixed
point) on the other; a cell is filled when the token at that position already equals
greedy's at that iteration, shaded by the model's probability for it. The iteration at which a
token becomes correct for good is framed: tokens framed in the same iteration were decoded
in parallel, i.e. they did not need each other (the "skip connections" of §3.5).

    fairseq-stream-ddgviz --sentence "Y dijo Dios: Sea la luz: y fué la luz." --out ddg
    # writes ddg.png and ddg.html (self-contained)

The defaults decode with the demo model of ``user_dir_examples/demo`` (or its installed copy,
see :mod:`fairseq_stream.tools.demo_files`); ``--data``, ``--path`` and ``--bpe-codes`` choose another.
"""
from __future__ import annotations

import argparse
import base64
import html
import os
import sys
import tempfile
from dataclasses import dataclass
from typing import List, NoReturn, Optional, Sequence

import torch



@dataclass
class JacobiTrace:
    source: str
    tokens: List[str]  # greedy's output (the fixed point), EOS last
    predictions: List[List[str]]  # per iteration, the token predicted at each position
    probabilities: List[List[float]]  # p(prediction | inputs of that iteration)
    correct: List[List[bool]]  # prediction == greedy token
    fixed_at: List[int]  # first iteration after which a position stays correct
    converged: bool = True  # False: --max-iterations stopped it; ``tokens`` is the last draft, not greedy's

    @property
    def reference(self) -> str:
        """What the columns are: greedy's output, or (unconverged) only the last draft."""
        return "greedy output" if self.converged else "last draft, NOT greedy's output"

    @property
    def iterations(self) -> int:
        return len(self.predictions)


def trace_jacobi(session, sentence: str, max_iterations: Optional[int] = None) -> JacobiTrace:
    """Run PJ on one sentence with ``session``'s (first) model and record every iteration."""
    from fairseq_stream.model.model_step import ModelStep
    from fairseq_stream.search.score_edits import max_lengths

    task = session.task
    tgt = task.target_dictionary
    dataset = session.encode([sentence])
    sample = dataset.collater([dataset[0]])
    src, lengths = sample["net_input"]["src_tokens"], sample["net_input"]["src_lengths"]
    step = ModelStep(session.models[:1])
    step.require_block_steps("DDGviz")
    pool = step.encode(src, lengths, tgt.pad(), tgt.eos())
    width = int(max_lengths(pool.src_lengths, session.cfg.generation, step.max_decoder_positions)[0]) + 1
    draft = torch.full((1, width), tgt.pad(), dtype=torch.long)
    history: List[torch.Tensor] = []
    probs: List[torch.Tensor] = []
    limit = max_iterations or width + 1
    converged = False
    with torch.no_grad():
        for _ in range(limit):
            feed = torch.cat([torch.full((1, 1), tgt.eos()), draft[:, :-1]], dim=1)
            state = step.initial_state(pool, torch.arange(1), tgt.eos())
            scores, _ = step.step(pool, state, feed)
            lp = torch.log_softmax(scores[0].float(), dim=-1)
            lp[:, tgt.pad()] = float("-inf")
            best, pred = lp.max(dim=-1)
            history.append(pred)
            probs.append(best.exp())
            # Converged when nothing changed up to the first EOS (positions after it are not
            # part of the output; the window is only the maximum length).
            eos = pred.tolist().index(tgt.eos()) + 1 if tgt.eos() in pred.tolist() else width
            if torch.equal(pred[:eos], draft[0, :eos]):
                converged = True
                break
            draft = pred.unsqueeze(0)
    final = history[-1].tolist()
    n = final.index(tgt.eos()) + 1 if tgt.eos() in final else len(final)
    preds = [h[:n].tolist() for h in history]
    correct = [[p == f for p, f in zip(row, final[:n])] for row in preds]
    fixed_at = []
    for pos in range(n):
        k = len(preds) - 1
        while k > 0 and correct[k - 1][pos]:
            k -= 1
        fixed_at.append(k)
    return JacobiTrace(
        source=sentence,
        tokens=[tgt[t] for t in final[:n]],
        predictions=[[tgt[t] for t in row] for row in preds],
        probabilities=[p[:n].tolist() for p in probs],
        correct=correct,
        fixed_at=fixed_at,
        converged=converged,
    )


def draw_png(trace: JacobiTrace, path: str) -> None:
    import logging

    import matplotlib

    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    n, iters = len(trace.tokens), trace.iterations
    # Unconverged: orange against the last draft, so it cannot pass for greedy's tokens in green.
    shade = plt.cm.Greens if trace.converged else plt.cm.Oranges
    fig, ax = plt.subplots(figsize=(max(6.0, 0.62 * n + 2), max(3.0, 0.42 * iters + 1.8)))
    for k in range(iters):
        for i in range(n):
            ok = trace.correct[k][i]
            p = trace.probabilities[k][i]
            color = shade(0.25 + 0.7 * p) if ok else (0.93, 0.93, 0.93)
            ax.add_patch(Rectangle((i, k), 1, 1, facecolor=color, edgecolor="white"))
            ax.text(i + 0.5, k + 0.5, f"{trace.predictions[k][i]}\n{p:.2f}", ha="center", va="center",
                    fontsize=6.5, color="black" if ok else "0.55")
        for i in range(n):
            if trace.fixed_at[i] == k:
                ax.add_patch(Rectangle((i, k), 1, 1, fill=False, edgecolor="black", linewidth=1.6))
    ax.set_xlim(0, n)
    ax.set_ylim(iters, 0)
    ax.set_xticks([i + 0.5 for i in range(n)])
    ax.set_xticklabels(trace.tokens, rotation=60, ha="right", fontsize=8)
    ax.set_yticks([k + 0.5 for k in range(iters)])
    ax.set_yticklabels([str(k + 1) for k in range(iters)], fontsize=8)
    ax.set_xlabel(f"target token ({trace.reference})")
    ax.set_ylabel("Jacobi iteration")
    if trace.converged:
        title = (f"DDGviz: {iters} iterations for {n} tokens (greedy: {n} steps)\n"
                 "green: already greedy's token (shade = probability); framed: fixed from this iteration on")
    else:
        title = (f"DDGviz: NOT CONVERGED after {iters} iterations (--max-iterations); columns are the last draft\n"
                 "orange: equals the last draft's token (shade = probability), which need not be greedy's")
    ax.set_title(title, fontsize=9, color="black" if trace.converged else "darkred")
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def write_html(trace: JacobiTrace, path: str, png: Optional[str] = None) -> None:
    rows = []
    for k in range(trace.iterations):
        cells = []
        for i in range(len(trace.tokens)):
            ok, p = trace.correct[k][i], trace.probabilities[k][i]
            rgb = "40,150,60" if trace.converged else "230,120,20"  # green, or orange when unconverged
            style = f"background: rgba({rgb},{0.15 + 0.75 * p:.2f})" if ok else "background:#eee;color:#888"
            if trace.fixed_at[i] == k:
                style += ";outline:2px solid #000"
            cells.append(f'<td style="{style}" title="p={p:.3f}">{html.escape(trace.predictions[k][i])}<br>'
                         f'<small>{p:.2f}</small></td>')
        rows.append(f"<tr><th>{k + 1}</th>{''.join(cells)}</tr>")
    head = "".join(f"<th>{html.escape(t)}</th>" for t in trace.tokens)
    image = ""
    if png and os.path.exists(png):
        with open(png, "rb") as f:
            image = f'<p><img alt="DDGviz" style="max-width:100%" src="data:image/png;base64,{base64.b64encode(f.read()).decode()}"></p>'
    if trace.converged:
        status = (f"<p>{trace.iterations} Jacobi iterations for {len(trace.tokens)} target tokens. Rows are iterations, "
                  "columns greedy's tokens; a green cell already holds greedy's token (opacity = probability); a framed "
                  "cell is where the token becomes correct for good.</p>")
    else:
        status = (f'<p style="color:darkred"><b>Not converged</b> after {trace.iterations} iterations '
                  "(--max-iterations): the columns are the last draft, not greedy's output; an orange cell equals the "
                  "last draft's token.</p>")
    doc = f"""<!doctype html><html><head><meta charset="utf-8"><title>DDGviz</title>
<style>body{{font-family:sans-serif}} td,th{{padding:3px 5px;text-align:center;font-size:12px}}</style></head>
<body><h2>DDGviz — parallel Jacobi decoding (Santilli2023 §3.5)</h2>
<p>Source: {html.escape(trace.source)}</p>
{status}
<table><tr><th>iter</th>{head}</tr>{''.join(rows)}</table>{image}</body></html>"""
    with open(path, "w", encoding="utf-8") as f:
        f.write(doc)


DEFAULT_OUT = "ddgviz"


def _usage_error(message: str) -> "NoReturn":
    """An argument that cannot work: one line and exit status 2 (argparse's status for usage errors)."""
    from fairseq_stream.errors import PREFIX

    print(PREFIX + message, file=sys.stderr, flush=True)
    sys.exit(2)


def out_prefix(out: str) -> str:
    """``--out``: a prefix, or a folder (an existing one, or one ending in a separator) that gets
    ``ddgviz.png`` and ``ddgviz.html``, so ``--out DIR/`` does not write the hidden ``DIR/.png``."""
    if out.endswith(("/", os.sep)) or os.path.isdir(out):
        return os.path.join(out, DEFAULT_OUT)
    return out


def _check_out(prefix: str) -> None:
    """``--out`` must name a writable place: checked before the model loads, with a probe file."""
    folder = os.path.dirname(os.path.abspath(prefix)) or "."
    if not os.path.isdir(folder):
        _usage_error(f"--out {prefix}: the folder {folder} does not exist; create it or choose another prefix")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        _usage_error(f"--out {prefix}: cannot write in {folder} ({exc.strerror or exc}); choose another prefix")
    for path in (prefix + ".png", prefix + ".html"):
        if os.path.isdir(path):
            _usage_error(f"--out {prefix}: {path} is a folder; choose another prefix")


def _pick_sentence(args: argparse.Namespace) -> str:
    """``--sentence``, or line ``--line`` (0-based) of the demo test set; one-line errors otherwise."""
    from fairseq_stream.tools.demo_files import DEMO_DIR, require_demo_dir

    sentence = args.sentence
    if sentence is None:
        require_demo_dir(DEMO_DIR)
        with open(os.path.join(DEMO_DIR, f"test.{args.source_lang}"), encoding="utf-8") as f:
            lines = f.read().splitlines()
        if not 0 <= args.line < len(lines):  # a negative index would silently count from the end
            _usage_error(f"--line must be between 0 and {len(lines) - 1} (the demo test set has {len(lines)} lines), "
                         f"got {args.line}")
        sentence = lines[args.line]
    if not sentence.strip():
        _usage_error("--sentence is empty" if args.sentence is not None else f"line {args.line} of the test set is empty")
    return sentence


def check_arguments(args: argparse.Namespace) -> str:
    """Every argument check, before the model loads; returns the sentence to draw (or exits 2)."""
    if args.max_iterations is not None and args.max_iterations < 1:
        _usage_error(f"--max-iterations must be >= 1, got {args.max_iterations}")
    if getattr(args, "path", None):
        from fairseq_stream.errors import FairseqStreamError
        from fairseq_stream.tools.session import check_checkpoint_file

        try:  # a folder given as --path was reported as "not found"
            check_checkpoint_file(args.path)
        except FairseqStreamError as exc:
            _usage_error(str(exc))
    args.out = out_prefix(args.out)
    _check_out(args.out)
    return _pick_sentence(args)


def main(argv: Optional[Sequence[str]] = None) -> None:
    from fairseq_stream.tools.demo_files import DEMO_DIR

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=DEMO_DIR, help="directory with the dictionaries")
    parser.add_argument("--path", default=os.path.join(DEMO_DIR, "checkpoint.pt"))
    parser.add_argument("--bpe-codes", default=os.path.join(DEMO_DIR, "bpe.codes"))
    parser.add_argument("--source-lang", default="es")
    parser.add_argument("--target-lang", default="en")
    parser.add_argument("--sentence", default=None, help="raw source sentence (default: line --line of the demo test set)")
    parser.add_argument("--line", type=int, default=3, help="0-based line of the demo test set (without --sentence)")
    parser.add_argument("--out", default=DEFAULT_OUT, help="output prefix: PREFIX.png and PREFIX.html (a folder: "
                        f"FOLDER/{DEFAULT_OUT}.png and .html)")
    parser.add_argument("--max-iterations", type=int, default=None,
                        help="stop after this many iterations (>= 1); an unconverged run is marked as such")
    args = parser.parse_args(argv)

    from fairseq_stream.integration.compat import install_excepthook
    from fairseq_stream.tools.session import TranslationSession

    install_excepthook()
    sentence = check_arguments(args)
    session = TranslationSession.load(args.data, args.path, bpe_codes=args.bpe_codes,
                                      extra_args=["--source-lang", args.source_lang, "--target-lang", args.target_lang])
    trace = trace_jacobi(session, sentence, args.max_iterations)
    png, page = args.out + ".png", args.out + ".html"
    draw_png(trace, png)
    write_html(trace, page, png)
    if not trace.converged:
        print(f"fairseq-stream: warning: Jacobi iteration did not converge within --max-iterations "
              f"{args.max_iterations}: the picture shows the last draft, not greedy's output (marked in orange)",
              file=sys.stderr, flush=True)
    print(f"{trace.iterations} Jacobi iterations for {len(trace.tokens)} tokens; wrote {png} and {page}", file=sys.stderr)


if __name__ == "__main__":
    main()
