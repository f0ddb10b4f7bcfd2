#!/bin/sh
# The attention layer kind against PyTorch (float64) on the same inputs and weights:
# tests/tools/attn_net runs small networks on the CPU reference and writes inputs, parameters,
# outputs, the output gradient it was given and every parameter gradient; PyTorch recomputes them:
#   causal   x [2, 70, 8] -> nn.Linear -> causal attention (2 heads) through
#            F.scaled_dot_product_attention(is_causal=True) with the layer's projections; T = 70
#            is a full key block of 64 and a partial one
#   rotary   the same with rotary position embeddings (rotate-half, base 10000), T = 20
#   padding  ids [2, 12] -> nn.Embedding + learned positions -> nn.MultiheadAttention (4 heads,
#            bidirectional, key_padding_mask = ids == 0)
#   gpt      a pre-norm GPT-2 block written as layers (embedding + positions, layernorm, attention,
#            add, layernorm, dense, gelu tanh, dense, add) against the same block in torch
# The linear before the attention and the embedding receive the attention's input gradient, so
# their weight gradients check it. Tolerance: |dlk - torch| <= 2e-5 + 1e-4 |torch| for every
# value (float32 against float64).
. "$(dirname "$0")/../lib.sh"

PY=$TEST_ROOT/.deps/frameworks/bin/python
NETS=$TEST_ROOT/${BUILD:-build}/tests/tools/attn_net
[ -x "$PY" ] || test_missing "the frameworks venv (.deps/frameworks)"
[ -x "$NETS" ] || test_missing "tests/tools/attn_net (make test-unit builds it)"

cat >"$TEST_TMP/parity.py" <<'PYEOF'
import sys, math, numpy as np, torch
import torch.nn.functional as F
torch.set_default_dtype(torch.float64)
# run.py executes this once per case in one process (importing torch once), with d and case set
def f(name): return np.fromfile(f"{d}/{case}_{name}.f32", dtype=np.float32).astype(np.float64)
bad = []
def same(what, dlk, ref):
    ref = ref.detach().numpy().reshape(-1); dlk = np.asarray(dlk).reshape(-1)
    lim = 2e-5 + 1e-4 * np.abs(ref)
    err = np.abs(dlk - ref)
    if not (err <= lim).all():
        i = int(np.argmax(err - lim))
        bad.append(f"{case} {what}: {int((err > lim).sum())} of {ref.size} differ (worst {dlk[i]!r} vs {ref[i]!r})")
    else:
        print(f"{case} {what}: {ref.size} values agree (max |diff| {err.max():.3g})")

# the parameters in the net's flat order: (name, shape) per tensor
layouts = {
    "causal": [("lin.w", (8, 8)), ("lin.b", (8,)), ("att.w", (32, 8)), ("att.b", (32,))],
    "padding": [("emb.w", (11, 16)), ("emb.pos", (16, 16)), ("att.w", (64, 16)), ("att.b", (64,))],
    "gpt": [("emb.w", (11, 16)), ("emb.pos", (10, 16)), ("ln1.w", (16,)), ("ln1.b", (16,)), ("att.w", (64, 16)),
            ("att.b", (64,)), ("ln2.w", (16,)), ("ln2.b", (16,)), ("fc1.w", (64, 16)), ("fc1.b", (64,)),
            ("fc2.w", (16, 64)), ("fc2.b", (16,))],
}
layouts["rotary"] = layouts["causal"]
flat, gflat = f("params"), f("grads")
P, G, at = {}, {}, 0
for name, shape in layouts[case]:
    n = int(np.prod(shape))
    P[name] = torch.tensor(flat[at:at + n].reshape(shape), requires_grad=True)
    G[name] = gflat[at:at + n]
    at += n
assert at == flat.size, f"{at} parameters in the layout, {flat.size} written"

