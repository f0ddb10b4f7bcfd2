#!/bin/sh
# dlk serve answers a language model (the tiny next-byte model of tests/data/tiny-lm.sh, trained
# here) to the real openai Python client: the model list, completions (greedy text exact, stop, a
# list of prompts, a seed that repeats), streaming with usage, chat through --chat-template, errors
# as OpenAI's objects; concurrent streams exact; Triton's generate and generate_stream to curl; the
# generation series in /metrics; and a chat request to a model without a template is a 400.
. "$(dirname "$0")/../lib.sh"

PY=$TEST_ROOT/.deps/frameworks/bin/python
[ -x "$PY" ] || test_missing "the frameworks venv (.deps/frameworks)"
"$PY" -c "import openai" 2>/dev/null || test_missing "the openai wheel in the frameworks venv"
command -v curl >/dev/null || test_missing "curl"
command -v jq >/dev/null || test_missing "jq"

P=$TEST_TMP/lm
sh "$TEST_ROOT/tests/data/tiny-lm.sh" "$P"
(cd "$P" && dlk train --local -q -f dlk.yaml >train.out 2>&1) || { echo "Bail out! training failed"; cat "$P/train.out"; exit 1; }
# the template puts the user's words where the model continues them
printf '{"system": "{content}", "user": "{content}", "assistant": "{content}", "generation": ""}\n' >"$TEST_TMP/chat.json"

# serve [OPTIONS]: starts dlk serve on a free port; sets SRV and URL
serve() {
	serve_local "$TEST_TMP/serve.log" "$@" "$P/tiny-lm.dlk"
}

serve
test_expect_success 'without a chat template: chat is a 400 that says so; completions still work' '
	code=$(curl -s -o resp.json -w "%{http_code}" -d "{\"model\":\"tiny-lm\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}" \
		"$URL/v1/chat/completions") &&
	test "$code" = 400 && jq -e ".error.type == \"invalid_request_error\" and .error.param == \"messages\"" resp.json &&
	grep_q "has no chat template" resp.json &&
	curl -sf -d "{\"model\":\"tiny-lm\",\"prompt\":\"the cat\",\"max_tokens\":8,\"temperature\":0}" "$URL/v1/completions" |
		jq -e ".choices[0].text == \" sat on \""
'
test_expect_success 'Triton generate and generate_stream (curl): the same text, parameters inside or at the top level' '
	curl -sf -d "{\"text_input\":\"the cat\",\"parameters\":{\"max_tokens\":12,\"temperature\":0}}" \
		"$URL/v2/models/tiny-lm/generate" >g.json &&
	jq -e ".model_name == \"tiny-lm\" and .model_version == \"1\" and .text_output == \" sat on the \"" g.json &&
	curl -sfN -d "{\"text_input\":\"the cat\",\"max_tokens\":12,\"temperature\":0}" \
		"$URL/v2/models/tiny-lm/generate_stream" >s.txt &&
	grep_q "^data: {" s.txt &&
	test "$(sed -n "s/^data: //p" s.txt | jq -j .text_output)" = " sat on the " &&
	code=$(curl -s -o e.json -w "%{http_code}" -d "{\"text_input\":\"x\",\"parameters\":{\"top_p\":7}}" \
		"$URL/v2/models/tiny-lm/generate") && test "$code" = 400 && grep_q "top_p" e.json
'
kill -TERM $SRV
wait $SRV

