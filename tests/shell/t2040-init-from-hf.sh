#!/bin/sh
# model.init_from: a GPT-2 checkpoint that transformers wrote (GPT2Config small, random weights,
# save_pretrained; 64 positions, the project uses the first 32) loaded into a dlk project of the
# same structure. A run whose SGD steps of lr 1e-30 move no weight (none is near 0) makes a bundle
# that `dlk export --hf` writes back tensor for tensor bit-identical; dlk's validation loss on 4
# held-out sequences is transformers' (printed to 4 decimals: tolerance 2e-4) and greedy
# `dlk generate` picks transformers' argmax (the padding id 0 aside) at each of 20 positions. Fine-tuning from it with
# `dlk train --local` lowers the validation loss. A project that does not match is refused, exit
# 3, naming the config field or the tensor and both shapes.
. "$(dirname "$0")/../lib.sh"

GCIDE=/usr/share/dictd/gcide.dict.dz
[ -f "$GCIDE" ] || test_missing "dict-gcide is installed ($GCIDE, Debian's dict-gcide, .ci/deps.d/corpus)"
PY=$TEST_ROOT/.deps/frameworks/bin/python
[ -x "$PY" ] || test_missing "the frameworks venv (.deps/frameworks)"

P=$TEST_TMP/p
mkdir -p "$P"
gzip -dc "$GCIDE" | head -c 3000000 | tail -c 4000 >"$P/slice.txt"
gzip -dc "$GCIDE" | head -c 4000000 | tail -c 129 >"$P/val.txt"
cat >"$P/dlk.yaml" <<EOT
name: tiny
data:
  format: text
  train: {source: slice.txt}
  test: {source: val.txt}
model:
  task: lm
  input: [32]
  init_from: tiny
  blocks:
    gpt2:
      - layernorm
      - attention: {heads: 4, name: att}
      - add: {inputs: [input, att], name: h}
      - layernorm
      - dense: {units: 64}
      - gelu: {approximate: tanh}
      - dense: {units: 32, name: mlp}
      - add: {inputs: [h, mlp]}
  layers:
    - embedding: {vocab: 257, dim: 32, positions: 32, name: wte}
    - {block: gpt2, repeat: 2}
    - layernorm
    - dense: {units: 257, tie: wte}
training:
  epochs: 1
  batch_size: 8
  threads: 2
  optimizer: {name: sgd, lr: 1e-30}
  checkpoint: {every: 0}
EOT

test_expect_success 'transformers writes a tiny random GPT-2 and its loss and greedy choices' '
	cd "$P" &&
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$PY" - <<-EOF
	import torch
	from transformers import GPT2Config, GPT2LMHeadModel
	torch.manual_seed(3)
	c = GPT2Config(vocab_size=257, n_positions=64, n_embd=32, n_layer=2, n_head=4, n_inner=64,
	               resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)
	m = GPT2LMHeadModel(c).eval()
	with torch.no_grad():
	    for n, p in m.named_parameters():  # no weight near 0, biases and norms not 0 and 1
	        p.copy_((1 if "ln_" in n and n.endswith("weight") else 0) + 0.1 * torch.randn_like(p))
	        p.add_(torch.where(p >= 0, 1e-3, -1e-3))
	m.save_pretrained("tiny")
	ids = [1 + b for b in open("val.txt", "rb").read()]
	x = torch.tensor([ids[i * 32:i * 32 + 32] for i in range(4)])
	y = torch.tensor([ids[i * 32 + 1:i * 32 + 33] for i in range(4)])
	with torch.no_grad():
	    logits = m(x).logits
	loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 257), y.reshape(-1)).item()
	open("want_loss", "w").write("%.6f\n" % loss)
	seq = [1 + b for b in b"The word "]
	with torch.no_grad():
	    for _ in range(20):
	        seq.append(1 + int(m(torch.tensor([seq])).logits[0, -1, 1:].argmax()))  # id 0 pads
	# dlk generate writes a byte that is not UTF-8 as U+FFFD, as this decode does
	open("want_greedy", "wb").write(bytes(i - 1 for i in seq[9:]).decode("utf-8", "replace").encode())
	EOF
	test -f tiny/model.safetensors && test -s want_loss
'

test_expect_success 'imported: the same tensors back, the same loss, the same greedy choices' '
	cd "$P" &&
	dlk train --local -q >out 2>&1 && cat out &&
	sed -n "s/^val loss \([0-9.]*\) (4 sequences of 32 tokens)/\1/p" out >got_loss && test -s got_loss &&
	"$PY" -c "import sys; g, w = float(open(\"got_loss\").read()), float(open(\"want_loss\").read()); print(\"dlk %.4f transformers %.6f\" % (g, w)); sys.exit(abs(g - w) > 2e-4)" &&
	dlk generate tiny.dlk "The word " --temperature 0 --max-tokens 20 >got_greedy &&
	cmp want_greedy got_greedy &&
	dlk export tiny.dlk --hf back >/dev/null &&
	"$PY" - <<-EOF
	from safetensors.numpy import load_file
	a, b = load_file("tiny/model.safetensors"), load_file("back/model.safetensors")
	for k, v in b.items():
	    w = a[k][:32] if k.endswith("wpe.weight") else a[k]
	    assert (w == v).all(), k
	n = [k for k in a if k not in b]
	assert n == ["transformer.wpe.weight"][:0] or all(k.endswith(".attn.bias") or k == "lm_head.weight" for k in n), n
	print(len(b), "tensors equal")
	EOF
'

test_expect_success 'fine-tuning from it lowers the validation loss' '
	cd "$P" &&
	dlk train --local -q --set training.optimizer.name=adam --set training.optimizer.lr=0.01 \
		--set training.epochs=2 >tuned 2>&1 &&
	sed -n "s/^val loss \([0-9.]*\) (4 sequences of 32 tokens)/\1/p" tuned >tuned_loss && cat tuned_loss &&
	"$PY" -c "import sys; t, w = float(open(\"tuned_loss\").read()), float(open(\"want_loss\").read()); print(\"from %.4f to %.4f\" % (w, t)); sys.exit(not t < w - 0.5)"
'

test_expect_success 'a project that does not match: the field, or the tensor and both shapes, exit 3' '
	cd "$P" &&
	sed "s/units: 64/units: 48/" dlk.yaml >narrow.yaml &&
	{ dlk train --local -q -f narrow.yaml 2>err; rc=$?; } ; cat err && test "$rc" = 3 &&
	grep -q "tiny/config.json: n_inner is 64, but the project.s MLP width is 48" err &&
	mkdir -p bad && cp tiny/model.safetensors bad/ &&
	sed "s/\"n_inner\": 64/\"n_inner\": 48/" tiny/config.json >bad/config.json &&
	{ dlk train --local -q -f narrow.yaml --set model.init_from=bad 2>err; rc=$?; } ;
	cat err && test "$rc" = 3 &&
	grep -q "bad/model.safetensors: tensor .transformer.h.0.mlp.c_fc.weight. has shape \[32, 64\], but model.blocks.gpt2\[4\] .*needs \[32, 48\]" err &&
	{ dlk train --local -q --set model.init_from=nowhere 2>err; rc=$?; } ; cat err && test "$rc" = 3 &&
	grep -q "model.init_from: .*nowhere/config.json" err
'

test_done