def rope(t):  # [B, H, T, hd], rotate-half
    T, hd = t.shape[2], t.shape[3]
    inv = 10000.0 ** (-2.0 * torch.arange(hd // 2) / hd)
    ang = torch.arange(T)[:, None] * inv[None, :]
    c, s = torch.cos(ang), torch.sin(ang)
    t1, t2 = t[..., : hd // 2], t[..., hd // 2 :]
    return torch.cat([t1 * c - t2 * s, t2 * c + t1 * s], dim=-1)

def attention(x, w, b, heads, rotary=False):  # GPT-2's c_attn / c_proj with the layer's weights
    B, T, D = x.shape
    qkv = F.linear(x, w[: 3 * D], b[: 3 * D])
    q, k, v = (t.view(B, T, heads, D // heads).transpose(1, 2) for t in qkv.split(D, dim=-1))
    if rotary:
        q, k = rope(q), rope(k)
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return F.linear(a.transpose(1, 2).reshape(B, T, D), w[3 * D :], b[3 * D :])

if case in ("causal", "rotary"):
    T = 70 if case == "causal" else 20
    x = torch.tensor(f("x").reshape(2, T, 8))
    y = attention(F.linear(x, P["lin.w"], P["lin.b"]), P["att.w"], P["att.b"], 2, rotary=case == "rotary")
elif case == "padding":
    ids = torch.tensor(f("x").reshape(2, 12)).long()
    h = F.embedding(ids, P["emb.w"]) + P["emb.pos"][:12]
    m = torch.nn.MultiheadAttention(16, 4, batch_first=True)
    m.in_proj_weight = torch.nn.Parameter(P["att.w"][:48]); m.in_proj_bias = torch.nn.Parameter(P["att.b"][:48])
    m.out_proj.weight = torch.nn.Parameter(P["att.w"][48:]); m.out_proj.bias = torch.nn.Parameter(P["att.b"][48:])
    assert (ids == 0).sum() == 4, "the padding the test means"
    y, _ = m(h, h, h, key_padding_mask=ids == 0, need_weights=False)
    # MultiheadAttention's parameters are copies: their gradients go back to ours
    y.backward(torch.tensor(f("dy").reshape(y.shape)))
    G_att_w = torch.cat([m.in_proj_weight.grad, m.out_proj.weight.grad]); G_att_b = torch.cat([m.in_proj_bias.grad, m.out_proj.bias.grad])
    same("output", f("y"), y)
    same("attention weight grad", G["att.w"], G_att_w); same("attention bias grad", G["att.b"], G_att_b)
    same("embedding weight grad", G["emb.w"], P["emb.w"].grad); same("position embedding grad", G["emb.pos"], P["emb.pos"].grad)
    for b_ in bad: print(b_)
    sys.exit(1 if bad else 0)
elif case == "gpt":
    ids = torch.tensor(f("x").reshape(3, 10)).long()
    e = F.embedding(ids, P["emb.w"]) + P["emb.pos"][:10]
    h = e + attention(F.layer_norm(e, (16,), P["ln1.w"], P["ln1.b"], 1e-5), P["att.w"], P["att.b"], 4)
    u = F.linear(F.layer_norm(h, (16,), P["ln2.w"], P["ln2.b"], 1e-5), P["fc1.w"], P["fc1.b"])
    y = h + F.linear(F.gelu(u, approximate="tanh"), P["fc2.w"], P["fc2.b"])
y.backward(torch.tensor(f("dy").reshape(y.shape)))
same("output", f("y"), y)
for name, _ in layouts[case]:
    same(f"{name} grad", G[name], P[name].grad)
for b_ in bad: print(b_)
sys.exit(1 if bad else 0)
PYEOF

cat >"$TEST_TMP/run.py" <<'PYEOF'
import sys, contextlib
body = open(sys.argv[1]).read()
for case in sys.argv[3:]:
    with open(f"{sys.argv[2]}/{case}.log", "w") as log, contextlib.redirect_stdout(log):
        try:
            exec(body, {"__name__": "parity", "d": sys.argv[2], "case": case})
            rc = 0
        except SystemExit as e:
            rc = e.code
        except Exception as e:
            print(f"{case}: {type(e).__name__}: {e}")
            rc = 1
    open(f"{sys.argv[2]}/{case}.rc", "w").write(str(rc))
PYEOF

mkdir -p "$TEST_TMP/nets"
"$NETS" "$TEST_TMP/nets" || test_missing "tests/tools/attn_net failed to write its files"
"$PY" "$TEST_TMP/run.py" "$TEST_TMP/parity.py" "$TEST_TMP/nets" causal rotary padding gpt
# a case passed when its run returned 0; its log says what agreed and what did not
passed() { cat "$TEST_TMP/nets/$1.log"; test "$(cat "$TEST_TMP/nets/$1.rc" 2>/dev/null)" = 0; }

test_expect_success 'causal attention (T 70: a full and a partial block) equals scaled_dot_product_attention(is_causal=True), forward and every gradient' "
	passed causal
"
test_expect_success 'rotary position embeddings (rotate-half) equal the same in torch, forward and gradients' "
	passed rotary
"
test_expect_success 'bidirectional attention with a padding mask and learned positions equals nn.MultiheadAttention(key_padding_mask)' "
	passed padding
"
test_expect_success 'a pre-norm GPT-2 block written as layers equals the block in torch, forward and every gradient' "
	passed gpt
"

test_done
