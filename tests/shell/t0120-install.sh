#!/bin/sh
# make install puts the binary, a dlk-CMD link per command, the man pages and the completion
# scripts where the system looks for them, under DESTDIR.
. "$(dirname "$0")/../lib.sh"

test_expect_success 'make install DESTDIR=... PREFIX=/usr installs everything the table lists' '
	# a normal build is what gets installed, also when the suite runs under SANITIZE=1
	env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS -u BUILD make -s -C "$TEST_ROOT" install SANITIZE= DESTDIR="$PWD/root" PREFIX=/usr >log 2>&1 || { cat log; exit 1; }
	test -x root/usr/bin/dlk &&
	for c in $(dlk __commands); do
		test "$(readlink root/usr/bin/dlk-$c)" = dlk || { echo "no dlk-$c link"; exit 1; }
		test -f root/usr/share/man/man1/dlk-$c.1 || { echo "no man page for $c"; exit 1; }
	done &&
	test -f root/usr/share/man/man1/dlk.1 && test -f root/usr/share/man/man5/dlk.yaml.5 &&
	test -f root/usr/share/bash-completion/completions/dlk &&
	test -f root/usr/share/zsh/site-functions/_dlk &&
	root/usr/bin/dlk-version >out && grep -q "^dlk " out
'

test_done
