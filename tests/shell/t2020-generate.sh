#!/bin/sh
# dlk generate on a tiny next-byte model trained here (tests/data/tiny-lm.sh): greedy continues the
# training text exactly, a seed repeats its text and another seed changes it, --stop cuts before
# the stop string, -o json counts tokens, and bad input is refused with a message.
. "$(dirname "$0")/../lib.sh"

P=$TEST_TMP/lm
sh "$TEST_ROOT/tests/data/tiny-lm.sh" "$P"
(cd "$P" && dlk train --local -q -f dlk.yaml >train.out 2>&1) || { cat "$P/train.out"; exit 1; }
M=$P/tiny-lm.dlk

test_expect_success 'greedy decoding continues the text it was trained on, byte for byte' '
	dlk generate "$M" "the cat" --temperature 0 --max-tokens 40 >out &&
	printf " sat on the mat. the cat sat on the mat." >want &&
	cmp out want
'

test_expect_success 'the same seed gives the same text, another seed another text' '
	dlk generate "$M" "the" --temperature 1.5 --seed 7 --max-tokens 64 >a &&
	dlk generate "$M" "the" --temperature 1.5 --seed 7 --max-tokens 64 >b &&
	dlk generate "$M" "the" --temperature 1.5 --seed 8 --max-tokens 64 >c &&
	cmp a b && ! cmp -s a c && test "$(wc -c <a)" -eq 64
'

test_expect_success 'top-k 1 is greedy whatever the temperature' '
	dlk generate "$M" "the cat" --temperature 5 --top-k 1 --seed 3 --max-tokens 40 >out &&
	printf " sat on the mat. the cat sat on the mat." >want &&
	cmp out want
'

test_expect_success '--stop ends before the stop string; -o json says why and counts tokens' '
	dlk generate "$M" "the cat" --temperature 0 --stop "mat" --stop "zzz" -o json >out.json &&
	grep_q "\"text\": \" sat on the \"" out.json &&
	grep_q "\"finish_reason\": \"stop\"" out.json &&
	grep_q "\"prompt_tokens\": 7" out.json &&
	grep_q "\"completion_tokens\": 15" out.json &&
	dlk generate "$M" "the cat" --temperature 0 --max-tokens 5 -o json >len.json &&
	grep_q "\"finish_reason\": \"length\"" len.json && grep_q "\"completion_tokens\": 5" len.json
'

test_expect_success 'bad input: an empty prompt, an option out of range, a bundle that is no language model' '
	{ dlk generate "$M" "" 2>err; test $? = 2; } && grep_q "prompt is empty" err &&
	{ dlk generate "$M" x --top-p 1.5 2>err; test $? = 2; } && grep_q "top-p" err &&
	{ dlk generate "$M" x --temperature -1 2>err; test $? = 2; } && grep_q "temperature" err &&
	{ dlk generate "$TEST_ROOT/tests/fuzz/bundle/layers-tokens.dlk" x 2>err; test $? = 3; } &&
	grep_q "not a language model" err
'

test_done
