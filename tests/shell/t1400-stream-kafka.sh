#!/bin/sh
# dlk serve --stream against a real Apache Kafka broker (tests/kafka/up): 100,000 Fashion-MNIST
# records (the 10,000 test images repeated, each with its own key) on a 4-partition topic, two
# scorers in one group, one of them killed with kill -9 mid-stream and started again. Read with
# isolation.level=read_committed, every input offset has exactly one output record, and its class
# is the one dlk's in-process forward pass gives. Malformed records go to the dead-letter topic
# with their error. A text model (embedding + meanpool, trained here in a second) scores records
# that are texts as its HTTP route classifies the same texts; one that is not UTF-8 is a dead
# letter. The broker is started once for the whole file and stopped by its pid.
. "$(dirname "$0")/../lib.sh"

K=$TEST_TMP/kafka
W=$TEST_TMP/work
FIXTURE=$TEST_ROOT/${BUILD:-build}/tests/tools/fmnist_records
N=${DLK_STREAM_RECORDS:-100000}
mkdir -p "$W"

stream_cleanup() {
	for p in "$W"/*.pid; do
		[ -f "$p" ] && kill -9 "$(cat "$p")" 2>/dev/null
	done
	"$TEST_ROOT/tests/kafka/down" "$K"
	test_cleanup
}
trap stream_cleanup EXIT

# Fashion-MNIST and the broker are installed by `make test` (.ci/deps test): missing, they fail
test_expect_success 'the broker starts (KRaft, loopback) and the topics are created' '
	test -f "$FM/t10k-images-idx3-ubyte.gz" &&
	"$TEST_ROOT/tests/kafka/up" "$K" && test -s "$K/bootstrap" && kill -0 "$(cat "$K/pid")" &&
	b=$(cat "$K/bootstrap") &&
	for t in in:4 out:4 in.dlq:1 bad:1 bad-out:1 bad.dlq:1 alo:2 alo-out:2 alo.dlq:1 pf:2 pf-out:2 pf.dlq:1 fence:2 fence-out:2 fence.dlq:1 hot:1 hot-out:1 hot.dlq:1 txt:1 txt-out:1 txt.dlq:1; do
		"$TEST_ROOT/tests/kafka/tool" org.apache.kafka.tools.TopicCommand --bootstrap-server "$b" \
			--create --topic "${t%:*}" --partitions "${t#*:}" >/dev/null || exit 1
	done
'
B=$(cat "$K/bootstrap" 2>/dev/null)
if [ -z "$B" ]; then
	# without a broker every later case would only wait for its time-outs
	echo "# no broker: the cases below need one (logs in $K)"
	test_done
	exit 1
fi

# a project and a one-epoch model (the bundle the scorers load), and the expected classes
test_expect_success 'a model to score with, and its in-process predictions' '
	cd "$W" && cp "$TEST_ROOT/examples/mlp/dlk.yaml" . &&
	dlk train --local -q --set training.epochs=1 --set training.threads=1 >train.log 2>&1 &&
	test -f fashion-mlp.dlk &&
	"$FIXTURE" expect dlk.yaml fashion-mlp.dlk "$N" >expected &&
	test "$(wc -l <expected)" = "$N"
'

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# scorer NAME [OPTIONS...]: starts `dlk serve --stream` in the background (pid in NAME.pid, its
# HTTP port in NAME.port)
scorer() {
	name=$1
	shift
	free_port >"$W/$name.port"
	"$DLK" serve --local "${MODEL:-$W/fashion-mlp.dlk}" --set serving.workers=1 --set serving.threads=1 \
		--instance "${INSTANCE:-$name}" --port "$(cat "$W/$name.port")" "$@" >>"$W/$name.log" 2>&1 &
	echo $! >"$W/$name.pid"
}
# scored NAME: the records the scorer NAME has committed since it started (its /metrics)
scored() {
	curl -sf "http://127.0.0.1:$(cat "$W/$1.port")/metrics" 2>/dev/null |
		sed -n "s/^dlk_stream_records_out_total{[^}]*} //p" | grep . || echo 0
}
# one V2 JSON request holding one 784-value example
v2_record() {
	python3 -c 'import json; print(json.dumps({"inputs": [{"name": "input", "shape": [1, 784], "datatype": "FP32", "data": [127.5] * 784}]}))'
}
# wait_scored NAME N: until the scorer NAME has committed N records (2 minutes at most)
wait_scored() {
	i=0
	while [ "$(scored "$1")" -lt "$2" ]; do
		i=$((i + 1))
		[ $i -lt 1200 ] || { echo "$1 scored $(scored "$1") of $2"; cat "$W/$1.log"; return 1; }
		sleep 0.1
	done
}
# committed TOPIC: how many records a read_committed consumer sees in TOPIC now
committed() {
	kcat -C -b "$B" -t "$1" -e -q -X isolation.level=read_committed -f "%o\n" 2>/dev/null | wc -l
}
# wait_committed TOPIC N SECONDS
wait_committed() {
	i=0
	while [ "$(committed "$1")" -lt "$2" ]; do
		i=$((i + 1))
		[ $i -le $3 ] || { echo "timed out: $(committed "$1") of $2 in $1"; return 1; }
		sleep 1
	done
}
# stop NAME: SIGTERM, and the scorer must finish its transaction and exit 0
stop() {
	kill -TERM "$(cat "$W/$1.pid")" && wait "$(cat "$W/$1.pid")"
	rc=$?
	rm -f "$W/$1.pid"
	[ $rc = 0 ] || { echo "$1 exited $rc"; cat "$W/$1.log"; return 1; }
}

test_expect_success "$N records, two scorers in one group, one killed with kill -9 and restarted" '
	"$FIXTURE" produce "$W/dlk.yaml" "$B" in "$N" &&
	scorer a --stream "kafka://$B/in" --to out &&
	wait_scored a $((N / 50)) &&
	scorer b --stream "kafka://$B/in" --to out &&
	wait_scored b $((N / 50)) &&
	kill -9 "$(cat "$W/a.pid")" && { wait "$(cat "$W/a.pid")"; rm -f "$W/a.pid"; } &&
	at_kill=$(committed out) && echo "killed a with $at_kill of $N committed" &&
	test "$at_kill" -lt "$N" &&
	scorer a --stream "kafka://$B/in" --to out &&
	wait_committed out "$N" 600 &&
	stop a && stop b &&
	grep -q "assigned .in. partitions" "$W/b.log"
'

test_expect_success 'read_committed, every input offset has exactly one output, with the right class' '
	kcat -C -b "$B" -t out -e -q -X isolation.level=read_committed -f "%s\n" >outputs &&
	python3 - "$W/expected" "$N" outputs <<-\EOF
	import json, sys
	want = dict(line.split() for line in open(sys.argv[1]))
	n = int(sys.argv[2])
	seen, digests, wrong = {}, set(), 0
	for line in open(sys.argv[3]):
	    r = json.loads(line)
	    k = (r["input"]["partition"], r["input"]["offset"])
	    if k in seen:
	        sys.exit("input %s scored twice" % (k,))
	    seen[k] = r["input"]["key"]
	    digests.add(r["model"])
	    if str(r["class"]) != want[r["input"]["key"]]:
	        wrong += 1
	    assert abs(sum(r["scores"]) - 1) < 1e-4 and r["scores"][r["class"]] == max(r["scores"])
	assert len(seen) == n, "%d outputs for %d inputs" % (len(seen), n)
	for p in set(p for p, _ in seen):
	    offs = sorted(o for q, o in seen if q == p)
	    assert offs == list(range(len(offs))), "partition %d: offsets missing" % p
	assert sorted(seen.values()) == sorted(want), "keys differ"
	assert len(digests) == 1 and list(digests)[0].startswith("sha256:"), digests
	if wrong:
	    sys.exit("%d predictions differ from the in-process forward pass" % wrong)
	print("%d inputs, %d outputs, one each, all classes equal" % (n, len(seen)))
	EOF
'

test_expect_success 'malformed records go to the dead-letter topic with their error; the stream goes on' '
	printf "not json\n" | kcat -P -b "$B" -t bad -k k1 -H content-type=application/json &&
	printf "abc\n" | kcat -P -b "$B" -t bad -k k2 &&
	printf "x\n" | kcat -P -b "$B" -t bad -k k3 -H content-type=text/csv &&
	v2_record | kcat -P -b "$B" -t bad -k k4 -H content-type=application/json &&
	head -c 784 /dev/zero >u8.bin &&
	kcat -P -b "$B" -t bad -k k5 -H dlk-datatype=UINT8 u8.bin &&
	scorer c --stream "kafka://$B/bad" --to bad-out &&
	wait_committed bad-out 2 120 && wait_committed bad.dlq 3 60 && stop c &&
	kcat -C -b "$B" -t bad.dlq -e -q -X isolation.level=read_committed -f "%k|%h\n" >dlq &&
	cat dlq &&
	grep "^k1|" dlq | grep -q "dlk-error=json: invalid JSON at byte 0: an unexpected character" &&
	grep "^k2|" dlq | grep -q "dlk-error=raw: 3 bytes, expected 3136" &&
	grep "^k3|" dlq | grep -q "dlk-error=content-type .text/csv.: expected" &&
	grep "^k1|" dlq | grep -q "dlk-partition=0,dlk-offset=0" &&
	kcat -C -b "$B" -t bad-out -e -q -X isolation.level=read_committed -f "%k\n" | sort >good &&
	printf "k4\nk5\n" >want && cmp want good
'

test_expect_success 'a record whose scores overflow goes to the dead-letter topic; the stream goes on' '
	python3 "$TEST_ROOT/tests/hostile/craft.py" scale "$W/fashion-mlp.dlk" "$W/hot.dlk" 1e12 &&
	python3 -c "import struct, sys; sys.stdout.buffer.write(struct.pack(\"<784f\", *[1e30] * 784))" >hot.bin &&
	head -c 3136 /dev/zero >zero.bin &&
	kcat -P -b "$B" -t hot -k h1 hot.bin && kcat -P -b "$B" -t hot -k z1 zero.bin &&
	MODEL=$W/hot.dlk scorer h --stream "kafka://$B/hot" --to hot-out &&
	wait_committed hot-out 1 120 && wait_committed hot.dlq 1 60 && stop h &&
	kcat -C -b "$B" -t hot.dlq -e -q -X isolation.level=read_committed -f "%k|%h\n" >dlq && cat dlq &&
	grep "^h1|" dlq | grep -q "dlk-error=the forward pass gave a value that is not finite" &&
	kcat -C -b "$B" -t hot-out -e -q -X isolation.level=read_committed -f "%k\n" >good && test "$(cat good)" = z1
'

test_expect_success 'at-least-once mode scores every record' '
	"$FIXTURE" produce "$W/dlk.yaml" "$B" alo 3000 &&
	scorer d --stream "kafka://$B/alo" --to alo-out --at-least-once &&
	wait_committed alo-out 3000 120 && stop d &&
	test "$(committed alo-out)" = 3000
'

test_expect_success 'a replica started under a running one'"'"'s --instance fences it: exit 1, and still one output per input' '
	"$FIXTURE" produce "$W/dlk.yaml" "$B" fence 1000 &&
	scorer g --stream "kafka://$B/fence" --to fence-out --group fence-group &&
	wait_scored g 1000 &&
	INSTANCE=g scorer g2 --stream "kafka://$B/fence" --to fence-out --group fence-group &&
	i=0; until grep -q "^scoring" "$W/g2.log" 2>/dev/null; do
		i=$((i + 1)); [ $i -lt 600 ] || { cat "$W/g2.log"; exit 1; }; sleep 0.2; done &&
	i=0; while kill -0 "$(cat "$W/g.pid")" 2>/dev/null; do
		"$FIXTURE" produce "$W/dlk.yaml" "$B" fence 100 $((1000 + i * 100)) 2>/dev/null
		i=$((i + 1)); [ $i -lt 240 ] || { echo "g was not fenced"; cat "$W/g.log"; exit 1; }; sleep 0.5; done
	wait "$(cat "$W/g.pid")"; rc=$?; rm -f "$W/g.pid"
	cat "$W/g.log" && test $rc = 1 && grep -q "another replica uses the instance name .g." "$W/g.log" &&
	n=$(kcat -C -b "$B" -t fence -e -q -f "%o\n" | wc -l) &&
	wait_committed fence-out "$n" 120 && stop g2 &&
	kcat -C -b "$B" -t fence-out -e -q -X isolation.level=read_committed -f "%s\n" |
		python3 -c "import json, sys; k = [(r[\"input\"][\"partition\"], r[\"input\"][\"offset\"]) for r in map(json.loads, sys.stdin)]; sys.exit(len(k) != len(set(k)) or len(k) != $n)"
'

test_expect_success 'a text model scores texts (text/plain, and --format text) as its HTTP route classifies them' '
	python3 -c "
import json, random
r = random.Random(4)
words = [\"cat\", \"dog\", \"the\", \"a\", \"sat\", \"ran\", \"mat\", \"park\"]
with open(\"t.jsonl\", \"w\") as f:
    for i in range(300):
        t = \" \".join(r.choice(words) for _ in range(r.randint(2, 6)))
        f.write(json.dumps({\"text\": t, \"label\": \"cat\" if \"cat\" in t else \"none\"}) + \"\\n\")
" &&
	cat >text.yaml <<-EOF &&
	name: tiny-text
	data: {format: text, train: {source: t.jsonl}, test: {source: t.jsonl}}
	model:
	  input: [24]
	  layers:
	    - embedding: {vocab: 257, dim: 8}
	    - meanpool: {pad_id: 0}
	    - dense: {units: 2}
	training: {epochs: 2, batch_size: 16, threads: 1}
	EOF
	dlk train --local -q -f text.yaml >/dev/null && mv tiny-text.dlk "$W/" &&
	printf "the cat sat\n" | kcat -P -b "$B" -t txt -k t1 -H content-type=text/plain &&
	printf "a dog ran in the park\n" | kcat -P -b "$B" -t txt -k t2 &&
	printf "\377 not text\n" | kcat -P -b "$B" -t txt -k t3 &&
	MODEL=$W/tiny-text.dlk scorer x --stream "kafka://$B/txt" --to txt-out --format text &&
	wait_committed txt-out 2 120 && wait_committed txt.dlq 1 60 &&
	kcat -C -b "$B" -t txt.dlq -e -q -X isolation.level=read_committed -f "%k|%h\n" >dlq && cat dlq &&
	grep "^t3|" dlq | grep -q "dlk-error=text: 10 bytes that are not UTF-8 text" &&
	kcat -C -b "$B" -t txt-out -e -q -X isolation.level=read_committed -f "%k %s\n" >scored && cat scored &&
	port=$(cat "$W/x.port") &&
	for k in t1:"the cat sat" t2:"a dog ran in the park"; do
		curl -sf "http://127.0.0.1:$port/v2/models/tiny-text/infer" -d "{\"inputs\":[{\"name\":\"input\",\"shape\":[1],\"datatype\":\"BYTES\",\"data\":[\"${k#*:}\"]}],\"outputs\":[{\"name\":\"logits\"}]}" |
			jq -r "[.outputs[0].data | to_entries | max_by(.value) | .key] | .[0]" >want || exit 1
		got=$(sed -n "s/^${k%%:*} .*\"class\":\([0-9]*\).*/\1/p" scored) &&
		echo "${k%%:*}: stream class $got, HTTP class $(cat want)" && test -n "$got" && test "$got" = "$(cat want)" || exit 1
	done &&
	stop x
'

test_expect_success 'the project file describes the stream (serving.stream); flags win over it' '
	"$FIXTURE" produce "$W/dlk.yaml" "$B" pf 400 &&
	cp "$W/dlk.yaml" dlk.yaml && cat >>dlk.yaml <<-EOF &&
	serving:
	  stream:
	    brokers: "$B"
	    input: pf
	    output: wrong-topic
	    exactly_once: true
	    max_records: 100
	    properties: {client.rack: here}
	EOF
	"$DLK" serve --local "$W/fashion-mlp.dlk" --set serving.workers=1 --instance f --to pf-out --port 0 >"$W/f.log" 2>&1 &
	echo $! >"$W/f.pid" &&
	wait_committed pf-out 400 120 && stop f &&
	{ grep -q "scoring .pf. into .pf-out. .*group .dlk-fashion-mlp., exactly once" "$W/f.log" || { cat "$W/f.log"; exit 1; }; }
'

test_expect_success '/metrics counts records, batches, latency and lag' '
	"$FIXTURE" produce "$W/dlk.yaml" "$B" alo 500 3000 &&
	scorer e --stream "kafka://$B/alo" --to alo-out --at-least-once --group metrics-check &&
	port=$(cat "$W/e.port") &&
	i=0; until curl -sf "http://127.0.0.1:$port/metrics" >metrics && grep -q "^dlk_stream_records_out_total{topic=\"alo\"} 3500" metrics; do
		i=$((i + 1)); [ $i -lt 100 ] || { cat metrics; exit 1; }; sleep 0.2; done &&
	curl -sf "http://127.0.0.1:$port/v2/health/ready" &&
	grep -q "^dlk_stream_records_in_total{topic=\"alo\"} 3500" metrics &&
	grep -q "^dlk_stream_round_records_count" metrics &&
	grep -q "^dlk_inference_batch_size_count" metrics &&
	grep -q "^dlk_stream_latency_seconds_bucket{topic=\"alo\",le=\"+Inf\"} 3500" metrics &&
	stop e
'

test_expect_failure_code 'a topic that does not exist is named, with exit code 3' 3 '
	dlk serve --local "$W/fashion-mlp.dlk" --stream "kafka://$B/nosuch" --to out --port 0 >err 2>&1;
	rc=$?; cat err; grep -q "topic .nosuch. does not exist" err; exit $rc
'

test_expect_success 'the broker stops by its pid' '
	pid=$(cat "$K/pid") && "$TEST_ROOT/tests/kafka/down" "$K" && ! kill -0 "$pid" 2>/dev/null
'

test_done
