#!/bin/sh
# A model.task lm bundle (a one-block causal transformer, trained here for one epoch on a slice of
# Debian's dict-gcide) generates through the key/value cache (lib/nn/decode.h) exactly the text
# that a full forward over the window per token gives, greedy and sampled, past the end of the
# 32-token context; dlk serve, which decodes each sequence with its own cache, answers
# /v1/completions with the same greedy text, four concurrent requests included.
. "$(dirname "$0")/../lib.sh"

GCIDE=/usr/share/dictd/gcide.dict.dz
[ -f "$GCIDE" ] || test_missing "dict-gcide is installed ($GCIDE, Debian's dict-gcide, .ci/deps.d/corpus)"
command -v curl >/dev/null || test_missing "curl"
command -v jq >/dev/null || test_missing "jq"

P=$TEST_TMP/gpt
mkdir -p "$P"
gzip -dc "$GCIDE" | head -c 3000000 | tail -c 60000 >"$P/corpus.txt"
cat >"$P/dlk.yaml" <<EOT
name: tinygpt
data:
  format: text
  train: {source: corpus.txt}
  validation: 0.1
model:
  task: lm
  input: [32]
  layers:
    - embedding: {vocab: 257, dim: 32, positions: 32, name: emb}
    - layernorm
    - attention: {heads: 2, name: att}
    - add: {inputs: [emb, att], name: h}
    - layernorm
    - dense: {units: 257}
training:
  epochs: 1
  batch_size: 16
  threads: 2
  optimizer: {name: adam, lr: 0.01}
  checkpoint: {every: 0}
EOT
(cd "$P" && dlk train --local -q >train.out 2>&1) || { echo "Bail out! training failed"; cat "$P/train.out"; exit 1; }
M=$P/tinygpt.dlk

test_expect_success 'the key/value cache is the default; --no-kv-cache turns it off' '
	dlk generate "$M" "The word " --temperature 0 --max-tokens 5 -o json >on.json &&
	dlk generate "$M" "The word " --temperature 0 --max-tokens 5 --no-kv-cache -o json >off.json &&
	jq -e ".kv_cache == true" on.json && jq -e ".kv_cache == false" off.json
'

test_expect_success 'greedy: the key/value cache gives the full forward'"'"'s text, 100 tokens past a 32-token context' '
	dlk generate "$M" "The word " --temperature 0 --max-tokens 100 >kv &&
	dlk generate "$M" "The word " --temperature 0 --max-tokens 100 --no-kv-cache >full &&
	test "$(wc -c <kv)" -ge 100 && cmp kv full
'

test_expect_success 'sampled with a seed: the same text both ways' '
	dlk generate "$M" "A " --temperature 0.9 --top-p 0.95 --seed 5 --max-tokens 100 >kv &&
	dlk generate "$M" "A " --temperature 0.9 --top-p 0.95 --seed 5 --max-tokens 100 --no-kv-cache >full &&
	cmp kv full
'

test_expect_success 'dlk serve answers /v1/completions with the same greedy text, concurrent requests too' '
	"$DLK" serve --local --port 0 "$M" 2>serve.log &
	srv=$! &&
	i=0 &&
	until grep -q "^ready:" serve.log; do
		i=$((i + 1)); [ $i -lt 600 ] && kill -0 $srv || { cat serve.log; exit 1; }; sleep 0.05
	done &&
	url=http://127.0.0.1:$(sed -n "s/^listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p" serve.log) &&
	grep_q "is a language model: context 32, vocabulary 257, logits at every position; up to [0-9]* sequences each decoded with its key/value cache" serve.log &&
	dlk generate "$M" "The word " --temperature 0 --max-tokens 40 -o json | jq -r .text >want &&
	curl -sf -d "{\"model\":\"tinygpt\",\"prompt\":\"The word \",\"max_tokens\":40,\"temperature\":0}" \
		"$url/v1/completions" | jq -r ".choices[0].text" >got &&
	pids= &&
	for p in "A " "The " "In the " "of "; do
		dlk generate "$M" "$p" --temperature 0 --max-tokens 60 -o json | jq -r .text >"want-$p" || exit 1
		curl -sf -d "{\"model\":\"tinygpt\",\"prompt\":\"$p\",\"max_tokens\":60,\"temperature\":0}" \
			"$url/v1/completions" | jq -r ".choices[0].text" >"got-$p" &
		pids="$pids $!"
	done &&
	for j in $pids; do wait "$j" || exit 1; done &&
	kill -TERM $srv && wait $srv &&
	cmp want got &&
	for p in "A " "The " "In the " "of "; do cmp "want-$p" "got-$p" || exit 1; done
'

test_done
