#!/bin/sh
# tiny-lm.sh DIR: writes DIR/dlk.yaml and its data, a next-byte language model small enough to train
# in seconds: "the cat sat on the mat. " repeated, every window of 1 to 16 bytes ending at each
# position (the text, byte tokens padded after it) labelled with the id of the byte that follows
# (byte b is id 1 + b, data.classes names the 257 ids). Its output is the vocabulary: the next
# token after the window, what lib/gen reads as a language model. `dlk train --local` in DIR makes
# DIR/tiny-lm.dlk, which continues "the cat" greedily as " sat on the mat. the cat ...".
set -eu
D=$1
mkdir -p "$D"
awk 'BEGIN {
	s = ""; for (i = 0; i < 40; i++) s = s "the cat sat on the mat. "
	n = length(s)
	for (e = 1; e < n; e++)
		for (w = 1; w <= 16 && w <= e; w++) {
			c = substr(s, e + 1, 1)
			id = c == " " ? 33 : c == "." ? 47 : 97 + index("abcdefghijklmnopqrstuvwxyz", c)
			printf("{\"text\":\"%s\",\"label\":%d}\n", substr(s, e - w + 1, w), id)
		}
}' >"$D/train.jsonl"
head -n 200 "$D/train.jsonl" >"$D/test.jsonl"
{
	printf 'name: tiny-lm\ndata:\n  format: text\n  train: {source: train.jsonl}\n  test: {source: test.jsonl}\n'
	printf '  text: {tokenizer: byte}\n  classes: ['
	i=0
	while [ $i -lt 257 ]; do
		printf '"%d"' $i
		[ $i -lt 256 ] && printf ', '
		i=$((i + 1))
	done
	printf ']\nmodel:\n  input: [16]\n  layers:\n    - embedding: {vocab: 257, dim: 16}\n    - flatten\n'
	printf '    - dense: {units: 128}\n    - relu\n    - dense: {units: 257}\n'
	printf 'training: {epochs: 8, batch_size: 64, threads: 2, seed: 1}\n'
} >"$D/dlk.yaml"
