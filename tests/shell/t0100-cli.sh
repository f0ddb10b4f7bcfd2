#!/bin/sh
# The command table is the one source of truth: -h, help, man pages and completion agree with it.
. "$(dirname "$0")/../lib.sh"
MANDIR=$TEST_ROOT/${BUILD:-build}/man
# the long options listed in an options table of `-h` output, one per line, sorted
help_opts() { grep -E "^ +(-[a-zA-Z], )?--" | help_opts_loose; }
help_opts_loose() { sed -E -n "s/^ *(-[a-zA-Z], )?--(\[no-\])?([a-z][a-z0-9-]*).*/--\3/p" | sort -u; }

test_expect_success 'dlk -h lists every command in the table' '
	dlk -h >out &&
	for c in $(dlk __commands); do grep -q "^  $c " out || { echo "missing $c"; exit 1; }; done
'

test_expect_failure_code 'dlk without a command is a usage error' 2 '
	dlk
'

test_expect_success 'an unknown command suggests the nearest one' '
	test_exit_code 2 dlk trian 2>err &&
	grep -q "unknown command .trian." err && grep -q "did you mean .dlk train." err &&
	test_exit_code 2 dlk frobnicate 2>err && grep -q "^hint: the commands are init, .*train.*, help (see .dlk -h.)$" err &&
	test_exit_code 2 dlk data frobnicate 2>err && grep -q "^hint: its commands are push, .*show.* (see .dlk data -h.)$" err
'

test_expect_success 'an unknown option suggests the nearest one' '
	test_exit_code 2 dlk init --forse 2>err &&
	grep -q "unknown option .--forse." err && grep -q "did you mean .--force." err
'

test_expect_success 'an invalid choice names the choices' '
	test_exit_code 2 dlk version -o xml 2>err &&
	grep -q "invalid value .xml." err && grep -q "text json yaml wide" err
'

test_expect_success 'the option tables declare what goes together' '
	test_exit_code 2 dlk train --local --worker 2>err && grep -q "^error: --local and --worker exclude each other$" err &&
	test_exit_code 2 dlk train --dry-run --follow 2>err && grep -q "^error: --follow goes with submitting, not with --dry-run$" err &&
	test_exit_code 2 dlk train --workers 2 2>err && grep -q "^error: --workers goes with --local$" err &&
	test_exit_code 2 dlk logs -f --previous x 2>err && grep -q "exclude each other" err &&
	test_exit_code 2 dlk logs --rank -1 x 2>err && grep -q "rank must be 0 or more" err &&
	test_exit_code 2 dlk logs --tail x x 2>err && grep -q "expects an integer" err
'

test_expect_success 'a bad value or a clash still lets -h show the help' '
	dlk train --local --worker --timeout never -h >out && grep -q "^usage: dlk train" out
'

test_expect_success 'the defaults -h shows are the defaults the code starts with' '
	dlk train -h >out &&
	grep -q -- "--workers N .*\[default: 1\]" out && grep -q -- "--max-restarts N .*\[default: 3\]" out &&
	dlk logs -h >out && grep -q -- "--tail N .*\[default: -1\]" out && ! grep -q -- "--rank N .*default" out
'

# every command and subcommand as its words: "train", "data push"
all_commands() { dlk __commands; dlk __subcommands | tr - " "; }

test_expect_success 'every command has -h, help CMD and a man page, and they agree' '
	all_commands | while read -r c; do
		m=$(echo "$c" | tr " " -)
		dlk $c -h >h1 && dlk help $c >h2 || { echo "no help for $c"; exit 1; }
		test -f "$MANDIR/dlk-$m.1" || { echo "no man page for $c"; exit 1; }
		# help CMD is the man page, as plain text: its name, and the options -h shows
		sed -n 3,4p h2 | grep -q "^       dlk-$m - " || { echo "help $c is not its page"; exit 1; }
		awk "/^OPTIONS\$/ { on = 1; next } /^[A-Z]/ && \$0 != \"GLOBAL OPTIONS\" { on = 0 } on" h2 |
			grep -E "^       (-[a-zA-Z], )?--" |
			help_opts_loose >from_page
		help_opts <h1 >from_help
		cmp from_help from_page || { echo "help $c differs from -h"; diff from_help from_page; exit 1; }
		# every long option that -h shows appears in the man page, and the other way round
		help_opts <h1 >from_help
		sed -n "/^\.SH OPTIONS/,/^\.SH EX/p" "$MANDIR/dlk-$m.1" | awk "/^\\.TP/ { getline; print }" |
			sed "s/\\\\f[BRI]//g; s/\\\\-/-/g" | help_opts_loose >from_man
		cmp from_help from_man || { echo "options differ for $c"; diff from_help from_man; exit 1; }
	done
'

