#!/bin/sh
# run_fuzzer.sh BINARY NAME WORK_DIR CORPUS_DIR...: one libFuzzer run of GOSSAMER_FUZZ_SECONDS
# (default 10) seconds, the ctest command of "fuzz: NAME under libFuzzer" (scripts/fuzz.sh).
# New inputs go to WORK_DIR/corpus/NAME (the first corpus folder, so the source tree is never
# written); a crash, leak, timeout or sanitizer report fails the test and leaves its input in
# WORK_DIR/artifacts/NAME/. Ends with one line of figures: executions, coverage, corpus.
set -u
bin="$1"; name="$2"; work="$3"; shift 3
seconds="${GOSSAMER_FUZZ_SECONDS:-10}"
rm -rf "$work/artifacts/$name"  # what an earlier run found is in its own summary
mkdir -p "$work/corpus/$name" "$work/artifacts/$name" "$work/logs"
log="$work/logs/$name.log"
# -timeout: an input that runs 10 s is a hang; -rss_limit_mb: one that takes 2 GiB is a bug.
"$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$work/artifacts/$name/" \
    "$work/corpus/$name" "$@" >"$log" 2>&1
status=$?
done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1)
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
cov=$(echo "$done_line" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
ft=$(echo "$done_line" | sed -n 's/.*ft: \([0-9]*\).*/\1/p')
corp=$(echo "$done_line" | sed -n 's/.*corp: \([0-9]*\).*/\1/p')
if [ "$status" -ne 0 ]; then
  tail -n 40 "$log"
  echo "fuzz $name: FAILED (status $status) after ${execs:-?} executions; the input is in" \
       "$work/artifacts/$name/ (fix the decoder, then add it to tests/fuzz/regressions/$name/)"
  echo "fuzz $name: FAILED after ${execs:-?} executions (input in $work/artifacts/$name/)" \
    >"$work/summary-$name.txt"
  exit 1
fi
echo "fuzz $name: ${execs:-?} executions in $seconds s, coverage ${cov:-?} edges," \
     "${ft:-?} features, corpus ${corp:-?} inputs" | tee "$work/summary-$name.txt"
