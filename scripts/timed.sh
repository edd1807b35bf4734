#!/bin/sh
# timed.sh LABEL COMMAND...: run COMMAND, then say how long it took and whether it passed; exit with its status.
label=$1
shift
start=$(date +%s)
status=0
"$@" || status=$?
took=$(( $(date +%s) - start ))
if [ "$status" -eq 0 ]; then result=passed; else result="FAILED (exit $status)"; fi
printf '%s: %s in %dm%02ds\n' "$label" "$result" $((took / 60)) $((took % 60))
exit "$status"
