#!/bin/sh
# Training workers serve Prometheus metrics (text format 0.0.4, checked by promtool): the Job's
# pods declare the port and the scrape annotations (resources.metrics_port; 0 disables), and
# `dlk train --local --metrics-port PORT` serves them here, rank r of --workers N on PORT + r,
# with the gradient all-reduce's time, bytes and bus bandwidth, and the seconds of the steps by
# phase (data, compute, allreduce).
. "$(dirname "$0")/../lib.sh"

if ! command -v promtool >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then
	echo "Bail out! promtool and curl are needed (make test installs them: .ci/deps test)"
	exit 1
fi

P=$TEST_TMP/p
mkdir -p "$P" &&
awk 'BEGIN { srand(5); for (i = 0; i < 2048; i++) { c = int(rand() * 2); printf "%.3f,%.3f,%d\n", rand() + c, rand() - c, c } }' >"$P/train.csv" &&
head -n 100 "$P/train.csv" >"$P/test.csv" &&
cat >"$P/dlk.yaml" <<EOT
name: blobs
data:
  format: csv
  train: {source: train.csv}
  test: {source: test.csv}
model:
  input: [2]
  layers:
    - dense: {units: 32}
    - relu
    - dense: {units: 2}
training: {epochs: 1000, batch_size: 8, threads: 1, checkpoint: {every: 0}}
EOT

# a port the kernel has just handed out (and the next one free too, for rank 1)
free_port() {
	node -e '
		const net = require("net");
		const tryOne = () => { const s = net.createServer(); s.listen(0, "127.0.0.1", () => {
			const p = s.address().port, t = net.createServer();
			t.once("error", () => { s.close(tryOne); });
			t.listen(p + 1, "127.0.0.1", () => { t.close(); s.close(); console.log(p); }); }); };
		tryOne();'
}
# scrape PORT OUT: waits (30 s) until the worker on PORT has done a step, keeping the exposition
scrape() {
	i=0
	while [ $i -lt 300 ]; do
		if curl -sf -D "$2.h" "http://127.0.0.1:$1/metrics" >"$2" 2>/dev/null &&
			awk '$1 == "dlk_train_steps_total" && $2 > 0 { ok = 1 } END { exit !ok }' "$2"; then
			return 0
		fi
		sleep 0.1
		i=$((i + 1))
	done
	echo "no step on port $1" >&2
	cat "$2" >&2
	return 1
}
value() { awk -v n="$1" '$1 == n { print $2 }' "$2"; }