serve --chat-template "$TEST_TMP/chat.json"
test_expect_success 'the openai client: models, completions, stop, prompt lists, seeds, streams, chat, errors' '
	"$PY" - "$URL" <<-\PYEOF
	import sys, openai
	c = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="unused")
	assert [m.id for m in c.models.list().data] == ["tiny-lm"]
	r = c.completions.create(model="tiny-lm", prompt="the cat", max_tokens=24, temperature=0)
	assert r.object == "text_completion" and r.id.startswith("cmpl-"), r
	assert r.choices[0].text == " sat on the mat. the cat", r.choices[0].text
	assert r.choices[0].finish_reason == "length"
	assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (7, 24, 31), r.usage
	r = c.completions.create(model="tiny-lm", prompt=["the cat", "on the"], max_tokens=30, temperature=0, stop=["mat"])
	assert [x.text for x in r.choices] == [" sat on the ", " "], r.choices
	assert [x.finish_reason for x in r.choices] == ["stop", "stop"] and [x.index for x in r.choices] == [0, 1]
	a = c.completions.create(model="tiny-lm", prompt="the", max_tokens=40, temperature=1.5, seed=11).choices[0].text
	b = c.completions.create(model="tiny-lm", prompt="the", max_tokens=40, temperature=1.5, seed=11).choices[0].text
	d = c.completions.create(model="tiny-lm", prompt="the", max_tokens=40, temperature=1.5, seed=12).choices[0].text
	assert a == b and a != d, (a, b, d)
	chunks = list(c.completions.create(model="tiny-lm", prompt="the cat", max_tokens=24, temperature=0, stream=True,
	                                   stream_options={"include_usage": True}))
	text = "".join(ch.choices[0].text for ch in chunks if ch.choices)
	assert text == " sat on the mat. the cat", text
	assert [ch.choices[0].finish_reason for ch in chunks if ch.choices][-1] == "length"
	assert chunks[-1].usage.completion_tokens == 24 and not chunks[-1].choices
	r = c.chat.completions.create(model="tiny-lm", messages=[{"role": "user", "content": "the cat"}], max_tokens=16,
	                              temperature=0)
	assert r.object == "chat.completion" and r.choices[0].message.role == "assistant"
	assert r.choices[0].message.content == " sat on the mat.", r.choices[0].message.content
	s = list(c.chat.completions.create(model="tiny-lm", messages=[{"role": "user", "content": "the cat"}],
	                                   max_tokens=16, temperature=0, stream=True))
	assert s[0].choices[0].delta.role == "assistant"
	assert "".join(ch.choices[0].delta.content or "" for ch in s) == " sat on the mat."
	assert s[-1].choices[0].finish_reason == "length"
	try:
	    c.completions.create(model="nope", prompt="x")
	    raise SystemExit("an unknown model was answered")
	except openai.NotFoundError as e:
	    assert "tiny-lm" in str(e), e
	try:
	    c.completions.create(model="tiny-lm", prompt="x", n=2)
	    raise SystemExit("n=2 was answered")
	except openai.BadRequestError as e:
	    assert e.body["param"] == "n", e.body
	print("openai client: ok")
	PYEOF
'
test_expect_success 'eight concurrent streams, batched together, each get their exact text' '
	"$PY" - "$URL" <<-\PYEOF
	import sys, openai, concurrent.futures as cf
	c = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="unused")
	prompts = ["the cat", "on the", "sat on", "the mat", "cat sat", "at. the", "mat. th", "e cat s"]
	def one(p):
	    return "".join(ch.choices[0].text for ch in c.completions.create(model="tiny-lm", prompt=p, max_tokens=48,
	                                                                        temperature=0, stream=True))
	with cf.ThreadPoolExecutor(8) as ex:
	    got = list(ex.map(one, prompts))
	for p, g in zip(prompts, got):
	    ref = c.completions.create(model="tiny-lm", prompt=p, max_tokens=48, temperature=0).choices[0].text
	    assert g == ref and len(g) == 48, (p, g, ref)
	PYEOF
'
test_expect_success '/metrics: tokens, prompt tokens, queue time, time to first token and tokens/s per model' '
	curl -sf "$URL/metrics" >m.txt &&
	grep_q "^dlk_generation_tokens_total{model=\"tiny-lm\"} [1-9]" m.txt &&
	grep_q "^dlk_generation_prompt_tokens_total{model=\"tiny-lm\"} [1-9]" m.txt &&
	grep_q "^dlk_generation_sequences_running{model=\"tiny-lm\"} 0" m.txt &&
	grep_q "^dlk_generation_queue_duration_seconds_count{model=\"tiny-lm\"} [1-9]" m.txt &&
	grep_q "^dlk_generation_time_to_first_token_seconds_bucket{model=\"tiny-lm\",le=\"+Inf\"} [1-9]" m.txt &&
	grep_q "^dlk_generation_tokens_per_second_count{model=\"tiny-lm\"} [1-9]" m.txt &&
	grep_q "^# TYPE dlk_generation_time_to_first_token_seconds histogram" m.txt
'
kill -TERM $SRV
wait $SRV
test_done
