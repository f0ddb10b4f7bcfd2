#!/bin/sh
# A directory store that was tampered with, and an output directory with things planted in it:
# a corrupted object of the right size is named and the next push replaces it; a short object,
# a directory or a FIFO where an object should be exits 3 (corrupted, as dlk-data(1) says) at
# once and leaves no .part; a symlink or a FIFO planted at a .part name is refused, never
# written through, and neither is a symlinked folder planted in the output directory.
. "$(dirname "$0")/../lib.sh"

mkdir -p "$TEST_TMP/ds/sub"
printf 'deeper\n' >"$TEST_TMP/ds/sub/h.csv"
printf '0123456789abcdef\n' >"$TEST_TMP/ds/f.csv"
printf 'x,y\n1,2\n' >"$TEST_TMP/ds/g.csv"
STORE=$TEST_TMP/store
H=$(sha256sum <"$TEST_TMP/ds/f.csv" | cut -c1-64)
OBJ=$STORE/sha256/$H

test_expect_success 'setup: a dataset in a directory store' '
	dlk data push "$TEST_TMP/ds" --to "$STORE" --tag t@v1 -q >out &&
	test -f "$OBJ"
'

test_expect_success 'a corrupted object of the right size: get exits 3, the next push replaces it' '
	chmod u+w "$OBJ" && printf Z | dd of="$OBJ" bs=1 seek=3 conv=notrunc 2>/dev/null &&
	test_exit_code 3 dlk data get t@v1 --from "$STORE" out1 2>err &&
	grep -q "sha256/$H. is corrupted" err && grep -q "push the dataset again" err &&
	test ! -e out1/f.csv && test ! -e out1/f.csv.part &&
	dlk data push "$TEST_TMP/ds" --to "$STORE" 2>err && grep -q "uploaded 1 " err &&
	cmp "$OBJ" "$TEST_TMP/ds/f.csv" &&
	dlk data get t@v1 --from "$STORE" out1 && cmp out1/f.csv "$TEST_TMP/ds/f.csv"
'

test_expect_success 'a short object exits 3 (corrupted), not 4, and leaves no .part' '
	truncate -s 5 "$OBJ" &&
	test_exit_code 3 dlk data get t@v1 --from "$STORE" out2 2>err &&
	grep -q "is corrupted: it has 5 of the 17 bytes" err &&
	test ! -e out2/f.csv.part && test ! -e out2/f.csv
'

test_expect_success 'a directory where an object should be exits 3' '
	rm -f "$OBJ" && mkdir "$OBJ" &&
	test_exit_code 3 dlk data get t@v1 --from "$STORE" out3 2>err &&
	grep -q "is corrupted: a directory, not a file" err && test ! -e out3/f.csv.part &&
	rmdir "$OBJ"
'

test_expect_success 'a FIFO where an object should be exits 3 at once and leaves no .part' '
	mkfifo "$OBJ" &&
	test_exit_code 3 timeout 60 "$DLK" data get t@v1 --from "$STORE" out4 2>err &&
	grep -q "is corrupted: not a regular file" err && test ! -e out4/f.csv.part &&
	dlk data push "$TEST_TMP/ds" --to "$STORE" 2>err && grep -q "uploaded 1 " err && test -f "$OBJ" &&
	dlk data get t@v1 --from "$STORE" out4 && cmp out4/f.csv "$TEST_TMP/ds/f.csv"
'

test_expect_success 'a symlink planted at the .part name is refused, its target untouched' '
	mkdir -p out5 && echo untouched >victim && ln -s "$PWD/victim" out5/f.csv.part &&
	test_exit_code 1 dlk data get t@v1 --from "$STORE" out5 2>err &&
	grep -q "f.csv.part. is a symbolic link" err && grep -q "hint: remove it" err &&
	test "$(cat victim)" = untouched && test ! -e out5/f.csv
'

test_expect_success 'a FIFO planted at the .part name is refused at once' '
	mkdir -p out6 && mkfifo out6/f.csv.part &&
	test_exit_code 1 timeout 60 "$DLK" data get t@v1 --from "$STORE" out6 2>err &&
	grep -q "f.csv.part. is not a regular file" err
'

test_expect_success 'a symlinked folder planted in the output directory is not followed out of it' '
	mkdir -p out7 elsewhere && ln -s "$PWD/elsewhere" out7/sub &&
	test_exit_code 1 dlk data get t@v1 --from "$STORE" out7 2>err &&
	grep -q "out7/sub. leads outside" err && test -z "$(ls elsewhere)"
'

test_expect_success 'push --verify reads back what the store has and replaces what does not match' '
	chmod u+w "$OBJ" && printf Q | dd of="$OBJ" bs=1 seek=1 conv=notrunc 2>/dev/null &&
	dlk data push "$TEST_TMP/ds" --to "$STORE" --verify 2>err && grep -q "uploaded 1 " err &&
	cmp "$OBJ" "$TEST_TMP/ds/f.csv" &&
	dlk data push "$TEST_TMP/ds" --to "$STORE" --verify 2>err && grep -q "nothing uploaded" err
'

test_done
