#!/bin/sh
# The user's own program with the real frameworks (the venv .ci/deps installs): the PyTorch
# example `dlk init --example pytorch` writes, run by `dlk train --local --workers 2`, ends with
# the same loss as `torchrun --nproc-per-node 2` run by hand, and as torchrun run by dlk with its
# rendezvous flags; the JAX example's 2-process all-reduce gives both processes the right sum.
. "$(dirname "$0")/../lib.sh"

VENV=$TEST_ROOT/.deps/frameworks/bin
D=/usr/share/datasets/fashion-mnist
if [ ! -x "$VENV/python3" ] || [ ! -x "$VENV/torchrun" ] || [ ! -f "$D/train-labels-idx1-ubyte.gz" ]; then
	test_missing "the frameworks venv (.deps/frameworks) and Fashion-MNIST"
fi
# the examples run python3 and torchrun: the venv's
PATH=$VENV:$PATH
export PATH
ARGS='[--epochs, "2", --train-samples, "4000", --test-samples, "1000"]'
final() { sed -n "s/.*final loss \([0-9.]*\).*/\1/p" "$1"; }

dlk init -q --example pytorch "$TEST_TMP/pt" && dlk init -q --example jax "$TEST_TMP/jx" ||
	{ echo "Bail out! dlk init --example failed"; exit 1; }

# a port no one listens on now, for torchrun's rendezvous by hand (its default, 29500, is
# resources.master_port's too: a cluster test's pod, a process on this machine, may hold it)
free_port() { "$VENV/python3" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

test_expect_success 'the PyTorch example under dlk ends with the loss torchrun gives by hand' '
	{ dlk train --local --workers 2 -f "$TEST_TMP/pt/dlk.yaml" --set "program.args=$ARGS" >out 2>dlkerr ||
		{ echo "dlk train failed:"; tail -n 30 dlkerr; false; }; } &&
	port=$(free_port) &&
	{ ( cd "$TEST_TMP/pt" && torchrun --nproc-per-node 2 --master-port "$port" train.py --epochs 2 \
		--train-samples 4000 --test-samples 1000 ) >"$TEST_TMP/byhand" 2>&1 ||
		{ echo "torchrun by hand failed:"; tail -n 30 "$TEST_TMP/byhand"; false; }; } &&
	test -n "$(final dlkerr)" && echo "dlk $(final dlkerr), torchrun $(final "$TEST_TMP/byhand")" &&
	test "$(final dlkerr)" = "$(final "$TEST_TMP/byhand")"
'

test_expect_success 'its record has the evaluation it reported: 10 classes, 1000 test samples' '
	rec=$(ls -t "$TEST_TMP"/pt/.dlk/runs/pt/*.json | head -n 1) &&
	jq -e ".run.outcome == \"succeeded\" and .run.worlds == [2] and (.run.code_sha256 | test(\"^[0-9a-f]{64}$\"))" "$rec" &&
	jq -e ".metrics.test_samples == 1000 and (.metrics.confusion_matrix | length) == 10" "$rec" &&
	jq -e ".metrics.test_accuracy > 0.5 and .provenance.framework == \"pytorch\"" "$rec" &&
	jq -e ".provenance.model | endswith(\"/model.pt\")" "$rec" && test -f "$(jq -r .provenance.model "$rec")"
'

test_expect_success 'torchrun as the command gets the rendezvous flags and ends the same' '
	dlk train --local --workers 1 -f "$TEST_TMP/pt/dlk.yaml" --set "program.args=$ARGS" \
		--set "program.command=[torchrun, train.py]" --set program.procs_per_worker=2 --fresh >out 2>err &&
	echo "dlk running torchrun $(final err), torchrun by hand $(final "$TEST_TMP/byhand")" &&
	test -n "$(final err)" && test "$(final err)" = "$(final "$TEST_TMP/byhand")"
'

test_expect_success 'the JAX example all-reduces the label sum over 2 processes' '
	dlk train --local --workers 2 -f "$TEST_TMP/jx/dlk.yaml" >out 2>err && cat err &&
	want=$("$VENV/python3" -c "import gzip; print(sum(gzip.open(\"$D/train-labels-idx1-ubyte.gz\").read()[8:]))") &&
	grep_q "^\[rank 0\] rank 0 of 2: local sum [0-9]*, all-reduced sum $want, expected $want" err &&
	grep_q "^\[rank 1\] rank 1 of 2: local sum [0-9]*, all-reduced sum $want, expected $want" err &&
	rec=$(ls -t "$TEST_TMP"/jx/.dlk/runs/jx/*.json | head -n 1) &&
	jq -e ".run.outcome == \"succeeded\" and .metrics.program.label_sum == $want" "$rec"
'

test_done
