#!/bin/sh
# Batch normalisation against PyTorch: tests/tools/bn_steps runs the CPU reference for 3 training
# steps on batches of [4, 3, 2, 3] (BatchNorm2d) and [5, 4] (BatchNorm1d); torch's modules, in
# float64 from the same float32 inputs and weights, must give the same running mean and variance
# after every step (momentum 0.1, unbiased variance), num_batches_tracked, the last training
# output, its gradients (x, weight, bias) and the evaluation output, within 1e-5 + 1e-4 |torch|.
. "$(dirname "$0")/../lib.sh"

PY=$TEST_ROOT/.deps/frameworks/bin/python
STEPS=$TEST_ROOT/${BUILD:-build}/tests/tools/bn_steps
[ -x "$PY" ] || test_missing "the frameworks venv (.deps/frameworks)"
[ -x "$STEPS" ] || test_missing "tests/tools/bn_steps (make test-unit builds it)"

mkdir -p "$TEST_TMP/bn"
"$STEPS" "$TEST_TMP/bn" || test_missing "tests/tools/bn_steps failed to write its files"

test_expect_success 'running statistics, outputs and gradients equal BatchNorm2d and BatchNorm1d (float64)' '
	"$PY" - "$TEST_TMP/bn" <<PYEOF
import sys, numpy as np, torch
d = sys.argv[1]
def f(cs, name, shape): return torch.from_numpy(np.fromfile(f"{d}/{cs}.{name}.f32", dtype=np.float32).astype(np.float64).reshape(shape))
def close(name, got, ref):
    err = (got - ref).abs().max().item()
    ok = bool(((got - ref).abs() <= 1e-5 + 1e-4 * ref.abs()).all())
    print(f"{name}: max |dlk - torch| = {err:.3g}")
    assert ok, name
for cs, shape, mod in (("bn2d", (4, 3, 2, 3), torch.nn.BatchNorm2d), ("bn1d", (5, 4), torch.nn.BatchNorm1d)):
    C = shape[1]
    x = f(cs, "x", (3,) + shape)
    m = mod(C, eps=1e-5, momentum=0.1).double()
    with torch.no_grad():
        m.weight.copy_(f(cs, "w", (C,)))
        m.bias.copy_(f(cs, "b", (C,)))
    running = f(cs, "running", (3, 2, C))
    m.train()
    for s in range(3):
        xs = x[s].clone().requires_grad_(s == 2)
        y = m(xs)
        close(f"{cs} running_mean after step {s + 1}", running[s, 0], m.running_mean)
        close(f"{cs} running_var after step {s + 1}", running[s, 1], m.running_var)
    assert m.num_batches_tracked.item() == 3 == f(cs, "nbt", (1,)).item()
    close(f"{cs} training output", f(cs, "y", shape), y.detach())
    dy = f(cs, "dy", shape)
    y.backward(dy)
    close(f"{cs} dx", f(cs, "dx", shape), xs.grad)
    close(f"{cs} dweight", f(cs, "dw", (C,)), m.weight.grad)
    close(f"{cs} dbias", f(cs, "db", (C,)), m.bias.grad)
    m.eval()
    with torch.no_grad(): ev = m(x[2])
    close(f"{cs} evaluation output", f(cs, "eval", shape), ev)
PYEOF
'

test_done
