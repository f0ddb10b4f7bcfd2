/* The OpenAI and Triton generate codecs: what each field becomes, what is refused (with the field
 * named), and responses and stream chunks byte for byte as OpenAI writes them. */
#include "tests/unit/check.h"

#include <string.h>

#include "lib/serve/openai.h"

static struct jd_limits lim = { 16, 1 << 20 };

static int parse(enum dlk_oai_kind k, const char *body, struct dlk_oai_request *r, char *msg, const char **param)
{
	return dlk_oai_parse(k, body, strlen(body), &lim, r, msg, 512, param);
}

static void refused(enum dlk_oai_kind k, const char *body, const char *want_param, const char *want_msg)
{
	struct dlk_oai_request r;
	char msg[512] = "";
	const char *param = NULL;
	int rc = parse(k, body, &r, msg, &param);
	CHECK_MSG(rc == -1, "refused: %s", body);
	if (want_param)
		CHECK_STR(param, want_param);
	CHECK_CONTAINS(msg, want_msg);
}

int main(void)
{
	struct dlk_oai_request r;
	char msg[512];
	const char *param;

	/* completions: defaults and every field */
	CHECK(!parse(DLK_OAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"hi\"}", &r, msg, &param));
	CHECK_STR(r.model, "m");
	CHECK(r.n_prompts == 1 && r.prompt_len[0] == 2 && !strcmp(r.prompts[0], "hi"));
	CHECK(r.params.max_tokens == 16 && r.params.sampling.temperature == 1 && r.params.sampling.top_p == 1);
	CHECK(!r.stream && !r.params.n_stop);
	dlk_oai_request_release(&r);
	CHECK(!parse(DLK_OAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":[\"a\",\"b\"],\"max_tokens\":5,\"temperature\":0,"
	             "\"top_p\":0.5,\"top_k\":-1,\"seed\":-1,\"stop\":[\"x\",\"\",\"yz\"],\"stream\":true,"
	             "\"stream_options\":{\"include_usage\":true},\"n\":1,\"echo\":false,\"logprobs\":null,\"user\":\"u\","
	             "\"presence_penalty\":0}", &r, msg, &param));
	CHECK(r.n_prompts == 2 && r.params.max_tokens == 5 && r.params.sampling.temperature == 0);
	CHECK(r.params.sampling.top_p == 0.5 && r.params.sampling.top_k == 0);
	CHECK_MSG(r.params.sampling.seed == UINT64_MAX, "seed -1 is its 64 bits");
	CHECK_MSG(r.params.n_stop == 2 && r.params.stop_len[1] == 2, "empty stop strings are dropped");
	CHECK(r.stream && r.include_usage);
	dlk_oai_request_release(&r);

	refused(DLK_OAI_COMPLETIONS, "{\"prompt\":\"x\"}", "model", "'model' must be given");
	refused(DLK_OAI_COMPLETIONS, "{\"model\":\"m\"}", "prompt", "'prompt' must be a string");
	refused(DLK_OAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":[1,2]}", "prompt", "token ids are not supported");
	refused(DLK_OAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"n\":2}", "n", "'n' must be 1");
	refused(DLK_OAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"echo\":true}", "echo", "not supported");
	refused(DLK_OAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"temperature\":2.5}", "temperature", "from 0 to 2");
	refused(DLK_OAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"top_p\":0}", "top_p", "above 0");
	refused(DLK_OAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":0}", "max_tokens", "from 1");
	refused(DLK_OAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":1.5}", "max_tokens", "integer");
	refused(DLK_OAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", "stop", "at most 4");
	refused(DLK_OAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"frequency_penalty\":0.5}", "frequency_penalty", "only 0");
	refused(DLK_OAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"logit_bias\":{\"1\":5}}", "logit_bias", "not supported");
	refused(DLK_OAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"stream\":1}", "stream", "true or false");
	refused(DLK_OAI_COMPLETIONS, "[1]", NULL, "JSON object");
	refused(DLK_OAI_COMPLETIONS, "{\"model\":", NULL, "JSON");

	/* chat */
	CHECK(!parse(DLK_OAI_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"developer\",\"content\":\"be brief\"},"
	             "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]}],"
	             "\"max_completion_tokens\":7}", &r, msg, &param));
	CHECK(r.n_messages == 2 && r.messages[0].role == DLK_CHAT_SYSTEM && r.messages[1].role == DLK_CHAT_USER);
	CHECK_STR(r.messages[1].content, "ab");
	CHECK(r.params.max_tokens == 7);
	{
		struct dlk_chat_template t;
		struct dlk_err err = DLK_ERR_INIT;
		struct dlk_buf p = DLK_BUF_INIT;
		const char *tj = "{\"system\":\"S:{content}|\",\"user\":\"U:{content}|\",\"assistant\":\"A:{content}|\",\"generation\":\"A:\"}";
		CHECK(!dlk_chat_template_parse(tj, strlen(tj), "t.json", &t, &err));
		dlk_oai_chat_prompt(&r, &t, &p);
		dlk_buf_addc(&p, '\0');
		CHECK_STR(p.data, "S:be brief|U:ab|A:");
		dlk_buf_release(&p);
		dlk_chat_template_release(&t);
		const char *bad = "{\"system\":\"S\",\"user\":\"U:{content}\",\"assistant\":\"A:{content}\",\"generation\":\"\"}";
		CHECK(dlk_chat_template_parse(bad, strlen(bad), "t.json", &t, &err) == -1);
		CHECK_CONTAINS(err.msg, "\"system\" must hold {content} once");
	}
	dlk_oai_request_release(&r);
	CHECK(!parse(DLK_OAI_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", &r, msg, &param));
	CHECK_MSG(r.params.max_tokens == DLK_OAI_DEFAULT_CHAT_MAX_TOKENS, "chat's default max_tokens");
	dlk_oai_request_release(&r);
	refused(DLK_OAI_CHAT, "{\"model\":\"m\",\"messages\":[]}", "messages", "non-empty list");
	refused(DLK_OAI_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}", "messages", "messages[0].role");
	refused(DLK_OAI_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}",
	        "messages", "only parts of type");
	refused(DLK_OAI_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{}]}", "tools",
	        "not supported");

	/* Triton: parameters or the top level */
	CHECK(!parse(DLK_OAI_TRITON, "{\"text_input\":\"t\",\"parameters\":{\"max_tokens\":3,\"temperature\":0,\"stream\":true}}",
	             &r, msg, &param));
	CHECK(!r.model && r.n_prompts == 1 && r.params.max_tokens == 3 && r.params.sampling.temperature == 0 && r.stream);
	dlk_oai_request_release(&r);
	CHECK(!parse(DLK_OAI_TRITON, "{\"text_input\":\"t\",\"max_tokens\":2,\"bad_words\":\"\",\"stop_words\":[\"q\"]}", &r, msg,
	             &param));
	CHECK(r.params.max_tokens == 2 && r.params.n_stop == 1);
	dlk_oai_request_release(&r);
	refused(DLK_OAI_TRITON, "{\"text_input\":[\"a\"]}", "text_input", "must be a string");
	refused(DLK_OAI_TRITON, "{\"text_input\":\"a\",\"parameters\":3}", "parameters", "must be an object");

	/* responses, as OpenAI writes them */
	struct dlk_buf b = DLK_BUF_INIT;
	struct dlk_oai_choice ch[1] = { { "hi \"x\"", 6, DLK_FINISH_STOP } };
	struct dlk_oai_usage u = { 3, 2 };
	dlk_oai_write_response(DLK_OAI_COMPLETIONS, "cmpl-1", 100, "m", ch, 1, &u, &b);
	dlk_buf_addc(&b, '\0');
	CHECK_STR(b.data, "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":100,\"model\":\"m\",\"system_fingerprint\":null,"
	                  "\"choices\":[{\"index\":0,\"text\":\"hi \\\"x\\\"\",\"logprobs\":null,\"finish_reason\":\"stop\"}],"
	                  "\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}");
	dlk_buf_reset(&b);
	dlk_oai_write_response(DLK_OAI_CHAT, "chatcmpl-1", 100, "m", ch, 1, &u, &b);
	dlk_buf_addc(&b, '\0');
	CHECK_CONTAINS(b.data, "\"object\":\"chat.completion\"");
	CHECK_CONTAINS(b.data, "\"message\":{\"role\":\"assistant\",\"content\":\"hi \\\"x\\\"\"}");
	dlk_buf_reset(&b);
	dlk_oai_write_chunk(DLK_OAI_CHAT, "c", 1, "m", 0, 1, "", 0, DLK_FINISH_NONE, NULL, &b);
	dlk_buf_addc(&b, '\0');
	CHECK_STR(b.data, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"system_fingerprint\":null,"
	                  "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,"
	                  "\"finish_reason\":null}]}\n\n");
	dlk_buf_reset(&b);
	dlk_oai_write_chunk(DLK_OAI_CHAT, "c", 1, "m", 0, 0, "", 0, DLK_FINISH_LENGTH, NULL, &b);
	dlk_buf_addc(&b, '\0');
	CHECK_CONTAINS(b.data, "\"delta\":{},\"logprobs\":null,\"finish_reason\":\"length\"}]}\n\n");
	dlk_buf_reset(&b);
	dlk_oai_write_chunk(DLK_OAI_COMPLETIONS, "c", 1, "m", 0, 0, NULL, 0, DLK_FINISH_NONE, &u, &b);
	dlk_buf_addc(&b, '\0');
	CHECK_CONTAINS(b.data, "\"choices\":[],\"usage\":{\"prompt_tokens\":3,");
	dlk_buf_reset(&b);
	dlk_oai_write_error(404, "no such model", "model", &b);
	dlk_buf_addc(&b, '\0');
	CHECK_STR(b.data, "{\"error\":{\"message\":\"no such model\",\"type\":\"not_found_error\",\"param\":\"model\",\"code\":\"model_not_found\"}}");
	dlk_buf_reset(&b);
	dlk_triton_write_generate("m", "abc", 3, DLK_FINISH_NONE, &b);
	dlk_buf_addc(&b, '\0');
	CHECK_STR(b.data, "{\"model_name\":\"m\",\"model_version\":\"1\",\"text_output\":\"abc\"}");
	dlk_buf_release(&b);
	char id1[48], id2[48];
	dlk_oai_new_id(DLK_OAI_CHAT, id1, sizeof(id1));
	dlk_oai_new_id(DLK_OAI_CHAT, id2, sizeof(id2));
	CHECK(!strncmp(id1, "chatcmpl-", 9) && strlen(id1) == 9 + 24 && strcmp(id1, id2));
	return CHECK_DONE();
}
