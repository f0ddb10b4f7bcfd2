#!/bin/sh
# bench/stream: dlk serve --stream against (a) the broker's own ceiling on this machine, Kafka's
# ConsumerPerformance and ProducerPerformance moving the same records (N inputs of 784 bytes,
# raw UINT8 pixels, in; N outputs of the output record's size out; the slower of the two is the
# ceiling), and (b) what a user would write instead, a Python consumer (confluent-kafka + ONNX
# Runtime from PyPI, bench/stream/pyscorer.py) scoring the same MLP exactly once with the same
# batching.
#   throughput: N Fashion-MNIST records waiting on a 4-partition topic, each scorer drains them
#               into its own output topic with its own group; records/s from the first to the
#               last output record's timestamp
#   CPU:        user + system CPU of the scorer's process per 1000 records, from its first
#               committed round to its last (less disturbed by a busy machine than the rates)
#   latency:    RATE records/s for SECONDS produced while the scorer runs; from the input's
#               CreateTime to the moment a read_committed consumer (kcat) receives its output,
#               p50 and p99: what a downstream reader waits
# Runs alternate (ceiling, dlk, Python) after one warm-up each; medians with min-max.
# usage: bench/stream/run.sh      (N=50000 PAIRS=3 RATE=1000 SECONDS=10 in the environment)
set -e
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
N=${N:-50000}
PAIRS=${PAIRS:-3}
RATE=${RATE:-1000}
SECONDS_LAT=${SECONDS:-10}
MAX_BATCH=${MAX_BATCH:-64}
out=$top/bench/out/stream
K=$out/kafka
PY=$top/.deps/pystream-1/venv/bin/python
FIX=$top/build/tests/tools/fmnist_records
TOOL=$top/tests/kafka/tool
[ -x "$PY" ] || { echo "error: the Python peer is not installed (run '.ci/deps bench')" >&2; exit 1; }
[ -x "$FIX" ] || { echo "error: $FIX is not built (make test-unit)" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"
pids=""
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null || true; done
	tests/kafka/down "$K"
}
trap cleanup EXIT INT TERM

# OpenBLAS 0.3.21 does not know some virtual CPUs and then runs its generic (Prescott) kernels;
# dlk warns and asks for OPENBLAS_CORETYPE, which is its best configuration here. Every process
# gets it (numpy in the Python peer bundles an OpenBLAS too; ONNX Runtime's GEMMs pick their
# kernels from the CPU's features by themselves).
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
	if grep -qw avx512f /proc/cpuinfo; then OPENBLAS_CORETYPE=SkylakeX
	elif grep -qw avx2 /proc/cpuinfo; then OPENBLAS_CORETYPE=Haswell; fi
fi
[ -n "${OPENBLAS_CORETYPE:-}" ] && export OPENBLAS_CORETYPE

