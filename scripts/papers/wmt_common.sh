# What the WMT reproduction scripts share; sourced by them, never run:
#   source "$(dirname "${BASH_SOURCE[0]}")/wmt_common.sh"
# A script sets its defaults, defines wmt_option (its own options: set the variable and
# wmt_shift to the number of words taken; return 0 either way), then calls wmt_parse "$@".
# Provided here: the Python environment (repo, python, bin, PYTHONPATH), the options every
# script takes (--device --dtype --threads --out --help), those of the scripts that decode a
# published model on a test set (wmt_testset_option), and the downloads, each of which has a
# local-path alternative.

if [ "${BASH_SOURCE[0]}" = "$0" ]; then  # run, not sourced (e.g. with --help): print this header, do nothing
    awk '/^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
    exit 0
fi

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
python="${PYTHON:-python3}"
[ -x "$repo/.venv/bin/python" ] && python="$repo/.venv/bin/python"
bin="$(dirname "$python")"  # fairseq's console scripts, beside the interpreter
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
wmt_name="$(basename "$0")"

# The shared options' defaults; a script may change them before wmt_parse.
device=cpu dtype=float32 threads="" out=""
pair=de-en models="" src="" ref="" codes="" runs=3 limit="" testset=""

wmt_fail() { echo "$wmt_name: $*" >&2; exit 2; }

wmt_usage() {  # the script's header comment, from its second line to the first line of code
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
}

wmt_testset_option() {  # the options of the scripts that decode a published model on a test set
    case "$1" in
        --pair) pair="${2-}";;
        --models-dir) models="${2-}";;
        --src) src="${2-}";;
        --ref) ref="${2-}";;
        --bpe-codes) codes="${2-}";;
        --testset) testset="${2-}";;
        --runs) runs="${2-}";;
        --limit) limit="${2-}";;
        *) return 0;;
    esac
    wmt_shift=2
}

wmt_parse() {
    local takes
    while [ $# -gt 0 ]; do
        wmt_shift=0
        wmt_option "$@"
        if [ "$wmt_shift" -eq 0 ]; then
            case "$1" in
                --device) device="${2-}"; wmt_shift=2;;
                --dtype) dtype="${2-}"; wmt_shift=2;;
                --threads) threads="${2-}"; wmt_shift=2;;
                --out) out="${2-}"; wmt_shift=2;;
                -h|--help) wmt_usage; exit 0;;
                *) wmt_fail "unknown option $1 (see --help)";;
            esac
        fi
        takes=$wmt_shift
        [ "$#" -ge "$takes" ] || wmt_fail "$1 needs a value"
        shift "$takes"
    done
    case "$device" in cpu|cuda) ;; *) wmt_fail "--device is cpu or cuda, not '$device'";; esac
    case "$dtype" in float32|float16|bfloat16) ;; *) wmt_fail "--dtype is float32, float16 or bfloat16, not '$dtype'";; esac
}

wmt_download() {  # URL FILE: fetch once (a machine without internet passes the local paths instead)
    [ -s "$2" ] || curl -fL -o "$2" "$1"
}

wmt_fetch_models() {  # URL: extract the model archive into $out/models once; sets models
    if [ ! -d "$out/models" ]; then
        mkdir -p "$out/models"
        curl -fL "$1" | tar -xz -C "$out/models" --strip-components=1
    fi
    models="$out/models"
}

wmt_echo_testset() {  # TESTSET PAIR SIDE(src|ref) FILE: sacreBLEU's copy of a test set, once
    [ -s "$4" ] || "$python" -m sacrebleu -t "$1" -l "$2" --echo "$3" > "$4"
}

wmt_test_files() {  # sets src and ref to $testset's sides unless both were given
    if [ -z "$src" ] || [ -z "$ref" ]; then
        local stem="$out/${testset//\//_}"
        src="$stem.${pair%-*}" ref="$stem.${pair#*-}"
        wmt_echo_testset "$testset" "$pair" src "$src"
        wmt_echo_testset "$testset" "$pair" ref "$ref"
    fi
}

wmt_subword_nmt_codes() {  # sets codes_nmt: $codes (default $models/bpecodes) as subword-nmt 0.2 codes
    # fairseq's WMT'19 models ship fastBPE codes ("a b count"); subword-nmt applies them faithfully
    # only as version 0.2 codes (header, pairs): without the header no word-final merge applies.
    codes_nmt="$out/bpecodes.subword-nmt"
    "$python" -m fairseq_stream.tools.text convert-codes < "${codes:-$models/bpecodes}" > "$codes_nmt"
}

wmt_checkpoints() {  # the model files of $models, joined with ':' (an ensemble for fairseq)
    local found
    found=$( (ls "$models"/model*.pt "$models"/checkpoint*.pt 2>/dev/null || true) | paste -sd: -)
    [ -n "$found" ] || wmt_fail "no model*.pt or checkpoint*.pt in $models"
    echo "$found"
}

wmt_bench() {  # CHECKPOINTS: sets the array bench, the harness over the test set with the shared options
    bench=("$python" -m fairseq_stream.tools.bench --data "$models" --path "$1" --bpe-codes "$codes_nmt"
           --src "$src" --ref "$ref" --source-lang "${pair%-*}" --target-lang "${pair#*-}" --repeats "$runs"
           --no-progress --device "$device" --dtype "$dtype")
    [ -n "$limit" ] && bench+=(--limit "$limit")
    [ -n "$threads" ] && bench+=(--threads "$threads")
    return 0
}

# The scripts that sweep the harness over a local model (pruning_sweep.sh, topup_batching.sh):
# their shared options (the caller sets the defaults of beams, limit, runs and batch first).
data="$repo/user_dir_examples/demo" path="" codes="" batch=32 dry_run=""
wmt_local_option() {
    case "$1" in
        --data) data="${2-}";; --path) path="${2-}";; --bpe-codes) codes="${2-}";;
        --src) src="${2-}";; --ref) ref="${2-}";; --beams) beams="${2-}";;
        --limit) limit="${2-}";; --runs) runs="${2-}";; --batch) batch="${2-}";;
        --dry-run) dry_run=1; wmt_shift=1; return 0;;
        *) return 0;;
    esac
    wmt_shift=2
}

wmt_local_bench() {  # NAME: fill in the model's files, make $out (work/NAME), set the harness command `bench`
    path="${path:-$data/checkpoint.pt}" codes="${codes:-$data/bpe.codes}" src="${src:-$data/test.es}" ref="${ref:-$data/test.en}"
    out="${out:-$repo/work/$1}"
    mkdir -p "$out"
    bench=("$python" -m fairseq_stream.tools.bench --data "$data" --path "$path" --bpe-codes "$codes" --src "$src" --ref "$ref"
           --limit "$limit" --repeats "$runs" --batch-size "$batch" --device "$device" --dtype "$dtype" --no-progress)
    [ -n "$threads" ] && bench+=(--threads "$threads")
    return 0
}
