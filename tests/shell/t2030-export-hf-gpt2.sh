#!/bin/sh
# dlk export --hf: the example GPT (dlk init --example gpt), trained a few steps on a slice of
# dict-gcide, written as a Hugging Face GPT-2 checkpoint that transformers' GPT2LMHeadModel loads:
# its mean cross-entropy on the 4 held-out sequences (token id = 1 + byte) is the validation loss
# dlk printed (printed to 4 decimals: tolerance 2e-4; measured 4.8610 and 4.86104), and its argmax at every
# position is what greedy dlk generate chose (40 tokens after 3 prompts). A model that is not
# GPT-2 is refused, naming the layer, exit 3, nothing written.
. "$(dirname "$0")/../lib.sh"

GCIDE=/usr/share/dictd/gcide.dict.dz
[ -f "$GCIDE" ] || test_missing "dict-gcide is installed ($GCIDE, Debian's dict-gcide, .ci/deps.d/corpus)"
PY=$TEST_ROOT/.deps/frameworks/bin/python
[ -x "$PY" ] || test_missing "the frameworks venv (.deps/frameworks)"

test_expect_success 'a few steps of the example GPT, exported with --hf' '
	cd "$TEST_TMP" &&
	dlk init -q --example gpt g && cd g &&
	{ gzip -dc "$GCIDE" | head -c 3000000 | tail -c 6000 >slice.txt; true; } &&
	{ gzip -dc "$GCIDE" | head -c 4000000 | tail -c 600 >val.txt; true; } &&
	dlk train --local -q --set data.train.source=slice.txt --set data.validation=null \
		--set data.test.source=val.txt --set training.epochs=1 \
		--set training.batch_size=8 --set training.threads=2 --set training.checkpoint.every=0 \
		--set training.lr_schedule.warmup_steps=2 >out 2>&1 &&
	sed -n "s/^val loss \([0-9.]*\) (4 sequences of 128 tokens)/\1/p" out >val_loss && test -s val_loss &&
	dlk export g.dlk --hf hf >wrote &&
	grep -q "^wrote hf: GPT2LMHeadModel, 4 layers" wrote &&
	test -f hf/config.json && test -f hf/model.safetensors &&
	dlk export g.dlk --hf hf2 -o json | grep -q "\"architecture\": \"GPT2LMHeadModel\"" &&
	cmp hf/model.safetensors hf2/model.safetensors
'

test_expect_success 'transformers loads it: the same validation loss, the same greedy choices' '
	cd "$TEST_TMP/g" &&
	for p in "The word " "A " "of the "; do
		dlk generate g.dlk "$p" --temperature 0 --max-tokens 40 -o json >"gen-$p.json" || exit 1
	done &&
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$PY" - "The word " "A " "of the " <<-EOF
	import json, sys, torch
	from transformers import GPT2LMHeadModel
	m = GPT2LMHeadModel.from_pretrained("hf").eval()
	assert m.lm_head.weight.data_ptr() == m.transformer.wte.weight.data_ptr(), "head not tied"
	ids = [1 + b for b in open("val.txt", "rb").read()]
	x = torch.tensor([ids[i * 128:i * 128 + 128] for i in range(4)])
	y = torch.tensor([ids[i * 128 + 1:i * 128 + 129] for i in range(4)])
	with torch.no_grad():
	    logits = m(x).logits
	loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item()
	want = float(open("val_loss").read())
	print("val loss: dlk %.4f, transformers %.6f" % (want, loss))
	assert abs(loss - want) <= 2e-4, "the losses differ"
	for prompt in sys.argv[1:]:
	    want = json.load(open("gen-%s.json" % prompt))["text"]
	    p, ids = len(prompt.encode()), [1 + b for b in (prompt + want).encode()]
	    assert len(ids) - p == 40, "dlk generated %d tokens" % (len(ids) - p)
	    with torch.no_grad():
	        logits = m(torch.tensor([ids])).logits[0]
	    got = logits[p - 1:-1].argmax(-1).tolist()
	    print(repr(prompt), "dlk:", repr(want))
	    assert got == ids[p:], "transformers predicts %r" % bytes(i - 1 for i in got)
	EOF
'

test_expect_success 'a model that is not GPT-2 is refused: the layer named, exit 3, nothing written' '
	cd "$TEST_TMP/g" && mkdir r && cp slice.txt r/ &&
	sed "s/- gelu: {approximate: tanh}/- relu/" dlk.yaml >r/dlk.yaml && cd r &&
	dlk train --local -q --set data.train.source=slice.txt --set data.validation=0.1 --set training.epochs=1 \
		--set training.batch_size=8 --set training.threads=2 --set training.checkpoint.every=0 >out 2>&1 &&
	{ dlk export g.dlk --hf hf 2>err; rc=$?; } ; cat err && test "$rc" = 3 &&
	grep -q "model.layers\[6\] (relu): GPT-2.s MLP is dense, gelu (tanh), dense" err &&
	test ! -e hf
'

test_done
