#!/bin/sh
# `dlk train --worker --place-supervisor DIR` (what a program pod's init container runs): DIR
# gets dlk, every shared object it loaded and its loader, and DIR/dlk starts it so that it
# resolves every library inside DIR, with an empty environment; a dlk started through a loader
# refuses to place itself (it would copy the loader as dlk).
. "$(dirname "$0")/../lib.sh"

test_expect_success 'the placed dlk runs with an empty environment' '
	dlk train --worker --place-supervisor "$TEST_TMP/d" 2>err && cat err &&
	grep_q "placed dlk with [0-9]* shared objects in" err &&
	test -x "$TEST_TMP/d/dlk" && test -x "$TEST_TMP/d/bin/dlk" && ls "$TEST_TMP/d/lib" | grep -q "^libc\.so\." &&
	env -i "$TEST_TMP/d/dlk" version >out && grep_q "^dlk " out
'

test_expect_success 'its loader finds every library dlk links inside DIR/lib' '
	loader=$(ls "$TEST_TMP/d/lib" | grep "^ld-" | head -n 1) && test -n "$loader" &&
	env -i "$TEST_TMP/d/lib/$loader" --library-path "$TEST_TMP/d/lib" --list "$TEST_TMP/d/bin/dlk" >list && cat list &&
	grep -q "libc.so.6 => $TEST_TMP/d/lib/" list &&
	! awk -v d="$TEST_TMP/d/lib/" "\$2 == \"=>\" && index(\$3, d) != 1" list | grep -q .
'

test_expect_success 'a dlk started through a loader does not place itself' '
	test_exit_code 2 "$TEST_TMP/d/dlk" train --worker --place-supervisor "$TEST_TMP/e" 2>err && cat err &&
	grep_q "started through its loader" err && test ! -e "$TEST_TMP/e"
'

test_done
