#!/bin/sh
# A TensorFlow MultiWorkerMirroredStrategy program (the registry's tensorflow-cpu, .ci/deps.d/
# tensorflow) as a 2-worker gang under `dlk train --local --workers 2`: the workers find each
# other through the TF_CONFIG dlk renders (its cluster spec and each worker's task index), each
# sums its share of the Fashion-MNIST training labels, and one cross-worker all-reduce of the
# strategy gives both the file's total; the record has what rank 0 reported. (Here, not on the
# test cluster: the pods would run the same TF_CONFIG, which test_program_env checks field by
# field; the cluster's own part is the PyTorch test's, t1622.)
. "$(dirname "$0")/../lib.sh"

TF=$TEST_ROOT/.deps/tensorflow/bin
D=/usr/share/datasets/fashion-mnist
if [ ! -x "$TF/python3" ] || [ ! -f "$D/train-labels-idx1-ubyte.gz" ]; then
	test_missing "tensorflow-cpu (.ci/deps.d/tensorflow) and Fashion-MNIST"
fi

P=$TEST_TMP/tf
mkdir -p "$P"
cat >"$P/train.py" <<'PY'
import gzip, json, os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf

tc = json.loads(os.environ["TF_CONFIG"])
index, n = tc["task"]["index"], len(tc["cluster"]["worker"])
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with gzip.open(os.path.join(os.environ["DLK_DATA_DIR"], "train-labels-idx1-ubyte.gz"), "rb") as f:
    y = np.frombuffer(f.read(), dtype=np.uint8, offset=8).astype(np.int64)
mine = int(y[index::n].sum())
per = strategy.run(lambda: tf.constant(float(mine), dtype=tf.float64))
total = int(strategy.reduce(tf.distribute.ReduceOp.SUM, per, axis=None).numpy())
print("worker %d of %d (%d in sync): local sum %d, all-reduced sum %d, expected %d"
      % (index, n, strategy.num_replicas_in_sync, mine, total, int(y.sum())), flush=True)
if index == 0:
    print("DLK-PROGRESS " + json.dumps({"event": "done", "metrics": {"label_sum": total}}), flush=True)
if total != int(y.sum()):
    raise SystemExit("all-reduced sum %d is not the file's %d" % (total, int(y.sum())))
PY
cat >"$P/dlk.yaml" <<EOT
name: tf-allreduce
data:
  format: idx
  train:
    images: file://$D/train-images-idx3-ubyte.gz
    labels: file://$D/train-labels-idx1-ubyte.gz
program:
  framework: tensorflow
  command: ["$TF/python3", train.py]
  code: .
resources:
  workers: 2
EOT

test_expect_success 'the two workers meet through TF_CONFIG and all-reduce the label sum' '
	dlk train --local --workers 2 -f "$P/dlk.yaml" >out 2>err; rc=$?
	cat err; test $rc = 0 &&
	want=$("$TF/python3" -c "import gzip; print(sum(gzip.open(\"$D/train-labels-idx1-ubyte.gz\").read()[8:]))") &&
	grep_q "^\[rank 0\] worker 0 of 2 (2 in sync): local sum [0-9]*, all-reduced sum $want, expected $want" err &&
	grep_q "^\[rank 1\] worker 1 of 2 (2 in sync): local sum [0-9]*, all-reduced sum $want, expected $want" err &&
	rec=$(ls -t "$P"/.dlk/runs/tf-allreduce/*.json | head -n 1) &&
	jq -e ".run.outcome == \"succeeded\" and .run.worlds == [2] and .metrics.program.label_sum == $want and
		.provenance.framework == \"tensorflow\"" "$rec"
'

test_done
