#!/usr/bin/env bash
# The shape of Freitag2017's Tables 1-2 on a local model and corpus (default: the bundled demo
# model and its held-out test set): for each beam width of --beams (the paper: 5 and 14) and
# beam 1, each pruning rule alone and all four combined, with BLEU, the average fan-out per
# sentence (candidates a sentence expands per step, and in all) and the speed-up against the
# unpruned beam of the same width, all decoded by our engine in plain batches of --batch.
# Every row runs Freitag2017's rule: its baseline's ending (an EOS among the beam's candidates
# ends that hypothesis at once and the beam shrinks by one: --beam-finalize shrink) and its
# thresholds measured from the best active candidate (--prune-reference active, Eqs. 1-3).
#   row                          reproduces                  how
#   no pruning, beam 1           Table 1, first row          fixed-ours --beam 1 (greedy)
#   no pruning, beam k           Table 1, "no pruning" k     fixed-ours --beam-finalize shrink: the speed reference
#   rp=R                         Table 1, "rp" row           var-batch, --prune-rel-threshold R only (ap inf, mc k: off)
#   ap=2.5                       Table 1, "ap" row           var-batch, --prune-abs-threshold 2.5 only
#   rpl=L                        Table 1, "rpl" row          var-batch, --prune-rel-local-threshold L only
#   mc=3                         Table 1, "mc" row           var-batch, --prune-max-cands-per-node 3 only
#   rp=R ap=2.5 rpl=L mc=3       Table 1, combined row       var-batch --prune-preset freitag2017 (k < 14) or
#                                                            freitag2017-k14 (k >= 14)
#   fairseq beam k               — (beside ours)             fairseq's own beam search, batches of --batch
# R and L are Table 1's (beam 5: rp 0.6, rpl 0.02; beam 14: rp 0.3, rpl 0.3); a beam below 14
# takes beam 5's values, one of 14 or more beam 14's. Table 2 (Zh-En) has the same shape with
# other thresholds: pass your own rows to python -m fairseq_stream.tools.bench for it.
# Output: per beam, the harness's table (BLEU, wall time, "ratio" to the unpruned beam, fan-out
# columns) and the paper-shaped table (pruning, beam, speed up %, avg fan out, tot fan out, BLEU),
# and OUT/sweep_kK.json.
#
#   bash scripts/papers/pruning_sweep.sh                                        # the demo model, its test set
#   bash scripts/papers/pruning_sweep.sh --data DIR --path DIR/checkpoint.pt --bpe-codes CODES \
#        --src valid.es --ref valid.en --beams "5 14" --limit 298
#
# Options: --data DIR (dict.SRC.txt, dict.TGT.txt; default the demo's) --path CKPT (DIR/checkpoint.pt)
#   --bpe-codes FILE (DIR/bpe.codes) --src/--ref FILE (DIR/test.es, DIR/test.en; the languages are
#   their extensions) --beams "5 14" --limit N (300) --runs N (2) --batch N (32) --device cpu|cuda
#   --threads N --out DIR (work/pruning_sweep) --dry-run (print the harness command; decode nothing)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/wmt_common.sh"
beams="5 14" limit=300 runs=2
wmt_option() { case "$1" in *) wmt_local_option "$@";; esac; }
wmt_parse "$@"
wmt_local_bench pruning_sweep
for k in $beams; do
    if [ "$k" -lt 14 ]; then rp=0.6 rpl=0.02 preset=freitag2017; else rp=0.3 rpl=0.3 preset=freitag2017-k14; fi
    shrink="beam=$k,stream_capacity=$batch,beam_finalize=shrink"  # the unpruned beam reads no pruning option
    rule="$shrink,prune_reference=active"
    off="prune_abs_threshold=inf,prune_max_cands_per_node=$k"  # var-batch's own defaults (δ 1.5, M 5) off
    runs_k=(--run "fixed-ours:$shrink,label=no pruning"
            --run "var-batch:$rule,$off,prune_rel_threshold=$rp,label=rp=$rp"
            --run "var-batch:$rule,prune_abs_threshold=2.5,prune_max_cands_per_node=$k,label=ap=2.5"
            --run "var-batch:$rule,$off,prune_rel_local_threshold=$rpl,label=rpl=$rpl"
            --run "var-batch:$rule,prune_abs_threshold=inf,prune_max_cands_per_node=3,label=mc=3"
            --run "var-batch:beam=$k,stream_capacity=$batch,prune_preset=$preset,label=rp=$rp ap=2.5 rpl=$rpl mc=3"
            --run "fixed-ours:beam=1,stream_capacity=$batch,label=no pruning (beam 1)"
            --run "beam:beam=$k,label=fairseq beam")
    if [ -n "$dry_run" ]; then
        echo "## would run: ${bench[*]} --json $out/sweep_k$k.json ${runs_k[*]}"
        continue
    fi
    echo "## Freitag2017 Table 1 shape, beam $k ($limit sentences, $runs run(s) each, $device)"
    "${bench[@]}" --json "$out/sweep_k$k.json" "${runs_k[@]}"
    echo
    "$python" - "$out/sweep_k$k.json" "$k" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1], encoding="utf-8"))["rows"]
base = rows[0]["wall_median"]  # "no pruning" at this beam: the speed reference
print("| pruning | beam | speed up | avg fan out per sent | tot fan out per sent | BLEU |\n|---|---|---|---|---|---|")
for r in rows:
    beam = r["gen"].get("beam", sys.argv[2])
    up = f"{100 * (base / r['wall_median'] - 1):+.0f}%" if r["wall_median"] else "n/a"
    s = r["stats"]
    print(f"| {r['label']} | {beam} | {up} | {s['fanout_per_step']:.2f} | {s['fanout_per_sentence']:.1f} | {r['bleu']:.2f} |")
PY
    echo
done
