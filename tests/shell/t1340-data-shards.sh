#!/bin/sh
# data.shard: each rank of a local gang loads only its part of the training split (IDX and CSV
# by range of samples, tar shards by file), walks the epoch's global permutation restricted to
# what it holds, and the gang still learns; the test split stays whole on rank 0; the run's
# record names every source with its full digest.
. "$(dirname "$0")/../lib.sh"

# Small generated data: 4 classes of 16 byte-valued features (blobs around class centres), the
# same samples as IDX (plain training files, gzip test files), CSV and 6 tar shards of uneven size.
cat >"$TEST_TMP/gen.py" <<'EOT'
import gzip, io, random, struct, sys, tarfile
out = sys.argv[1]
def blobs(n, seed):
    r = random.Random(seed)
    xs, ys = [], []
    for _ in range(n):
        c = r.randrange(4)
        xs.append(bytes(max(0, min(255, int(r.gauss(64 + 40 * ((c * 7 + j) % 5), 30)))) for j in range(16)))
        ys.append(c)
    return xs, ys
def idx(path, xs, ys, gz):
    op = gzip.open if gz else open
    with op(path + "-images.idx" + (".gz" if gz else ""), "wb") as f:
        f.write(struct.pack(">BBBBIII", 0, 0, 8, 3, len(xs), 4, 4) + b"".join(xs))
    with op(path + "-labels.idx" + (".gz" if gz else ""), "wb") as f:
        f.write(struct.pack(">BBBBI", 0, 0, 8, 1, len(ys)) + bytes(ys))
def shard(path, xs, ys, first):
    with tarfile.open(path, "w") as t:
        for i, (x, y) in enumerate(zip(xs, ys)):
            for ext, data in ((".u8", x), (".cls", str(y).encode())):
                ti = tarfile.TarInfo("%06d%s" % (first + i, ext))
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
tx, ty = blobs(2000, 1)
vx, vy = blobs(400, 2)
idx(out + "/train", tx, ty, False)
idx(out + "/test", vx, vy, True)
for name, xs, ys in (("train", tx, ty), ("test", vx, vy)):
    with open(out + "/" + name + ".csv", "w") as f:
        f.write(",".join("f%d" % j for j in range(16)) + ",y\n")
        for x, y in zip(xs, ys):
            f.write(",".join(str(v) for v in x) + ",%d\n" % y)
at = 0
for k, size in enumerate((250, 400, 300, 350, 300, 400)):
    shard(out + "/train-%d.tar" % k, tx[at:at + size], ty[at:at + size], at)
    at += size
shard(out + "/test.tar", vx, vy, 0)
EOT
mkdir -p "$TEST_TMP/data" && python3 "$TEST_TMP/gen.py" "$TEST_TMP/data" ||
	{ echo "Bail out! cannot generate the data"; exit 1; }

