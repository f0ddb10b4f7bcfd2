#!/bin/sh
# The examples of README.md and docs/*.md work: every ```sh block runs, unless the line before
# its fence says why it cannot here (<!-- no-test: needs a cluster -->). The blocks of a page
# run in order in one scratch directory, with the dlk under test first on PATH, as a reader
# would type them into one shell: a block starts in the directory the one before it ended in.
# A failing block is named by its file and line.
. "$(dirname "$0")/../lib.sh"

pages() { cd "$TEST_ROOT" && ls README.md docs/*.md 2>/dev/null; }

# blocks PAGE OUTDIR: writes each ```sh block of PAGE to OUTDIR/LINE.sh (LINE: its fence's line)
# and prints "LINE run" or "LINE skip REASON" for each, in order.
blocks() {
	awk -v out="$2" '
		/^```sh[ \t]*$/ && !inblock {
			inblock = 1; line = NR; file = out "/" NR ".sh"
			if (prev ~ /^<!-- no-test: [^ ].* -->$/) {
				reason = prev; sub(/^<!-- no-test: /, "", reason); sub(/ -->$/, "", reason)
				print NR " skip " reason
			} else {
				print NR " run"
			}
			printf "" > file
			next
		}
		/^```/ && inblock { inblock = 0; close(file); prev = $0; next }
		inblock { print > file; next }
		/[^ \t]/ { prev = $0 }
		END { if (inblock) print line " unclosed" }
	' "$TEST_ROOT/$1"
}

mkdir -p "$TEST_TMP/bin" && ln -s "$DLK" "$TEST_TMP/bin/dlk" || test_missing 'a scratch bin directory'
test -x "$DLK" || test_missing "the dlk binary ($DLK)"

runnable=0
for page in $(pages); do
	src="$TEST_TMP/blocks/$page"
	work="$TEST_TMP/pages/$page"
	mkdir -p "$src" "$work"
	echo "$work" >"$src/cwd"
	blocks "$page" "$src" >"$src/list"
	while read -r line what reason; do
		case $what in
		unclosed)
			test_expect_success "$page:$line: the sh block is closed" 'false' ;;
		skip)
			echo "# $page:$line: not run: $reason" ;;
		run)
			runnable=$((runnable + 1))
			# the block, then where it ended, so that the next block starts there
			printf '\npwd >"%s"\n' "$src/cwd" >>"$src/$line.sh"
			test_expect_success "$page:$line: the example runs" '
				cd "$(cat "'"$src"'/cwd")" &&
				PATH="'"$TEST_TMP"'/bin:$PATH" timeout 900 sh -e "'"$src/$line.sh"'"
			' ;;
		esac
	done <"$src/list"
done

test_expect_success 'the README has examples that run, and every skipped one says why' '
	test '"$runnable"' -gt 0 &&
	for page in $(pages); do
		grep -n "^<!-- no-test" "$TEST_ROOT/$page" | grep -v "^[0-9]*:<!-- no-test: [^ ].* -->\$" &&
			{ echo "$page: a no-test marker without its reason"; exit 1; }
		:
	done
'

test_expect_success 'a failing block is named by its file and line' '
	mkdir -p p/docs b && printf "# t\n\n\`\`\`sh\ntrue\n\`\`\`\n\n<!-- no-test: needs a cluster -->\n\`\`\`sh\nfalse\n\`\`\`\n\`\`\`sh\nexit 3\n\`\`\`\n" >p/docs/x.md &&
	TEST_ROOT=$PWD/p blocks docs/x.md b >list &&
	printf "3 run\n8 skip needs a cluster\n11 run\n" >want && cmp want list &&
	sh -e b/3.sh && ! sh -e b/11.sh && test "$(cat b/8.sh)" = false
'

test_done
