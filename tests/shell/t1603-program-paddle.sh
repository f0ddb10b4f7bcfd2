#!/bin/sh
# A PaddlePaddle collective program (the registry's paddlepaddle CPU wheel, .ci/deps.d/paddle) as
# a 2-worker gang under `dlk train --local --workers 2`: paddle.distributed.init_parallel_env()
# finds the gang from the PADDLE_* variables dlk renders as paddle.distributed.launch does
# (endpoints, trainer id and count, and gloo as the backend on a node without GPUs); each
# process sums its share of the Fashion-MNIST training labels, one all-reduce gives both the
# file's total, and a DataParallel step leaves the same weights on both. The record has what
# rank 0 reported. (Here, not on the test cluster: the pods get the same variables, which
# test_program_env checks field by field; the cluster's own part is the PyTorch test's, t1622.)
. "$(dirname "$0")/../lib.sh"

PD=$TEST_ROOT/.deps/paddle/bin
D=/usr/share/datasets/fashion-mnist
if [ ! -x "$PD/python3" ] || [ ! -f "$D/train-labels-idx1-ubyte.gz" ]; then
	test_missing "paddlepaddle (.ci/deps.d/paddle) and Fashion-MNIST"
fi

P=$TEST_TMP/paddle
mkdir -p "$P"
cat >"$P/train.py" <<'PY'
import gzip, json, os, warnings

warnings.simplefilter("ignore")
import numpy as np
import paddle
import paddle.distributed as dist

paddle.set_device("cpu")
dist.init_parallel_env()
rank, n = dist.get_rank(), dist.get_world_size()
with gzip.open(os.path.join(os.environ["DLK_DATA_DIR"], "train-labels-idx1-ubyte.gz"), "rb") as f:
    y = np.frombuffer(f.read(), dtype=np.uint8, offset=8).astype(np.int64)
mine = int(y[rank::n].sum())
t = paddle.to_tensor([mine], dtype="int64")
dist.all_reduce(t)
total = int(t.numpy()[0])
print("trainer %d of %d: local sum %d, all-reduced sum %d, expected %d" % (rank, n, mine, total, int(y.sum())), flush=True)

# one DataParallel step on each trainer's own batch: the gradients are averaged, so the
# weights stay the same on both
paddle.seed(7)
model = paddle.DataParallel(paddle.nn.Linear(4, 2))
opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=model.parameters())
x = paddle.to_tensor(np.full((8, 4), rank + 1.0, dtype="float32"))
loss = model(x).square().mean()
loss.backward()
opt.step()
w = paddle.to_tensor(model.parameters()[0].numpy())
w0 = w.clone()
dist.broadcast(w0, src=0)
same = bool((w - w0).abs().max().numpy() == 0)
print("trainer %d: weights after one step %s rank 0's" % (rank, "equal" if same else "differ from"), flush=True)
if rank == 0:
    print("DLK-PROGRESS " + json.dumps({"event": "done", "metrics": {"label_sum": total}}), flush=True)
if total != int(y.sum()) or not same:
    raise SystemExit("trainer %d: the collectives disagree" % rank)
PY
cat >"$P/dlk.yaml" <<EOT
name: paddle-allreduce
data:
  format: idx
  train:
    images: file://$D/train-images-idx3-ubyte.gz
    labels: file://$D/train-labels-idx1-ubyte.gz
program:
  framework: paddle
  command: ["$PD/python3", train.py]
  code: .
  env:
    GLOG_minloglevel: "2"
resources:
  workers: 2
EOT

test_expect_success 'the two trainers meet through the PADDLE_* variables, all-reduce and keep equal weights' '
	dlk train --local --workers 2 -f "$P/dlk.yaml" >out 2>err; rc=$?
	cat err; test $rc = 0 &&
	want=$("$PD/python3" -c "import gzip; print(sum(gzip.open(\"$D/train-labels-idx1-ubyte.gz\").read()[8:]))") &&
	grep_q "^\[rank 0\] trainer 0 of 2: local sum [0-9]*, all-reduced sum $want, expected $want" err &&
	grep_q "^\[rank 1\] trainer 1 of 2: local sum [0-9]*, all-reduced sum $want, expected $want" err &&
	grep_q "^\[rank 1\] trainer 1: weights after one step equal rank 0" err &&
	rec=$(ls -t "$P"/.dlk/runs/paddle-allreduce/*.json | head -n 1) &&
	jq -e ".run.outcome == \"succeeded\" and .run.worlds == [2] and .metrics.program.label_sum == $want and
		.provenance.framework == \"paddle\"" "$rec"
'

test_done