echo "load before: $(cat /proc/loadavg) on $(nproc) cores"
KAFKA_HEAP=1g tests/kafka/up "$K"
B=$(cat "$K/bootstrap")
topic() { "$TOOL" org.apache.kafka.tools.TopicCommand --bootstrap-server "$B" --create --topic "$1" --partitions "$2" >/dev/null; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

(cd "$out" && cp "$top/examples/mlp/dlk.yaml" . &&
	"$top/dlk" train --local -q --set training.epochs=1 --set training.threads=1 >train.log 2>&1)
MODEL=$out/fashion-mlp.dlk
topic in 4
topic dlq 1
"$FIX" produce "$out/dlk.yaml" "$B" in "$N" 2>/dev/null
OUTSIZE=$(python3 -c 'import json; print(len(json.dumps({"class": 9, "label": "Ankle boot", "score": 0.987654321, "scores": [0.0123456789] * 10, "model": "sha256:" + "0" * 64, "input": {"topic": "in", "partition": 3, "offset": 12345, "key": "img-0012345"}}, separators=(",", ":"))))')

# the span of an output topic's timestamps (ms), as "first last count"
span() { kcat -C -b "$B" -t "$1" -e -q -X isolation.level=read_committed -f '%T\n' | sort -n | awk 'NR == 1 { a = $1 } { b = $1; n++ } END { print a, b, n }'; }
rate_of() { set -- $(span "$1"); awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { printf "%.0f", (n - 1) * 1000 / (b - a) }'; }

# reader TOPIC NAME: a read_committed consumer of TOPIC stamping each record with the wall-clock
# ms it arrived, into $out/seen-NAME (stopped by stop_reader)
reader() {
	python3 -u -c 'import signal, subprocess, sys, time
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
def stop(*_):
    p.kill()
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
for line in p.stdout:
    sys.stdout.write("%d %s" % (time.time() * 1000, line.decode()))' \
		kcat -C -u -q -b "$B" -t "$1" -o beginning -X isolation.level=read_committed -f '%s\n' >"$out/seen-$2" &
	reader_pid=$!
	pids="$pids $reader_pid"
}
stop_reader() { sleep 2; kill "$reader_pid"; wait "$reader_pid" || true; }

# cpu_ticks PID: user + system CPU of the process, in clock ticks
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# cpu_of NAME: CPU ms per 1000 records the scorer NAME reported
cpu_of() { cat "$out/$1.cpu" "$out/$1.log" 2>/dev/null | sed -n 's/^cpu_ms_per_1000 //p' | tail -1; }
# dlk NAME INPUT OUTPUT COUNT: starts dlk serve --stream, waits until COUNT outputs are committed
run_dlk() {
	port=$(free_port)
	topic "$3" 4
	./dlk serve --local "$MODEL" --stream "kafka://$B/$2" --to "$3" --group "g-$1" --instance x \
		--set serving.max_batch="$MAX_BATCH" --dead-letter dlq --port "$port" -q >"$out/$1.log" 2>&1 &
	pid=$!
	pids="$pids $pid"
	if [ -n "${PRODUCE_AFTER_START:-}" ]; then
		# once the scorer has its partitions
		until curl -sf "http://127.0.0.1:$port/metrics" 2>/dev/null | grep -q "^dlk_stream_rebalances_total{[^}]*} [1-9]"; do
			kill -0 $pid 2>/dev/null || { cat "$out/$1.log"; exit 1; }
			sleep 0.2
		done
		reader "$3" "$1"
		"$FIX" produce "$out/dlk.yaml" "$B" "$2" "$4" 0 "$RATE" 2>/dev/null
	fi
	# CPU from the first committed round to the last (the Python peer measures itself the same way)
	n0=0
	while [ "$n0" -lt "$4" ]; do
		n=$(curl -sf "http://127.0.0.1:$port/metrics" 2>/dev/null | sed -n "s/^dlk_stream_records_out_total{topic=\"$2\"} //p")
		if [ "${n:-0}" -gt 0 ] && [ "$n0" = 0 ]; then n0=$n cpu0=$(cpu_ticks $pid); fi
		[ "${n:-0}" -ge "$4" ] && break
		kill -0 $pid 2>/dev/null || { cat "$out/$1.log"; exit 1; }
		# often until the first round is seen, then seldom (each look costs CPU beside the scorer)
		if [ "$n0" = 0 ]; then sleep 0.05; else sleep 0.5; fi
	done
	[ "$n0" -lt "$4" ] && awk -v a="$cpu0" -v b="$(cpu_ticks $pid)" -v t="$(getconf CLK_TCK)" -v n="$(($4 - n0))" \
		'BEGIN { printf "cpu_ms_per_1000 %.1f\n", (b - a) * 1000 / t * 1000 / n }' >>"$out/$1.cpu"
	kill -TERM $pid
	wait $pid
}
run_py() {
	topic "$3" 4
	"$PY" bench/stream/pyscorer.py "$MODEL" "$B" "$2" "$3" "g-$1" "$4" "$MAX_BATCH" 2000 100 "$PY_THREADS" \
		>"$out/$1.log" 2>&1 &
	pid=$!
	pids="$pids $pid"
	if [ -n "${PRODUCE_AFTER_START:-}" ]; then
		until grep -q "^assigned" "$out/$1.log" 2>/dev/null; do
			kill -0 $pid 2>/dev/null || { cat "$out/$1.log"; exit 1; }
			sleep 0.2
		done
		reader "$3" "$1"
		"$FIX" produce "$out/dlk.yaml" "$B" "$2" "$4" 0 "$RATE" 2>/dev/null
	fi
	wait $pid || { cat "$out/$1.log"; exit 1; }
}
ceiling() {
	c=$("$TOOL" org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "$B" --topic in --messages "$N" \
		--group "perf-$1" 2>/dev/null | tail -1 | awk -F', *' '{ print $NF }')
	topic "perf-$1" 4
	p=$("$TOOL" org.apache.kafka.tools.ProducerPerformance --topic "perf-$1" --num-records "$N" --record-size "$OUTSIZE" \
		--throughput -1 --producer-props bootstrap.servers="$B" $PERF_PRODUCER 2>/dev/null |
		tail -1 | sed 's/^[0-9]* records sent, \([0-9.]*\) records\/sec.*/\1/')
	# a scorer consumes and produces at once, so neither can be faster than the broker lets the
	# slower of the two be: the ceiling is the smaller rate (generous: run side by side, the two
	# tools would share the cores and each be slower)
	awk -v c="$c" -v p="$p" 'BEGIN { printf "%.0f %.0f %.0f", c < p ? c : p, c, p }'
}
# latency NAME: p50 and p99 (ms) from the input's CreateTime to its output's arrival at the reader
latency() {
	stop_reader
	kcat -C -b "$B" -t "lat-$1" -e -q -f '%p %o %T\n' >"$out/lat-in-$1"
	python3 - "$out/lat-in-$1" "$out/seen-$1" <<-\EOF
	import json, sys
	t = {}
	for line in open(sys.argv[1]):
	    p, o, ts = line.split()
	    t[(int(p), int(o))] = int(ts)
	lat = []
	for line in open(sys.argv[2]):
	    ts, v = line.split(" ", 1)
	    r = json.loads(v)["input"]
	    lat.append(int(ts) - t[(r["partition"], r["offset"])])
	lat.sort()
	print(lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))], len(lat))
	EOF
}
# the Java producer's best configuration here: librdkafka's batch size (1 MB, what dlk's and the
# Python peer's producers use) rather than the Java client's 16 KB, which halves its records/s
PERF_PRODUCER="acks=all linger.ms=5 enable.idempotence=true batch.size=1048576"
median() { tr ' ' '\n' | grep . | sort -n | awk '{ a[NR] = $1 } END { printf "%s (%s-%s)", a[int((NR + 1) / 2)], a[1], a[NR] }'; }

