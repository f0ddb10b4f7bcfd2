#!/bin/sh
# model.task lm on real English text: a byte-level bigram LM (an embedding whose width is the
# vocabulary gives [1, T, V] logits directly) trained for one epoch on ~200 KB of Debian's
# dict-gcide, its validation loss (the last 10% of the corpus) below a stated value; perplexity in
# the log, -o json, the run history and the report page; the token cache reused by a second run
# and rebuilt for a changed corpus; the gate refusing a model above serving.max_val_loss; and the
# errors a user meets.
. "$(dirname "$0")/../lib.sh"

GCIDE=/usr/share/dictd/gcide.dict.dz
if [ ! -f "$GCIDE" ]; then
	test_missing "dict-gcide is installed ($GCIDE, Debian's dict-gcide, .ci/deps.d/corpus)"
fi
P=$TEST_TMP/proj

test_expect_success 'setup: a slice of the dictionary and a bigram project' '
	mkdir -p "$P" &&
	{ gzip -dc "$GCIDE" | head -c 3000000 | tail -c 200000 >"$P/corpus.txt"; true; } &&
	test "$(wc -c <"$P/corpus.txt")" = 200000 &&
	cat >"$P/dlk.yaml" <<EOT
name: bigram
data:
  format: text
  train: {source: corpus.txt}
  validation: 0.1
model:
  task: lm
  input: [64]
  layers:
    - embedding: {vocab: 257, dim: 257}
training:
  epochs: 1
  batch_size: 32
  threads: 2
  optimizer: {name: adam, lr: 0.1}
  checkpoint: {every: 0}
EOT
'

# One epoch of 2812 sequences of 64 + 1 bytes. A uniform guess is ln 257 = 5.55 nats a byte; a
# byte bigram of English text settles near 2.4: below 2.7 is a model that learnt the bigrams.
test_expect_success 'one epoch: the validation loss falls below 2.7, perplexity below 15' '
	cd "$P" &&
	dlk train --local >out 2>err && cat out err &&
	grep_q "^val loss [0-9.]* (312 sequences of 64 tokens)$" out &&
	loss=$(sed -n "s/^val loss \([0-9.]*\) .*/\1/p" out) &&
	ppl=$(sed -n "s/^val perplexity \([0-9.]*\)$/\1/p" out) &&
	awk -v l="$loss" -v p="$ppl" "BEGIN { d = exp(l) - p; exit !(l < 2.7 && p < 15 && d < 0.01 && d > -0.01) }" &&
	grep_q "^epoch 1/1  train loss [0-9.]*  val loss [0-9.]*  perplexity [0-9.]*" err &&
	grep_q "^trained 1 epochs in .* tokens/s)$" err
'

test_expect_success 'the run record, its history and its report page show the perplexity' '
	cd "$P" &&
	dlk status --history --local >hist && cat hist &&
	grep_q "succeeded .* perplexity [0-9.]*" hist &&
	id=$(awk "NR == 2 { print \$1 }" hist) &&
	dlk status --local --run "$id" >run && grep_q "metrics .*test perplexity [0-9.]*, test loss [0-9.]*" run &&
	dlk report "$id" -o page.html >/dev/null 2>&1 && grep_q "perplexity" page.html
'

test_expect_success '-o json gives the validation loss, the perplexity and tokens/s' '
	cd "$P" &&
	dlk train --local -q -o json >r.json &&
	jq -e ".task == \"lm\" and .testLoss < 2.7 and .test.perplexity < 15 and .tokensPerSecond > 0" r.json &&
	jq -e "(.tokensPerSecond / .samplesPerSecond - 64) | fabs < 1e-9" r.json
'

test_expect_success 'the second run read the token cache; a changed corpus is tokenized again' '
	cd "$P" &&
	ls .dlk/cache/tokens-*.tok >caches && test "$(wc -l <caches)" = 1 &&
	before=$(ls -l --time-style=+%s.%N "$(cat caches)") &&
	dlk train --local -q -o json >/dev/null &&
	test "$(ls -l --time-style=+%s.%N "$(cat caches)")" = "$before" &&
	printf "A new first line.\n" | cat - corpus.txt >c2 && mv c2 corpus.txt &&
	dlk train --local -q -o json >/dev/null &&
	test "$(ls .dlk/cache/tokens-*.tok | wc -l)" = 2
'

test_expect_success 'the gate refuses a model above serving.max_val_loss (exit 9), passes one below' '
	cd "$P" && cp bigram.dlk "$TEST_TMP/m.dlk" &&
	{ cd "$TEST_TMP" && python3 -m http.server --bind 127.0.0.1 0 >http.log 2>&1 & hp=$!; } &&
	i=0 && while ! grep -q "port [0-9]" "$TEST_TMP/http.log" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done &&
	port=$(sed -n "s/.*port \([0-9]*\).*/\1/p" "$TEST_TMP/http.log" | head -n 1) &&
	sha=$(sha256sum "$TEST_TMP/m.dlk" | cut -d" " -f1) &&
	url="http://127.0.0.1:$port/m.dlk" &&
	dlk -f "$P/dlk.yaml" serve --dry-run -o json --model "$url" --sha256 "$sha" --set serving.max_val_loss=1.5 \
		>/dev/null 2>refused; r1=$? &&
	dlk -f "$P/dlk.yaml" serve --dry-run -o json --model "$url" --sha256 "$sha" --set serving.max_val_loss=4 \
		>/dev/null 2>passed; r2=$?; kill $hp; wait $hp; cat refused passed &&
	test $r1 = 9 && grep_q "refusing to deploy .bigram.: its test loss [0-9.]* is above the maximum 1.5" refused &&
	test $r2 = 0 && grep_q "passes serving.max_val_loss 4" passed
'

test_expect_success 'errors: a corpus too short for the context, a head too narrow, max_val_loss on a classifier' '
	cd "$P" &&
	printf "tiny" >tiny.txt &&
	test_exit_code 3 dlk train --local --set data.train.source=tiny.txt 2>err && cat err &&
	grep_q "tiny.txt.: 4 tokens, too few for one sequence of 64 + 1" err &&
	sed "s/dim: 257/dim: 100/" dlk.yaml >narrow.yaml &&
	test_exit_code 3 dlk train --local -f narrow.yaml 2>err && cat err &&
	grep_q "token id [0-9]* but the model.s logits cover a vocabulary of 100" err &&
	grep_q "hint: make the last layer.s width the tokenizer.s vocabulary, 257" err &&
	test_exit_code 3 dlk train --local --set model.task=classification --set serving.max_val_loss=2 2>err && cat err &&
	grep_q "serving.max_val_loss=2: a maximum validation loss is for task lm, not classification" err
'

test_done
