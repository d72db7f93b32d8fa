"""The shards' outputs as one process's: sentence lines in id order (each id once), the score line of
the whole input, the statistics summed."""
from __future__ import annotations

import json
import os
import re
import sys
from typing import Any, Dict, List, Optional, Sequence

from fairseq_stream.engine.output_paths import write_text_checked
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.tools.shard.plan import Shard, option_value


#: Per-sentence lines of fairseq-generate: S(ource), T(arget), H(ypothesis), D(etokenised),
#: P(ositional scores), A(lignment), E/I (steps of iterative decoders).
_SENTENCE_LINE = re.compile(r"^([STHDPAEI])-(\d+)\t")
_TRANSLATED = re.compile(r"Translated ([\d,]+) sentences")


def _translated(path: str) -> int:
    """The sentence count of fairseq-generate's "Translated N sentences" log line in ``path``."""
    found = _translated_or_none(path)
    return 0 if found is None else found


def _translated_or_none(path: str) -> Optional[int]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            found = [m for m in map(_TRANSLATED.search, f) if m]
    except OSError:
        return None
    return int(found[-1].group(1).replace(",", "")) if found else None


def shard_damage(shard: Shard) -> Optional[str]:
    """What is wrong with a finished shard's output (cut short or changed after it finished), or None.

    A finished shard's log (or output) says how many sentences it translated; its output must hold
    that many, each with its hypothesis, and end with a whole line.
    """
    counts = [n for n in (_translated_or_none(shard.out), _translated_or_none(shard.log)) if n is not None]
    sources, hypotheses = set(), set()
    with open(shard.out, "rb") as f:
        data = f.read()
    for line in data.decode("utf-8", errors="replace").splitlines():
        m = _SENTENCE_LINE.match(line + "\t")
        if m and m.group(1) in "SH":
            (sources if m.group(1) == "S" else hypotheses).add(int(m.group(2)))
    name = os.path.basename(shard.out)
    if not counts:
        return f"neither {name} nor {os.path.basename(shard.log)} says how many sentences it translated"
    if len(sources) != max(counts) or sources != hypotheses:
        return (f"{name} holds {len(sources)} sentences ({len(hypotheses)} with a hypothesis) but the shard "
                f"translated {max(counts)}")
    if data and not data.endswith(b"\n"):
        return f"{name} ends in the middle of a line"
    return None


def _sentences_in(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if line.startswith("S-"))


def merge_outputs(paths: List[str], translated: int) -> "tuple[List[str], List[str]]":
    """Sentence lines of all shards in id order, and the other lines of their outputs.

    Raises when an id appears in two shards, when ids are missing below the largest one, or
    when the shards output another number of sentences than they say they ``translated``.
    """
    blocks: Dict[int, List[str]] = {}
    owner: Dict[int, int] = {}
    other: List[str] = []
    for shard, path in enumerate(paths):
        with open(path, encoding="utf-8") as f:
            for line in f:
                m = _SENTENCE_LINE.match(line)
                if m is None:
                    other.append(f"[shard {shard}] {line}")
                    continue
                sid = int(m.group(2))
                if owner.setdefault(sid, shard) != shard:
                    raise FairseqStreamError(f"sentence {sid} was decoded by shards {owner[sid]} and {shard}")
                if m.group(1) == "S" and any(x.startswith("S-") for x in blocks.get(sid, [])):
                    raise FairseqStreamError(f"sentence {sid} appears twice in shard {shard}")
                blocks.setdefault(sid, []).append(line)
    missing = sorted(set(range(max(blocks, default=-1) + 1)) - set(blocks))
    if missing or len(blocks) != translated:
        raise FairseqStreamError(
            f"the shards translated {translated} sentences but output {len(blocks)} ids"
            + (f" (missing ids {missing[:5]}{'...' if len(missing) > 5 else ''})" if missing else "")
        )
    return [line for sid in sorted(blocks) for line in blocks[sid]], other


def merge_stats(shards: List[Shard], path: str) -> None:
    """The run's ``--stream-stats`` file: the shards' statistics summed, and each shard's as it wrote it.

    Counts (sentences, timesteps, expansions, ``extra``'s counters, ...) are summed; the peaks
    (``peak_*``, ``encoder_slots``) are the largest shard's; ``wall_seconds`` is the shards' decoding
    time summed (they ran at once, so ``sentences_per_second`` is a rate per process). The per-step
    ``trace`` and a ``prune_auto`` choice that differs between shards are not merged: they stay
    under ``shards``, one entry per shard in shard order.
    """
    import dataclasses

    from fairseq_stream.engine.stats import DecodeStats

    names = {f.name for f in dataclasses.fields(DecodeStats)}
    per_shard: List[Dict[str, Any]] = []
    total = DecodeStats()
    missing = []
    for shard in shards:
        try:
            with open(shard.stats, encoding="utf-8") as f:
                one = json.load(f)
        except (OSError, ValueError):
            missing.append(shard.index)
            continue
        per_shard.append(dict(one, shard=shard.index))
        total.merge(DecodeStats(**{k: v for k, v in one.items() if k in names and k != "trace"}))
    if not per_shard:
        print(f"fairseq-stream-shard: warning: no shard wrote statistics (in {os.path.dirname(shards[0].stats)}); "
              f"--stream-stats {path} not written", file=sys.stderr)
        return
    choices = [p.get("prune_auto") or {} for p in per_shard]
    total.prune_auto = choices[0] if all(c == choices[0] for c in choices) else {}
    merged = dict(total.to_dict(), search=per_shard[0].get("search"), merged_shards=len(per_shard),
                  missing_shards=missing, shards=per_shard)
    if missing:
        print(f"fairseq-stream-shard: warning: shard(s) {missing} wrote no statistics; --stream-stats {path} holds "
              f"the other {len(per_shard)} shard(s)' only", file=sys.stderr)
    write_text_checked(path, json.dumps(merged, indent=1), "--stream-stats")  # whole, or one line