test_expect_success 'help shows the project file and dlk pages, as plain text, from the binary' '
	dlk help dlk.yaml >out && sed -n 1p out | grep -qx "DLK.YAML(5)" &&
	grep -q "^       dlk.yaml - the dlk project file" out && grep -q "^       training" out &&
	dlk help dlk >out && grep -q "^       dlk - " out && grep -q "^EXIT STATUS" out &&
	grep -q "^       75 " out &&
	for p in dlk dlk.yaml $(dlk __commands) "data push"; do
		dlk help $p >out || exit 1
		# no markup left: requests, font changes, escapes
		! grep -nE "^\.[A-Za-z]|\\\\f|\\\\-|\\\\\\(|@[A-Z_]+@" out || { echo "markup left in help $p"; exit 1; }
	done
'

test_expect_success 'help prints the words that man shows for every page' '
	command -v man >/dev/null || exit 0
	words() { tr -s " \n" "\n\n" | sed -n "/^NAME\$/,\$p"; }
	for m in "$MANDIR"/*; do
		p=${m##*/}
		case $p in
		dlk.yaml.5) t=dlk.yaml ;;
		dlk.1) t=dlk ;;
		*) t=$(echo "${p%.1}" | sed "s/^dlk-//; s/-/ /") ;;
		esac
		dlk help $t | words >plain &&
		LC_ALL=C MANWIDTH=80 man --nh --nj -l "$m" 2>/dev/null | sed "\$d" | words | sed "s/^o\$/*/" >man &&
		cmp plain man || { echo "dlk help $t differs from man:"; diff plain man | head; exit 1; }
	done
'

test_expect_success 'help of a page that does not exist is a usage error' '
	test_exit_code 2 dlk help trian 2>err && grep -q "did you mean .dlk train." err &&
	test_exit_code 2 dlk help dlk.yaml more 2>err && grep -q "takes no more words" err &&
	test_exit_code 2 dlk help data pussh 2>err && grep -q "has no command .pussh." err &&
	dlk __complete help dl >out && grep -qx dlk.yaml out && grep -qx dlk out
'

test_expect_success 'on a terminal, help opens the page in man' '
	command -v script >/dev/null || exit 0
	mkdir bin && printf "#!/bin/sh\necho \"\$*\" >\"%s/args\"\ncat >\"%s/page\"\n" "$PWD" "$PWD" >bin/man &&
	chmod +x bin/man &&
	PATH="$PWD/bin:$PATH" script -qec "$DLK help train" /dev/null >/dev/null &&
	test "$(cat args)" = "-l -" && grep -q "^\.TH DLK\\\\-TRAIN 1" page &&
	grep -q "^\.SH OPTIONS" page && ! grep -q "@OPTIONS@" page && grep -q "workers" page &&
	dlk help train >plain && ! grep -q "^\.TH" plain
'

test_expect_success 'completion offers exactly the options that -h shows' '
	all_commands | while read -r c; do
		dlk $c -h | help_opts >want
		dlk __complete $c -- | sort -u >got
		cmp want got || { echo "completion differs for $c"; diff want got; exit 1; }
	done
'

test_expect_success 'completion offers commands, option values and files' '
	dlk __complete tr >out && grep -qx train out &&
	dlk __complete version -o "" >out && grep -qx json out && grep -qx yaml out &&
	dlk __complete init --example "" >out && grep -qx cnn out &&
	dlk __complete -f "" >out && grep -qx :file out &&
	dlk __complete completion "" >out && grep -qx bash out && grep -qx zsh out &&
	dlk __complete help t >out && grep -qx train out &&
	dlk __complete train --set training.ep >out && grep -qx training.epochs= out &&
	dlk __complete --set model.layers.0.d >out && grep -qx model.layers.0.dense.units= out
'

test_expect_success 'a command with subcommands lists them, completes them and suggests the nearest' '
	dlk data -h >out && grep -q "^  push " out && grep -q "^  get " out &&
	dlk __complete data "" >out && grep -qx push out && grep -qx show out &&
	dlk __complete data pu >out && grep -qx push out && ! grep -qx show out &&
	dlk __complete data push --t >out && grep -qx -- --to out && grep -qx -- --tag out &&
	dlk __complete help data s >out && grep -qx show out &&
	test_exit_code 2 dlk data 2>err && grep -q "needs one of its commands: push ls show get" err &&
	test_exit_code 2 dlk data pussh 2>err && grep -q "did you mean .dlk data push." err &&
	test_exit_code 2 dlk data push 2>err && grep -q "needs PATH" err &&
	test_exit_code 2 dlk data push --bogus x 2>err && grep -q "unknown option .--bogus. for .dlk data push." err &&
	grep -qF "dlk\\-data\\-push" "$MANDIR/dlk-data.1"
'

