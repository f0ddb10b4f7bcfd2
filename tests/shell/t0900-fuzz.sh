#!/bin/sh
# Every parser of outside bytes has a libFuzzer target (tests/fuzz/fuzz_NAME.c) and a seed corpus
# (tests/fuzz/NAME/). Here each replays its corpus and then fuzzes briefly, under ASan and UBSan.
# `make fuzz FUZZ_SECONDS=N` runs them for longer.
# The fuzz targets are one build (build-fuzz/, always ASan + UBSan), whichever pass runs this: the
# sanitizer pass (BUILD=build-san) replays the corpora and leaves the fuzzing to the normal pass,
# so CI does not fuzz the same binaries twice. DLK_FUZZ_SECONDS=N sets the seconds either way.
. "$(dirname "$0")/../lib.sh"
FUZZ_BUILD=$TEST_ROOT/build-fuzz
case ${BUILD:-build} in
*build-san) SECONDS_EACH=${DLK_FUZZ_SECONDS:-0} ;;
*) SECONDS_EACH=${DLK_FUZZ_SECONDS:-3} ;;
esac

if ! command -v clang >/dev/null 2>&1; then
	test_missing 'clang is installed'
fi

mkdir -p "$FUZZ_BUILD/crashes"

test_expect_success 'every fuzz target has a seed corpus and every corpus a target' '
	for f in "$TEST_ROOT"/tests/fuzz/fuzz_*.c; do
		t=${f##*/fuzz_}; t=${t%.c}
		[ -n "$(ls -A "$TEST_ROOT/tests/fuzz/$t" 2>/dev/null)" ] || { echo "no corpus for $t"; exit 1; }
		[ -x "$FUZZ_BUILD/fuzz_$t" ] || { echo "not built: fuzz_$t (make fuzz-build)"; exit 1; }
	done
	for d in "$TEST_ROOT"/tests/fuzz/*/; do
		t=$(basename "$d"); [ -f "$TEST_ROOT/tests/fuzz/fuzz_$t.c" ] || { echo "corpus without target: $t"; exit 1; }
	done
'

for f in "$TEST_ROOT"/tests/fuzz/fuzz_*.c; do
	t=${f##*/fuzz_}; t=${t%.c}
	if [ "$SECONDS_EACH" = 0 ]; then
		test_expect_success "fuzz_$t: the seed corpus replays" "
			\"$FUZZ_BUILD/fuzz_$t\" -runs=0 -rss_limit_mb=2048 \"$TEST_ROOT/tests/fuzz/$t\" >replay.log 2>&1 ||
				{ tail -n 30 replay.log; exit 1; }
		"
		continue
	fi
	test_expect_success "fuzz_$t: the seed corpus replays and ${SECONDS_EACH}s of fuzzing find nothing" "
		mkdir corpus &&
		\"$FUZZ_BUILD/fuzz_$t\" -runs=0 -rss_limit_mb=2048 \"$TEST_ROOT/tests/fuzz/$t\" >replay.log 2>&1 ||
			{ tail -n 30 replay.log; exit 1; }
		\"$FUZZ_BUILD/fuzz_$t\" -max_total_time=$SECONDS_EACH -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
			-artifact_prefix=$FUZZ_BUILD/crashes/$t- corpus \"$TEST_ROOT/tests/fuzz/$t\" >fuzz.log 2>&1 ||
			{ tail -n 40 fuzz.log; echo \"the input is kept in $FUZZ_BUILD/crashes/: add it to tests/fuzz/$t/\"; exit 1; }
		grep -q DONE fuzz.log
	"
done

test_done
