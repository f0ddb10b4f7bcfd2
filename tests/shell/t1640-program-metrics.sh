#!/bin/sh
# Prometheus metrics of a user's program: `dlk train --local --metrics-port PORT` of a project
# with a program: section serves, while the program runs, the series a dlk run serves
# (lib/trainer/metrics.h), fed from what rank 0 reports through the progress protocol: step,
# epoch, loss, samples/s, the evaluation's test loss and metrics, the restarts of the gang.
. "$(dirname "$0")/../lib.sh"

command -v python3 >/dev/null || { test_missing python3; test_done; }
if ! command -v promtool >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then
	echo "Bail out! promtool and curl are needed (make test installs them: .ci/deps test)"
	exit 1
fi

P=$TEST_TMP/p
mkdir -p "$P"
cat >"$P/dlk.yaml" <<'YAML'
name: probe
data:
  train: {images: /d/train-images.gz, labels: /d/train-labels.gz}
program:
  command: python3 train.py
YAML
# rank 0 reports, then waits for the test to have scraped (the file "go"); rank 1 reports what
# rank 0 does not (its reports are not the gang's); the first generation fails once (exit 1:
# restartable) so the scrape sees a restart
cat >"$P/train.py" <<'PY'
import json, os, sys, time
rank, restart = int(os.environ["DLK_RANK"]), os.environ["DLK_RESTART_COUNT"]
def report(**f):
    print("DLK-PROGRESS " + json.dumps(f), flush=True)
if restart == "0":
    sys.exit(1 if rank == 1 else 0)
if rank == 0:
    report(step=40, steps=80, epoch=2, epochs=4, loss=0.625, samples_per_s=1250.5)
    report(event="epoch", epoch=2, epochs=4, metrics={"test_loss": 0.5, "f1/macro": 0.75},
           confusion=[[3, 1], [1, 3]])
else:
    report(step=99, loss=9.0)
go = os.path.join(os.environ["DLK_CHECKPOINT_DIR"], "..", "go")
t = time.time()
while not os.path.exists(go) and time.time() - t < 60:
    time.sleep(0.05)
PY
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
go=$P/.dlk/checkpoints/probe/go
# waits (60 s at most, while dlk runs) until the gang's second generation has reported its evaluation
scrape() {
	i=0
	while [ $i -lt 600 ] && kill -0 $pid 2>/dev/null; do
		if curl -sf -D m.h "http://127.0.0.1:$port/metrics" >m.txt 2>/dev/null &&
			grep -q "^dlk_train_test_loss " m.txt; then
			return 0
		fi
		sleep 0.1
		i=$((i + 1))
	done
	echo "no evaluation on port $port" >&2
	cat m.txt >&2
	return 1
}
value() { awk -v n="$1" '$1 == n { print $2 }' m.txt; }

test_expect_success 'dlk train --local --metrics-port serves the program'"'"'s reports while it runs' '
	{ dlk train --local --workers 2 --max-restarts 1 --metrics-port $port -f "$P/dlk.yaml" >out 2>err & pid=$!; } &&
	scrape; rc=$?; mkdir -p "${go%/*}" && touch "$go"; wait $pid; rc2=$?; cat err; test $rc = 0 && test $rc2 = 0 &&
	grep_q "metrics on http://127.0.0.1:$port/metrics" err &&
	grep -qi "^content-type: text/plain; version=0.0.4" m.h &&
	promtool check metrics <m.txt &&
	grep_q "^dlk_train_info{rank=\"0\",world_size=\"2\",job=\"\"} 1$" m.txt &&
	test "$(value dlk_train_up)" = 1 &&
	test "$(value dlk_train_steps_total)" = 40 &&
	test "$(value dlk_train_epoch)" = 2 &&
	test "$(value dlk_train_loss)" = 0.625 &&
	test "$(value dlk_train_samples_per_second)" = 1250.5 &&
	test "$(value dlk_train_test_loss)" = 0.5 &&
	test "$(value "dlk_train_test_metric{metric=\"f1/macro\"}")" = 0.75 &&
	test "$(value "dlk_train_test_metric{metric=\"accuracy\"}")" = 0.75 &&
	test "$(value dlk_train_restarts)" = 1 &&
	test "$(value dlk_train_allreduce_count_total)" = 0
'

test_expect_success 'the endpoint is gone when the run has ended' '
	! curl -sf -o /dev/null "http://127.0.0.1:$port/metrics"
'

test_done