echo "records: $N of 784 bytes (UINT8 28x28) on 4 partitions; outputs ~$OUTSIZE bytes; max_batch $MAX_BATCH,"
echo "  rounds of up to 2000 records or 100 ms, exactly once (transactions)"
echo "dlk: $(./dlk version | head -1), its defaults: one compute worker per core, 1 BLAS thread each;"
echo "  OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}"
echo "peer: python $("$PY" -c 'import sys, confluent_kafka, onnxruntime; print("%d.%d" % sys.version_info[:2], "confluent-kafka", confluent_kafka.__version__, "(librdkafka", confluent_kafka.libversion()[0] + "),", "onnxruntime", onnxruntime.__version__)')"
echo "broker ceiling: ConsumerPerformance, then ProducerPerformance with $PERF_PRODUCER"
echo "warm-up; the Python peer's best ONNX Runtime thread count (1 or 2):"
ceiling w >/dev/null
run_dlk dlk-w in out-dlk-w "$N"
PY_THREADS=1
run_py py-w1 in out-py-w1 "$N"
r1=$(rate_of out-py-w1)
PY_THREADS=2
run_py py-w2 in out-py-w2 "$N"
r2=$(rate_of out-py-w2)
if [ "$r2" -gt "$r1" ]; then PY_THREADS=2; else PY_THREADS=1; fi
echo "  1 thread $r1 records/s, 2 threads $r2: the peer runs with $PY_THREADS (intra_op_num_threads)"
CEIL="" DLK="" PYR="" DLKCPU="" PYCPU=""
i=1
while [ $i -le "$PAIRS" ]; do
	set -- $(ceiling $i)
	CEIL="$CEIL $1"
	run_dlk dlk-$i in out-dlk-$i "$N"
	d=$(rate_of out-dlk-$i)
	DLK="$DLK $d"
	dc=$(cpu_of dlk-$i)
	DLKCPU="$DLKCPU $dc"
	run_py py-$i in out-py-$i "$N"
	p=$(rate_of out-py-$i)
	PYR="$PYR $p"
	pc=$(cpu_of py-$i)
	PYCPU="$PYCPU $pc"
	echo "pair $i: broker ceiling $1 records/s (consume $2, produce $3), dlk $d ($dc CPU ms per 1000), python $p ($pc)"
	i=$((i + 1))
done
echo "throughput (records/s, median (min-max) of $PAIRS):"
echo "  broker ceiling $(echo $CEIL | median)"
echo "  dlk            $(echo $DLK | median)"
echo "  python         $(echo $PYR | median)"
c=$(echo $CEIL | median | cut -d" " -f1) d=$(echo $DLK | median | cut -d" " -f1) p=$(echo $PYR | median | cut -d" " -f1)
awk -v c="$c" -v d="$d" -v p="$p" 'BEGIN { printf "  dlk / python %.1fx (target >= 5x), dlk / broker ceiling %.0f%% (target >= 50%%)\n", d / p, 100 * d / c }'
echo "CPU of the scorer process per 1000 records, from its first committed round to its last (ms):"
echo "  dlk            $(echo $DLKCPU | median)"
echo "  python         $(echo $PYCPU | median)"
dc=$(echo $DLKCPU | median | cut -d" " -f1) pc=$(echo $PYCPU | median | cut -d" " -f1)
awk -v d="$dc" -v p="$pc" 'BEGIN { printf "  python / dlk %.1fx\n", p / d }'

echo "latency at $RATE records/s for ${SECONDS_LAT}s (ms, from the input's CreateTime to a read_committed reader):"
LATN=$((RATE * SECONDS_LAT))
export PRODUCE_AFTER_START=1
i=1
while [ $i -le "$PAIRS" ]; do
	for who in dlk py; do
		topic "lat-$who$i" 4
		if [ $who = dlk ]; then run_dlk "$who$i" "lat-$who$i" "lat-out-$who$i" "$LATN"
		else run_py "$who$i" "lat-$who$i" "lat-out-$who$i" "$LATN"; fi
		set -- $(latency "$who$i")
		echo "  $who run $i: p50 $1, p99 $2 ($3 records)"
	done
	i=$((i + 1))
done
echo "load after: $(cat /proc/loadavg)"
