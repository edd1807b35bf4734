#!/usr/bin/env bash
# Build both plugins' environments on a bare machine, make the big traces, and run bench_device.py side by side.
#
#   bash benchmarks/bench_device.sh CODE_DIR [BASE_CODE_DIR]
#
# CODE_DIR (and BASE_CODE_DIR, e.g. an export of main to compare with) hold tb_plugin/, benchmarks/ and setup.py.
# Wheels for what the machine lacks (msgspec, isal, psutil, torch_tb_profiler 0.4.3) are taken from $WHL (default
# .whl); the machine's python3 provides numpy, pandas, pyarrow, tensorboard and werkzeug. Results and logs go to
# $OUT (default .bench/out) as results.tar.gz. Every step has a time limit, so a stuck step costs its limit, never the whole call.
# Steps: STEPS="profile base ours old" (default all); TRACES="164 2000" (MB; default both).
set -u
CODE=$(realpath "$1"); BASE=${2:+$(realpath "$2")}
FINAL=${OUT:-.bench/out}; mkdir -p "$FINAL"; FINAL=$(realpath "$FINAL")
OUT=$(mktemp -d /tmp/bench_results.XXXX)  # everything, packed into $FINAL/results.tar.gz at the end
WHL=$(realpath "${WHL:-.whl}")
STEPS=${STEPS:-profile base ours old}
TRACES=${TRACES:-164 2000}
export PYTHONUNBUFFERED=1
say() { echo "[$(date +%T)] $*" | tee -a "$OUT/steps.log"; }

venv() {  # venv DIR WHEEL... : a venv that sees python3's packages (also when python3 is itself a venv)
  python3 -m venv "$1" || return 1
  python3 -c 'import site; print("\n".join(site.getsitepackages()))' \
    > "$("$1/bin/python" -c 'import site; print(site.getsitepackages()[0])')/system.pth"
}
install_plugin() {  # install_plugin VENV CODE_DIR
  timeout 120 "$1/bin/pip" install -q --no-index --no-deps "$WHL"/msgspec-*.whl "$WHL"/isal-*.whl \
    "$WHL"/psutil-*.whl && (cd "$2" && TB_PLUGIN_SKIP_FRONTEND=1 timeout 300 "$1/bin/pip" install -q --no-index \
    --no-deps --no-build-isolation .)
}

say "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GB, $(python3 --version)"
for step in $STEPS; do
  case $step in
    ours) venv /tmp/ours && install_plugin /tmp/ours "$CODE" || say "ours venv failed" ;;
    base) [ -n "$BASE" ] && { venv /tmp/base && install_plugin /tmp/base "$BASE" || say "base venv failed"; } ;;
    old) venv /tmp/old && timeout 120 /tmp/old/bin/pip install -q --no-index --no-deps "$WHL"/psutil-*.whl \
           "$WHL"/torch_tb_profiler-*.whl || say "old venv failed" ;;
  esac
done
PY=/tmp/ours/bin/python; [ -x $PY ] || PY=/tmp/base/bin/python
$PY -c 'import tensorboard, msgspec, isal, psutil, numpy, pyarrow; print("tensorboard", tensorboard.__version__)' \
  2>&1 | tee -a "$OUT/steps.log"

SRC=$CODE/../src.json.gz
[ -f "$SRC" ] || SRC=tests/data/h200/transformer_bf16/vm_562.1795654446295758078.pt.trace.json.gz
declare -A TRACE
for mb in $TRACES; do
  say "making the ${mb} MB trace"
  timeout 300 python3 "$CODE/benchmarks/make_big_trace.py" "$SRC" --target-mb "$mb" --out-dir "/tmp/runs/t$mb" \
    > "$OUT/make_$mb.log" 2>&1 || say "make_big_trace $mb failed"
  TRACE[$mb]=$(ls /tmp/runs/t$mb/*.pt.trace.json.gz)
done
ARGS=(); for mb in $TRACES; do ARGS+=(--trace "$mb=${TRACE[$mb]}"); done

if [[ " $STEPS " == *" profile "* ]]; then
  for mb in ${PROFILE_MB:-164}; do
    say "profile (ours) on $mb MB"
    (cd "$CODE" && timeout 300 $PY benchmarks/profile_load.py "${TRACE[$mb]}" --parts "${PARTS:-1,4,8,15}" \
       --cprofile ${PROFILE_FLAGS---workspace --views} --json "$OUT/profile_$mb.json" > "$OUT/profile_$mb.txt" 2>&1) \
       || say "profile $mb failed"
  done
fi
OLD=(); [[ " $STEPS " == *" old "* ]] && OLD=(--old /tmp/old/bin/python --old-timeout "${OLD_TIMEOUT:-90}")
if [[ " $STEPS " == *" base "* && -n "$BASE" ]]; then
  say "bench: base (and old)"
  timeout 480 /tmp/base/bin/python "$CODE/benchmarks/bench_device.py" --ours /tmp/base/bin/python "${OLD[@]}" \
    "${ARGS[@]}" --crowd-trace 164 --out "$OUT/base" > "$OUT/base.txt" 2> "$OUT/base.err"; say "base rc $?"
  OLD=()
fi
if [[ " $STEPS " == *" ours "* ]]; then
  say "bench: ours"
  timeout 480 $PY "$CODE/benchmarks/bench_device.py" --ours $PY "${OLD[@]}" "${ARGS[@]}" --crowd-trace 164 \
    --out "$OUT/ours" > "$OUT/ours.txt" 2> "$OUT/ours.err"; say "ours rc $?"
fi
tar -czf "$FINAL/results.tar.gz" -C "$OUT" .
for f in "$OUT"/*.txt; do echo "== $f"; tail -40 "$f"; done