test_expect_success 'the bash completion script completes through the binary' '
	command -v bash >/dev/null || exit 0
	mkdir bin && ln -s "$DLK" bin/dlk && ln -s "$DLK" bin/dlk-train &&
	PATH="$PWD/bin:$PATH" bash -c "
		source <(dlk completion bash)
		COMP_WORDS=(dlk tra); COMP_CWORD=1; _dlk; echo \"\${COMPREPLY[*]}\"
		COMP_WORDS=(dlk-train --dry); COMP_CWORD=1; _dlk; echo \"\${COMPREPLY[*]}\"
	" >out &&
	sed -n 1p out | grep -qx train && sed -n 2p out | grep -qx -- --dry-run
'

test_expect_success 'completion offers what an argument can be: bundles, runs, jobs' '
	mkdir c && cd c && touch a.dlk page.html run.json notes.txt && mkdir sub &&
	dlk __complete serve --local "" >out && test "$(cat out)" = ":file .dlk" &&
	dlk __complete lineage "" >out && test "$(cat out)" = ":file .dlk" &&
	dlk __complete report "" >out && test "$(cat out)" = ":file .dlk .json" &&
	dlk __complete report --compare "" >out && test "$(cat out)" = ":file .dlk .json" &&
	dlk __complete serve "" >out && ! grep -q :file out &&
	mkdir ../bin && ln -s "$DLK" ../bin/dlk &&
	PATH="$PWD/../bin:$PATH" bash -c "
		source <(dlk completion bash)
		COMP_WORDS=(dlk serve --local \"\"); COMP_CWORD=3; _dlk; echo \"\${COMPREPLY[*]}\"
		COMP_WORDS=(dlk report \"\"); COMP_CWORD=2; _dlk; echo \"\${COMPREPLY[*]}\"
	" >out &&
	sed -n 1p out | tr " " "\n" | sort | tr "\n" " " | grep -qx "a.dlk sub " &&
	sed -n 2p out | tr " " "\n" | sort | tr "\n" " " | grep -qx "a.dlk run.json sub " &&
	awk "BEGIN { for (i = 0; i < 64; i++) printf \"%d,%d\\n\", i % 2, i % 2 }" >t.csv &&
	printf "name: tiny\ndata: {format: csv, train: {source: t.csv}}\nmodel: {input: [1], layers: [{dense: {units: 2}}]}\ntraining: {epochs: 1, threads: 1}\n" >dlk.yaml &&
	dlk train --local -q >/dev/null 2>err && id=$(ls .dlk/runs/tiny | sed -n "s/\.json\$//p") && test -n "$id" &&
	dlk __complete report "" >out && grep -qx "$id" out &&
	dlk __complete report "${id%${id#??}}" >out && grep -qx "$id" out &&
	dlk __complete report zz >out && ! grep -qx "$id" out
'

test_expect_success 'the zsh completion script is valid zsh' '
	if command -v zsh >/dev/null; then dlk completion zsh >_dlk && zsh -n _dlk; fi
'

test_expect_success 'man pages render without warnings' '
	command -v man >/dev/null || exit 0
	for m in "$MANDIR"/*; do
		out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$m" 2>&1 >/dev/null) || exit 1
		[ -z "$out" ] || { echo "$m: $out"; exit 1; }
	done
'

test_expect_success 'man dlk documents every exit code' '
	for code in 0 1 2 3 4 5 6 7 8 75 130; do
		grep -q "^\.B $code\$" "$MANDIR/dlk.1" || { echo "exit code $code undocumented"; exit 1; }
	done
'

test_expect_success 'dlk-CMD symlinks behave as dlk CMD' '
	ln -s "$DLK" dlk-version && ./dlk-version >a && dlk version >b && cmp a b &&
	ln -s "$DLK" dlk-nosuch && test_exit_code 2 ./dlk-nosuch 2>err && grep -q "unknown command" err
'

test_expect_success 'global options are accepted before and after the command' '
	dlk -o json version >a && dlk version -o json >b && cmp a b &&
	grep -q "\"version\"" a
'

test_expect_success 'version names the libraries' '
	dlk version >out && grep -q "^dlk " out && grep -q libyaml out && grep -q OpenBLAS out
'

test_expect_success 'a usage error names only the options given, and says what to do' '
	test_exit_code 2 dlk serve fashion.dlk --port 8000 2>err &&
	grep -q "^error: --port goes with --local or --worker" err &&
	grep -q "^hint: serve bundles on this machine: dlk serve --local NAME.dlk" err &&
	test_exit_code 2 dlk serve x --host ::1 --port 1 --canary 5 2>err && grep -q "^error: --host and --port go with" err &&
	test_exit_code 2 dlk logs --tail 5 --since 1m --rank 0 --follow --previous x 2>err &&
	grep -q "^error: --follow and --previous exclude each other$" err
'

test_expect_success '--version answers the version in one line, as git does' '
	dlk --version >out && test "$(wc -l <out)" = 1 &&
	dlk version >full && head -n 1 full >first && cmp first out &&
	dlk -f nosuch.yaml --version >out2 && cmp out out2 &&
	dlk train --version >out3 && cmp out out3 &&
	dlk -h >help && grep -q -- "--version" help
'

test_done