# make_project DIR FORMAT: a project over the generated data with data.shard on
make_project() {
	mkdir -p "$1" && cp "$TEST_TMP"/data/* "$1" &&
	case $2 in
	idx) data='  train: {images: train-images.idx, labels: train-labels.idx}
  test: {images: test-images.idx.gz, labels: test-labels.idx.gz}' ;;
	csv) data='  train: {source: train.csv}
  test: {source: test.csv}
  scale: 0.00392156862745098' ;;
	tar) data='  train:
    shards: [train-0.tar, train-1.tar, train-2.tar, train-3.tar, train-4.tar, train-5.tar]
  test: {source: test.tar}' ;;
	esac &&
	cat >"$1/dlk.yaml" <<EOT
name: blobs
data:
  format: $2
  shard: true
$data
model:
  input: [1, 4, 4]
  layers:
    - flatten
    - dense: {units: 32}
    - relu
    - dense: {units: 4}
training:
  epochs: 4
  batch_size: 32
  optimizer: {name: adam, lr: 0.01}
  threads: 1
  checkpoint: {every: 5, keep: 3}
EOT
}

weights_sha() { tar -xOf "$1" model.json | tr -d ' \t\n' | sed 's/.*"weights":{[^}]*"sha256":"\([0-9a-f]*\)".*/\1/'; }
accuracy() { sed -n 's/.*"testAccuracy":[ \t]*\([0-9.]*\).*/\1/p' "$1"; }
# the accuracy in $1 is at least $2
at_least() { a=$(accuracy "$1") && echo "accuracy $a" && awk -v a="$a" -v m="$2" 'BEGIN { exit !(a >= m) }'; }
# the run record of the project in $1 (its only run)
record() { ls "$1"/.dlk/runs/blobs/*.json | head -1; }

for fmt in idx csv; do
	test_expect_success "$fmt, 2 and 4 workers: each rank loads only its range of samples and the gang learns" '
		make_project p '$fmt' &&
		dlk train --local --workers 2 -v -o json -f p/dlk.yaml --set training.batch_size=16 >out.json 2>err &&
		grep "loaded its shard" err >lines && cat lines && test "$(wc -l <lines)" = 2 &&
		grep_q "^\[rank 0\] rank 0 loaded its shard: samples \[0, 1000) of 2000\$" lines &&
		grep_q "^\[rank 1\] rank 1 loaded its shard: samples \[1000, 2000) of 2000\$" lines &&
		at_least out.json 0.85 &&
		make_project q '$fmt' &&
		dlk train --local --workers 4 -v -o json -f q/dlk.yaml --set training.batch_size=8 >out4.json 2>err4 &&
		grep "loaded its shard" err4 >lines4 && cat lines4 && test "$(wc -l <lines4)" = 4 &&
		grep_q "^\[rank 2\] rank 2 loaded its shard: samples \[1000, 1500) of 2000\$" lines4 &&
		at_least out4.json 0.85
	'
done

test_expect_success 'tar shards, 2 and 4 workers: each rank loads only its files; the record names all of them' '
	make_project p tar &&
	dlk train --local --workers 2 -v -o json -f p/dlk.yaml --set training.batch_size=16 >out.json 2>err &&
	grep "loaded its shard" err >lines && cat lines &&
	grep_q "^\[rank 0\] rank 0 loaded its shard: files 1 to 3 of the training split (950 samples)\$" lines &&
	grep_q "^\[rank 1\] rank 1 loaded its shard: files 4 to 6 of the training split (1050 samples)\$" lines &&
	at_least out.json 0.85 &&
	jq -r ".run.data[] | .split + \" \" + .url + \" \" + .sha256" "$(record p)" | sort >got &&
	for f in train-0 train-1 train-2 train-3 train-4 train-5 test; do
		echo "$(case $f in test) echo test;; *) echo train;; esac) $f.tar $(sha256sum p/$f.tar | cut -c1-64)"
	done | sort >want && diff want got &&
	make_project q tar &&
	dlk train --local --workers 4 -v -o json -f q/dlk.yaml --set training.batch_size=8 >out4.json 2>err4 &&
	grep "loaded its shard" err4 >lines4 && cat lines4 && test "$(wc -l <lines4)" = 4 &&
	grep_q "^\[rank 3\] rank 3 loaded its shard: files 5 to 6 of the training split (700 samples)\$" lines4 &&
	at_least out4.json 0.85
'

test_expect_success 'tar with fewer files than workers: every rank reads them and keeps its range of samples' '
	make_project p tar && sed "s/shards: \[.*\]/shards: [train-0.tar, train-1.tar]/" p/dlk.yaml >p/x && mv p/x p/dlk.yaml &&
	dlk train --local --workers 4 -v -o json -f p/dlk.yaml --set training.batch_size=8 >out.json 2>err &&
	grep "loaded its shard" err >lines && cat lines && test "$(wc -l <lines)" = 4 &&
	grep_q "^\[rank 1\] rank 1 loaded its shard: samples \[162, 325) of 650\$" lines &&
	at_least out.json 0.8
'

test_expect_success 'tar shards of a versioned dataset: rank 0 reads only its files, records all by the manifest' '
	make_project p tar && mkdir ds && mv p/*.tar ds/ &&
	dlk data push ds --to "$PWD/store" >id 2>err && cat err id &&
	sed "s,^  shard: true,  shard: true\n  dataset: $(cat id)\n  store: $PWD/store," p/dlk.yaml >p/x && mv p/x p/dlk.yaml &&
	dlk train --local --workers 2 -v -f p/dlk.yaml --set training.batch_size=16 >/dev/null 2>err && cat err &&
	grep_q "^\[rank 0\] dataset sha256:.*: 4 files, .* read in place" err &&
	jq -r ".run.data[] | .split + \" \" + .url + \" \" + .sha256" "$(record p)" | sort >got &&
	for f in train-0 train-1 train-2 train-3 train-4 train-5 test; do
		echo "$(case $f in test) echo test;; *) echo train;; esac) $f.tar $(sha256sum ds/$f.tar | cut -c1-64)"
	done | sort >want && diff want got
'

test_expect_success '--if-data-changed sees every tar shard, also those rank 0 did not load' '
	make_project p tar &&
	dlk train --local --workers 2 -q -f p/dlk.yaml --set training.batch_size=16 >/dev/null 2>&1 &&
	test_exit_code 10 dlk train --local --workers 2 --if-data-changed -f p/dlk.yaml --set training.batch_size=16 \
		>/dev/null 2>err && cat err &&
	cp p/train-0.tar p/train-5.tar &&
	dlk train --local --workers 2 --if-data-changed -f p/dlk.yaml --set training.batch_size=16 >/dev/null 2>err &&
	cat err && grep_q "the data differs from what run .* trained on: training" err
'

test_expect_success 'the test split is not sharded: rank 0 evaluates on all of it' '
	make_project p idx &&
	dlk train --local --workers 2 -o json -f p/dlk.yaml --set training.batch_size=16 >out.json 2>err &&
	jq -e "[.confusionMatrix[][]] | add == 400" out.json
'

test_expect_success 'one worker with data.shard trains exactly as without it' '
	make_project a idx && make_project b idx &&
	dlk train --local -q -f a/dlk.yaml >/dev/null 2>&1 &&
	dlk train --local -q -f b/dlk.yaml --set data.shard=false >/dev/null 2>&1 &&
	test "$(weights_sha a/blobs.dlk)" = "$(weights_sha b/blobs.dlk)"
'

test_expect_success 'a sharded run is repeatable: the same two-worker run twice gives the same weights' '
	make_project a csv && make_project b csv &&
	dlk train --local --workers 2 -q -f a/dlk.yaml --set training.batch_size=16 >/dev/null 2>&1 &&
	dlk train --local --workers 2 -q -f b/dlk.yaml --set training.batch_size=16 >/dev/null 2>&1 &&
	test "$(weights_sha a/blobs.dlk)" = "$(weights_sha b/blobs.dlk)"
'

test_expect_success 'without data.shard every rank holds the whole split (no shard line)' '
	make_project p csv &&
	dlk train --local --workers 2 -v -f p/dlk.yaml --set data.shard=false --set training.batch_size=16 >/dev/null 2>err &&
	! grep -q "loaded its shard" err && grep_q "training .blobs. on 2000 samples" err
'

test_expect_success 'SIGTERM and resume of a sharded run ends with the same weights' '
	make_project ref csv && make_project p csv &&
	dlk train --local --workers 2 -q -f ref/dlk.yaml --set training.batch_size=16 >/dev/null 2>&1 &&
	{ DLK_TEST_CHECKPOINT_DELAY_MS=20 "$DLK" train --local --workers 2 -f p/dlk.yaml --set training.batch_size=16 \
		>/dev/null 2>err & pid=$!; } &&
	i=0; while ! ls -d p/.dlk/checkpoints/blobs/*/step-00000010 >/dev/null 2>&1 && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done &&
	kill -TERM $pid; wait $pid; rc=$?; cat err; test $rc = 75 &&
	dlk train --local --workers 2 -f p/dlk.yaml --set training.batch_size=16 >/dev/null 2>err2 && cat err2 && grep_q "resuming run .* from checkpoint" err2 &&
	test "$(weights_sha p/blobs.dlk)" = "$(weights_sha ref/blobs.dlk)"
'

test_expect_success 'a rank left without samples is a clear error' '
	make_project p csv && head -4 p/train.csv >p/x && mv p/x p/train.csv &&
	test_exit_code 3 dlk train --local --workers 4 -f p/dlk.yaml --set training.batch_size=1 >/dev/null 2>err;
	cat err && grep_q "rank 0 of 4 holds no training samples (the split has 3)" err &&
	grep_q "hint: use fewer workers" err
'

test_expect_success 'a truncated IDX file fails every rank with the byte offset, though a rank reads only its range' '
	make_project p idx && head -c 20000 p/train-images.idx >p/x && mv p/x p/train-images.idx &&
	test_exit_code 3 dlk train --local --workers 2 -f p/dlk.yaml >/dev/null 2>err;
	cat err && grep_q "train-images.idx.: truncated IDX data: the file ends at byte offset 20000" err
'

test_done
