#!/usr/bin/env bash
# Build the plugins' environments on a bare machine, make the traces, and run bench_device.py side by side.
#
#   bash benchmarks/bench_device.sh CODE_DIR [BASE_CODE_DIR]
#
# CODE_DIR (and BASE_CODE_DIR, e.g. an export of main to compare with) hold tb_plugin/, benchmarks/ and setup.py.
# Wheels for what the machine lacks (msgspec, isal, psutil, torch_tb_profiler 0.4.3; rapidgzip for the gunzip step)
# are taken from $WHL (default .whl); the machine's python3 provides numpy, pandas, pyarrow, tensorboard and
# werkzeug. Results and logs go to $OUT (default .bench/out) as results.tar.gz, with report.md: issue 29's goals,
# each with its figure, the host and the commit ($COMMIT, default git's HEAD of CODE_DIR). Every step has a time
# limit, so a stuck step costs its limit, never the whole call. What a call built (venvs, traces) is kept in /tmp
# and reused by the next call on the same machine.
#
# Steps (STEPS, default "ours old"): ours (this code: 164 MB, 2 GB, 64 ranks; the heavy-route crowd of $HEAVY
# clients and the memory ratio of $RATIO clients), base (BASE_CODE_DIR on the same traces), old (0.4.3 on them),
# profile (profile_load.py), gunzip (bench_gunzip.py: ISA-L against rapidgzip on the 2 GB trace), big (ours on the
# $BIG traces: 5000 and/or 10000 MB, made here: the 10 GB row and the scaling curve). TRACES (default "164 2000")
# and RANKS (default 64, 0: none) choose the traces. One call of 10 minutes holds "ours old" (about 8 minutes);
# "base gunzip" and "big" with BIG=5000 go in a second call, BIG=10000 in a third (see benchmarks/README.md).
set -u
CODE=$(realpath "$1"); BASE=${2:+$(realpath "$2")}
FINAL=${OUT:-.bench/out}; mkdir -p "$FINAL"; FINAL=$(realpath "$FINAL")
OUT=$(mktemp -d /tmp/bench_results.XXXX)  # everything, packed into $FINAL/results.tar.gz at the end
WHL=$(realpath "${WHL:-.whl}")
STEPS=${STEPS:-ours old}
TRACES=${TRACES-164 2000}  # TRACES= (empty): none
RANKS=${RANKS:-64}
BIG=${BIG:-}
HEAVY=${HEAVY:-50}
RATIO=${RATIO:-200}
COMMIT=${COMMIT:-$(git -C "$CODE" rev-parse --short HEAD 2>/dev/null || echo unknown)}
export PYTHONUNBUFFERED=1
say() { echo "[$(date +%T)] $*" | tee -a "$OUT/steps.log"; }
# seconds left of this call (LIMIT, default 570 of the device's 600), so that the results are always packed
left() { local n=$(( ${LIMIT:-570} - SECONDS )); echo $(( n < 30 ? 30 : n )); }
has() { [[ " $STEPS " == *" $1 "* ]]; }

venv() {  # venv DIR: a venv that sees python3's packages (also when python3 is itself a venv); kept if it works
  "$1/bin/python" -c 'import tensorboard' 2>/dev/null && return 0
  python3 -m venv "$1" || return 1
  python3 -c 'import site; print("\n".join(site.getsitepackages()))' \
    > "$("$1/bin/python" -c 'import site; print(site.getsitepackages()[0])')/system.pth"
}
install_plugin() {  # install_plugin VENV CODE_DIR
  timeout 120 "$1/bin/pip" install -q --no-index --no-deps "$WHL"/msgspec-*.whl "$WHL"/isal-*.whl \
    "$WHL"/psutil-*.whl && (cd "$2" && TB_PLUGIN_SKIP_FRONTEND=1 timeout 300 "$1/bin/pip" install -q --no-index \
    --no-deps --no-build-isolation --force-reinstall .)
}

say "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GB, $(df -h /tmp | awk 'NR==2 {print $4}') free, $(python3 --version), commit $COMMIT"
has ours || has big && { venv /tmp/ours && install_plugin /tmp/ours "$CODE" || say "ours venv failed"; }
has base && [ -n "$BASE" ] && { venv /tmp/base && install_plugin /tmp/base "$BASE" || say "base venv failed"; }
has old && { venv /tmp/old && timeout 120 /tmp/old/bin/pip install -q --no-index --no-deps "$WHL"/psutil-*.whl \
  "$WHL"/torch_tb_profiler-*.whl || say "old venv failed"; }
PY=/tmp/ours/bin/python; [ -x $PY ] || PY=/tmp/base/bin/python
$PY -c 'import tensorboard, msgspec, isal, psutil, numpy, pyarrow; print("tensorboard", tensorboard.__version__)' \
  2>&1 | tee -a "$OUT/steps.log"

