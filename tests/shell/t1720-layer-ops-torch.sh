#!/bin/sh
# ABI 6's layer operations against PyTorch: tests/tools/layer_ops writes the CPU reference's
# inputs, outputs and gradients; PyTorch (the frameworks venv, .ci/deps.d/frameworks) recomputes
# them in float64 from the same inputs and weights through its own modules (nn.LayerNorm, nn.GELU,
# torch.softmax, nn.Embedding, nn.Upsample, nn.Conv2d with groups, nn.ConvTranspose2d) and autograd. Tolerance: |dlk - torch| <= 1e-5 + 1e-4|torch|
# everywhere (float32 against float64: a few ulps of the row sums).
. "$(dirname "$0")/../lib.sh"

PY=$TEST_ROOT/.deps/frameworks/bin/python
OPS=$TEST_ROOT/${BUILD:-build}/tests/tools/layer_ops
[ -x "$PY" ] || test_missing "the frameworks venv (.deps/frameworks)"
[ -x "$OPS" ] || test_missing "tests/tools/layer_ops (make test-unit builds it)"

cat >"$TEST_TMP/parity.py" <<'PYEOF'
import sys, numpy as np, torch
torch.set_default_dtype(torch.float64)
d, case = sys.argv[1], sys.argv[2]
def f(name, *shape): return torch.tensor(np.fromfile(f"{d}/{name}.f32", dtype=np.float32).astype(np.float64).reshape(shape))
bad = []
def same(what, dlk, ref):
    ref = ref.detach().numpy()
    lim = 1e-5 + 1e-4 * np.abs(ref)
    err = np.abs(dlk.numpy() - ref)
    if not (err <= lim).all():
        i = int(np.argmax(err - lim))
        bad.append(f"{what}: {int((err > lim).sum())} of {ref.size} differ (worst {dlk.numpy().flat[i]!r} vs {ref.flat[i]!r})")
    else:
        print(f"{what}: {ref.size} values agree (max |diff| {err.max():.3g})")
if case == "layernorm":
    m = torch.nn.LayerNorm(48, eps=1e-5)
    with torch.no_grad(): m.weight.copy_(f("ln_w", 48)); m.bias.copy_(f("ln_b", 48))
    x = f("ln_x", 6, 10, 48).requires_grad_()
    y = m(x); y.backward(f("ln_dy", 6, 10, 48))
    same("layernorm y", f("ln_y", 6, 10, 48), y); same("layernorm dx", f("ln_dx", 6, 10, 48), x.grad)
    same("layernorm weight grad", f("ln_dw", 48), m.weight.grad); same("layernorm bias grad", f("ln_db", 48), m.bias.grad)
elif case == "gelu":
    for approx, name in (("none", "erf"), ("tanh", "tanh")):
        x = f("gelu_x", 4096).requires_grad_()
        y = torch.nn.GELU(approximate=approx)(x); y.backward(f("gelu_dy", 4096))
        same(f"gelu {name} y", f(f"gelu_{name}_y", 4096), y); same(f"gelu {name} dx", f(f"gelu_{name}_dx", 4096), x.grad)
elif case == "softmax":
    x = f("sm_x", 32, 100).requires_grad_()
    y = torch.softmax(x, dim=-1); y.backward(f("sm_dy", 32, 100))
    same("softmax y", f("sm_y", 32, 100), y); same("softmax dx", f("sm_dx", 32, 100), x.grad)
elif case == "embedding":
    ids = torch.tensor(np.fromfile(f"{d}/emb_ids.i32", dtype=np.int32).astype(np.int64).reshape(4, 16))
    m = torch.nn.Embedding(37, 24)
    with torch.no_grad(): m.weight.copy_(f("emb_w", 37, 24))
    y = m(ids); y.backward(f("emb_dy", 4, 16, 24))
    same("embedding y", f("emb_y", 4, 16, 24), y); same("embedding weight grad", f("emb_dw", 37, 24), m.weight.grad)
elif case == "upsample":
    for mode in ("nearest", "bilinear"):
        for s in (2, 3):
            x = f("up_x", 2, 3, 5, 7).requires_grad_()
            y = torch.nn.Upsample(scale_factor=s, mode=mode, **({"align_corners": False} if mode == "bilinear" else {}))(x)
            y.backward(f(f"up_{mode}{s}_dy", 2, 3, 5 * s, 7 * s))
            same(f"upsample {mode} x{s} y", f(f"up_{mode}{s}_y", 2, 3, 5 * s, 7 * s), y)
            same(f"upsample {mode} x{s} dx", f(f"up_{mode}{s}_dx", 2, 3, 5, 7), x.grad)
elif case == "conv":
    nn = torch.nn
    mods = {"gconv": (nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2), (2, 4, 9, 8)),
            "dwconv": (nn.Conv2d(4, 4, 3, padding=1, groups=4), (2, 4, 9, 8)),
            "convt": (nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1), (2, 4, 5, 4))}
    for name, (m, xs) in mods.items():
        with torch.no_grad(): m.weight.copy_(f(f"{name}_w", *m.weight.shape)); m.bias.copy_(f(f"{name}_b", *m.bias.shape))
        x = f(f"{name}_x", *xs).requires_grad_()
        y = m(x); y.backward(f(f"{name}_dy", *y.shape))
        same(f"{name} y", f(f"{name}_y", *y.shape), y); same(f"{name} dx", f(f"{name}_dx", *xs), x.grad)
        same(f"{name} weight grad", f(f"{name}_dw", *m.weight.shape), m.weight.grad)
        same(f"{name} bias grad", f(f"{name}_db", *m.bias.shape), m.bias.grad)
for b in bad: print(b)
sys.exit(1 if bad else 0)
PYEOF

mkdir -p "$TEST_TMP/ops"
"$OPS" "$TEST_TMP/ops" || test_missing "tests/tools/layer_ops failed to write its files"

for op in layernorm gelu softmax embedding upsample; do
	test_expect_success "$op: forward and gradients equal PyTorch's on the same inputs and weights" "
		'$PY' '$TEST_TMP/parity.py' '$TEST_TMP/ops' $op
	"
done

test_expect_success 'conv2d with groups (grouped, depthwise) and convtranspose2d equal nn.Conv2d / nn.ConvTranspose2d' "
	'$PY' '$TEST_TMP/parity.py' '$TEST_TMP/ops' conv
"

test_done