def merged_score(lines: Sequence[str], generate_args: Sequence[str]) -> Optional[str]:
    """fairseq-generate's closing score line for the whole input, from the merged lines.

    Each shard prints its own ``Generate ... BLEU4 = ...`` over its sentences; this is the line
    one process would print: every sentence's ``T-`` line against its first ``D-`` line (the
    strings fairseq-generate scores), through fairseq's own scorer (``--scoring bleu``, the
    default, or ``sacrebleu``). None without targets, under another ``--scoring``, or where
    fairseq scores token ids that the printed lines do not show (``--tokenizer``/``--bpe``
    without ``--remove-bpe``).
    """
    refs: Dict[int, str] = {}
    hyps: Dict[int, str] = {}
    for line in lines:
        m = _SENTENCE_LINE.match(line)
        if m and m.group(1) == "T":
            refs[int(m.group(2))] = line.rstrip("\n").split("\t", 1)[1]
        elif m and m.group(1) == "D":
            hyps.setdefault(int(m.group(2)), line.rstrip("\n").split("\t", 2)[-1])
    scoring = option_value(generate_args, "--scoring") or "bleu"
    if not refs or set(refs) != set(hyps) or scoring not in ("bleu", "sacrebleu"):
        return None
    given = lambda *flags: any(a.split("=", 1)[0] in flags for a in generate_args)  # noqa: E731
    if scoring == "bleu" and not given("--remove-bpe", "--post-process") and given("--tokenizer", "--bpe"):
        return None  # fairseq scores the token ids then, which the detokenised lines no longer show
    from fairseq.scoring import bleu

    if scoring == "sacrebleu":
        scorer: Any = bleu.SacrebleuScorer(bleu.SacrebleuConfig(
            sacrebleu_tokenizer=option_value(generate_args, "--sacrebleu-tokenizer") or "13a"))
        for sid in sorted(refs):
            scorer.add_string(refs[sid], hyps[sid])
    else:  # as fairseq-generate does after --remove-bpe: both strings encoded by one dictionary
        from fairseq.data import Dictionary

        words = Dictionary()
        scorer = bleu.Scorer(bleu.BleuConfig(pad=words.pad(), eos=words.eos(), unk=words.unk()))
        for sid in sorted(refs):
            scorer.add(words.encode_line(refs[sid], add_if_not_exist=True),
                       words.encode_line(hyps[sid], add_if_not_exist=True))
    subset = option_value(generate_args, "--gen-subset") or "test"
    return f"Generate {subset} with beam={option_value(generate_args, '--beam') or 5}: {scorer.result_string()}"


def print_merged(shards: List[Shard], workdir: str, generate_args: Sequence[str] = (), kept: bool = True) -> None:
    """Every shard's sentence lines once, in id order, on stdout, then the score of the whole input;
    their other lines (each shard's own score among them) on stderr."""
    # fairseq logs to stdout or stderr depending on who configured logging first.
    for shard in shards:  # a local run redid a damaged shard; a torchrun rank's may be damaged since
        damage = shard_damage(shard)
        if damage is not None:
            raise FairseqStreamError(f"shard {shard.index}: {damage} (cut short or changed after it finished); run "
                                     f"the same command again: it decodes shard {shard.index} again")
    translated = sum(max(_translated(s.out), _translated(s.log)) for s in shards)
    lines, other = merge_outputs([s.out for s in shards], translated)
    sys.stderr.writelines(other)
    empty = [s.index for s in shards if _sentences_in(s.out) == 0]
    if empty:
        print(f"fairseq-stream-shard: warning: shard(s) {empty} got no sentences: fairseq shards whole batches; "
              "pass a smaller --batch-size or --max-tokens to use every process", file=sys.stderr)
    sys.stdout.writelines(lines)
    stats = option_value(generate_args, "--stream-stats")
    if stats:
        merge_stats(shards, stats)
    score = merged_score(lines, generate_args) if generate_args else None
    if score is not None:
        print(score)
    where = f"outputs in {workdir}" if kept else "temporary outputs removed; --workdir DIR keeps them"
    split = " + ".join(str(_sentences_in(s.out)) for s in shards)
    print(f"fairseq-stream-shard: {translated} sentences from {len(shards)} shards ({split}; {where})", file=sys.stderr)


def write_merged(shards: List[Shard], workdir: str, generate_args: Sequence[str] = (), kept: bool = True) -> None:
    """:func:`print_merged`, where a reader that closed the pipe (``| head``) ends the run quietly with exit
    status 141, as a unix tool killed by SIGPIPE; another failure to write stdout is one line."""
    import signal

    try:
        print_merged(shards, workdir, generate_args, kept)
        sys.stdout.flush()
    except BrokenPipeError:
        _detach_stdout()
        sys.exit(128 + signal.SIGPIPE)
    except OSError as exc:  # a full disk under stdout, a file size limit
        if exc.filename is not None:  # not stdout's: reading a shard's file
            raise
        _detach_stdout()
        again = (f"the shards' outputs stay in {workdir}: the same command prints them again" if kept
                 else "run the command again with standard output where it can be written")
        raise FairseqStreamError(f"could not write the merged output to standard output ({exc.strerror}); "
                                 + again) from None


def _detach_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush raises nothing."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