test_expect_success 'the Job'"'"'s pods declare the metrics port and the scrape annotations' '
	"$DLK" -f "$P/dlk.yaml" train --dry-run -o json >dry.json &&
	jq -e ".items[] | select(.kind == \"Job\") | .spec.template |
		.metadata.annotations == {\"prometheus.io/scrape\": \"true\", \"prometheus.io/port\": \"9464\", \"prometheus.io/path\": \"/metrics\"} and
		(.spec.containers[0].ports[] | select(.name == \"metrics\") | .containerPort) == 9464 and
		(.spec.containers[0].env[] | select(.name == \"DLK_METRICS_PORT\") | .value) == \"9464\"" dry.json &&
	"$DLK" -f "$P/dlk.yaml" train --dry-run -o json --set resources.metrics_port=0 >off.json &&
	jq -e "[.items[] | select(.kind == \"Job\") | .spec.template | (.metadata.annotations // {} | length),
		(.spec.containers[0].ports | length), ([.spec.containers[0].env[] | select(.name == \"DLK_METRICS_PORT\")] | length)] == [0, 1, 0]" off.json
'

test_expect_failure_code 'a metrics port that is the rendezvous port is refused' 3 '
	"$DLK" -f "$P/dlk.yaml" train --dry-run --set resources.metrics_port=29500 2>err; rc=$?; cat err
	grep_q "resources.metrics_port and resources.master_port are both 29500" err; exit $rc
'

test_expect_success 'dlk train --local --metrics-port serves what promtool accepts while it trains' '
	port=$(free_port) &&
	{ "$DLK" -f "$P/dlk.yaml" train --local --fresh --metrics-port $port >out 2>err & pid=$!; } &&
	scrape $port m.txt; rc=$?; kill -INT $pid; wait $pid; cat err; test $rc = 0 &&
	grep_q "rank 0: metrics on http://127.0.0.1:$port/metrics" err &&
	grep -qi "^content-type: text/plain; version=0.0.4" m.txt.h &&
	promtool check metrics <m.txt &&
	grep_q "^dlk_train_info{rank=\"0\",world_size=\"1\",job=\"\"} 1$" m.txt &&
	test "$(value dlk_train_up m.txt)" = 1 && test "$(value dlk_train_epoch m.txt)" -ge 1 &&
	awk "\$1 == \"dlk_train_loss\" && \$2 > 0 { ok = 1 } END { exit !ok }" m.txt &&
	awk "\$1 == \"dlk_train_samples_per_second\" && \$2 > 0 { ok = 1 } END { exit !ok }" m.txt &&
	awk "\$1 == \"dlk_train_data_load_seconds\" && \$2 > 0 { ok = 1 } END { exit !ok }" m.txt &&
	test "$(value dlk_train_allreduce_count_total m.txt)" = 0 &&
	awk "\$1 == \"dlk_train_step_seconds_total{phase=\\\"data\\\"}\" && \$2 > 0 { d = 1 }
	     \$1 == \"dlk_train_step_seconds_total{phase=\\\"compute\\\"}\" && \$2 > 0 { c = 1 }
	     \$1 == \"dlk_train_step_seconds_total{phase=\\\"allreduce\\\"}\" && \$2 == 0 { a = 1 } END { exit !(d && c && a) }" m.txt &&
	curl -s -o /dev/null -w "%{http_code}" "http://127.0.0.1:$port/metrics" | grep -qv 200
'

test_expect_success 'with --workers 2 each rank serves its own, with the all-reduce'"'"'s time and bandwidth' '
	port=$(free_port) &&
	{ "$DLK" -f "$P/dlk.yaml" train --local --fresh --workers 2 --metrics-port $port >out 2>err & pid=$!; } &&
	scrape $port r0.txt && scrape $((port + 1)) r1.txt; rc=$?; kill -INT $pid; wait $pid; cat err; test $rc = 0 &&
	promtool check metrics <r0.txt && promtool check metrics <r1.txt &&
	grep_q "^dlk_train_info{rank=\"1\",world_size=\"2\"" r1.txt &&
	for f in r0.txt r1.txt; do
		awk "\$1 == \"dlk_train_allreduce_count_total\" && \$2 > 0 { c = 1 } \$1 == \"dlk_train_allreduce_bytes_total\" && \$2 > 0 { b = 1 }
		     \$1 == \"dlk_train_allreduce_seconds_total\" && \$2 > 0 { s = 1 } \$1 == \"dlk_train_allreduce_bus_bandwidth_bytes_per_second\" && \$2 > 0 { w = 1 }
		     \$1 == \"dlk_train_step_seconds_total{phase=\\\"allreduce\\\"}\" && \$2 > 0 { p = 1 }
		     END { exit !(c && b && s && w && p) }" $f || exit 1
	done
'

test_expect_failure_code 'a metrics port already in use is an error' 1 '
	port=$(free_port)
	node -e "require(\"net\").createServer().listen($port, () => { require(\"fs\").writeFileSync(\"bound\", \"\"); setTimeout(() => process.exit(0), 60000) })" & holder=$!
	i=0; while [ ! -e bound ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	"$DLK" -f "$P/dlk.yaml" train --local --fresh --metrics-port $port --set training.epochs=1 2>err; rc=$?
	kill $holder; wait $holder; cat err
	grep_q "cannot serve metrics on every address port $port" err; exit $rc
'

test_done
