/* libFuzzer target: the text generation request parsers of dlk serve (lib/serve/openai.h) and the
 * chat template reader (lib/gen/lm.h). The first byte picks the parser: 0 OpenAI completions,
 * 1 OpenAI chat completions, 2 Triton generate, 3 a chat template. A request that parses is
 * answered (the whole response and a stream's chunks, its prompts as the text) and a chat request
 * goes through a template, so the writers run on what the parser accepts. Corpus: tests/fuzz/openai/. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/gen/lm.h"
#include "lib/serve/openai.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jd_limits lim = { 16, 1 << 20 };
	char msg[1024];
	const char *param;
	struct dlk_buf out = DLK_BUF_INIT;
	struct dlk_err err = DLK_ERR_INIT;

	if (size < 1)
		return 0;
	int mode = data[0] & 3;
	data++, size--;
	if (mode == 3) {
		struct dlk_chat_template t;
		if (!dlk_chat_template_parse((const char *)data, size, "fuzz", &t, &err)) {
			dlk_chat_template_add(&t, DLK_CHAT_USER, "hi", 2, &out);
			dlk_chat_template_release(&t);
		}
		dlk_buf_release(&out);
		return 0;
	}
	enum dlk_oai_kind kind = mode == 0 ? DLK_OAI_COMPLETIONS : mode == 1 ? DLK_OAI_CHAT : DLK_OAI_TRITON;
	struct dlk_oai_request req;
	if (dlk_oai_parse(kind, (const char *)data, size, &lim, &req, msg, sizeof(msg), &param)) {
		dlk_oai_write_error(400, msg, param, &out);
		dlk_buf_release(&out);
		return 0;
	}
	struct dlk_chat_template t = { { "<s>{content}</s>", "<u>{content}</u>", "<a>{content}</a>" }, "<a>" };
	struct dlk_buf chat = DLK_BUF_INIT;
	int n = kind == DLK_OAI_CHAT ? 1 : req.n_prompts;
	struct dlk_oai_choice *ch = calloc((size_t)n, sizeof(*ch));
	if (kind == DLK_OAI_CHAT) {
		dlk_oai_chat_prompt(&req, &t, &chat);
		ch[0] = (struct dlk_oai_choice){ chat.data ? chat.data : "", chat.len, DLK_FINISH_STOP };
	} else {
		for (int i = 0; i < n; i++)
			ch[i] = (struct dlk_oai_choice){ req.prompts[i], req.prompt_len[i], DLK_FINISH_LENGTH };
	}
	struct dlk_oai_usage u = { n, req.params.max_tokens };
	char id[48];
	dlk_oai_new_id(kind, id, sizeof(id));
	if (kind == DLK_OAI_TRITON) {
		dlk_triton_write_generate(req.model ? req.model : "m", ch[0].text, ch[0].len, ch[0].finish, &out);
	} else {
		dlk_oai_write_response(kind, id, 1, req.model, ch, n, &u, &out);
		for (int i = 0; i < n; i++)
			dlk_oai_write_chunk(kind, id, 1, req.model, i, 1, ch[i].text, ch[i].len, DLK_FINISH_NONE, NULL, &out);
		dlk_oai_write_chunk(kind, id, 1, req.model, 0, 0, NULL, 0, DLK_FINISH_NONE, &u, &out);
	}
	free(ch);
	dlk_buf_release(&chat);
	dlk_buf_release(&out);
	dlk_oai_request_release(&req);
	return 0;
}