SRC=$CODE/../src.json.gz
[ -f "$SRC" ] || SRC=tests/data/h200/transformer_bf16/vm_562.1795654446295758078.pt.trace.json.gz
make_trace() {  # make_trace MB: /tmp/runs/tMB/*.gz, made once
  ls /tmp/runs/t$1/*.pt.trace.json.gz >/dev/null 2>&1 || { say "making the $1 MB trace" >&2; timeout 400 python3 \
    "$CODE/benchmarks/make_big_trace.py" "$SRC" --target-mb "$1" --out-dir "/tmp/runs/t$1" > "$OUT/make_$1.log" 2>&1 \
    || say "make_big_trace $1 failed" >&2; }
  ls /tmp/runs/t$1/*.pt.trace.json.gz
}
ARGS=(); for mb in $TRACES; do ARGS+=(--trace "$mb=$(make_trace "$mb")"); done
if [ "$RANKS" != 0 ]; then
  [ -d /tmp/runs/ranks$RANKS ] || timeout 120 python3 "$CODE/benchmarks/make_ranks.py" "${RANKS_SRC:-samples/ddp_resnet}" \
    --ranks "$RANKS" --out /tmp/runs/ranks$RANKS > "$OUT/make_ranks.log" 2>&1 || say "make_ranks failed"
  ARGS+=(--ranks "ranks64=/tmp/runs/ranks$RANKS")  # named ranks64 in the report whatever RANKS is
fi
HEAVYARGS=(--heavy "$HEAVY" --ratio-clients "$RATIO"); for mb in $TRACES; do HEAVYARGS+=(--heavy-trace "$mb"); done

if has profile; then
  for mb in ${PROFILE_MB:-164}; do
    say "profile (ours) on $mb MB"
    (cd "$CODE" && timeout 300 $PY benchmarks/profile_load.py "$(make_trace "$mb")" --parts "${PARTS:-1,4,8,15}" \
       --cprofile ${PROFILE_FLAGS---workspace --views} --json "$OUT/profile_$mb.json" > "$OUT/profile_$mb.txt" 2>&1) \
       || say "profile $mb failed"
  done
fi
if has gunzip; then
  say "gunzip: ISA-L against rapidgzip"
  timeout 120 $PY -m pip install -q --no-index --no-deps --target /tmp/rgz "$WHL"/rapidgzip-*.whl || say "no rapidgzip wheel"
  for mb in ${GUNZIP_MB:-2000}; do
    PYTHONPATH=/tmp/rgz timeout 240 $PY "$CODE/benchmarks/bench_gunzip.py" "$(make_trace "$mb")" --repeat 2 \
      --json "$OUT/gunzip_$mb.json" > "$OUT/gunzip_$mb.txt" 2>&1 || say "gunzip $mb failed"
  done
fi
OLD=(); has old && OLD=(--old /tmp/old/bin/python --old-timeout "${OLD_TIMEOUT:-90}")
if has ours; then
  say "bench: ours (and old)"
  timeout "$(left)" $PY "$CODE/benchmarks/bench_device.py" --ours $PY --label ours --commit "$COMMIT" "${OLD[@]}" \
    "${ARGS[@]}" "${HEAVYARGS[@]}" --out "$OUT/ours" > "$OUT/ours.txt" 2> "$OUT/ours.err"; say "ours rc $?"
  OLD=()
fi
if has base && [ -n "$BASE" ]; then
  say "bench: base"
  timeout "$(left)" /tmp/base/bin/python "$CODE/benchmarks/bench_device.py" --ours /tmp/base/bin/python --label base \
    "${OLD[@]}" "${ARGS[@]}" --out "$OUT/base" > "$OUT/base.txt" 2> "$OUT/base.err"; say "base rc $?"
fi
if has big; then
  BIGARGS=(); for mb in $BIG; do BIGARGS+=(--trace "$mb=$(make_trace "$mb")"); done
  say "bench: ours on $BIG MB"
  timeout "$(left)" $PY "$CODE/benchmarks/bench_device.py" --ours $PY --label ours --commit "$COMMIT" "${BIGARGS[@]}" \
    --timeout 300 --out "$OUT/big" > "$OUT/big.txt" 2> "$OUT/big.err"; say "big rc $?"
fi
$PY "$CODE/benchmarks/bench_device.py" --report "$OUT"/*/bench_device_*.json > "$OUT/report.md" 2>> "$OUT/steps.log"
cp "$OUT/report.md" "$FINAL/report.md" 2>/dev/null
tar -czf "$FINAL/results.tar.gz" -C "$OUT" .
cat "$OUT/report.md"; for f in "$OUT"/*.txt; do echo "== $f"; tail -25 "$f"; done
