/* Text generation requests and responses: OpenAI's completions and chat completions
 * (platform.openai.com/docs/api-reference/completions, /chat), the model list, and Triton's
 * generate extension (triton docs/protocol/extension_generate.md).
 *
 * OpenAI, POST /v1/completions and /v1/chat/completions:
 *   model (string, required), prompt (string or a list of strings: one choice each) or messages
 *   ([{role: system|developer|user|assistant, content: string or [{type: "text", text}]}]),
 *   max_tokens (max_completion_tokens for chat), temperature [0, 2], top_p (0, 1], top_k (vLLM's
 *   extension; -1 or 0 = all), n (1 only), stop (a string or up to 4), seed, stream,
 *   stream_options.include_usage. Fields whose non-default values dlk cannot honour (echo, best_of,
 *   logprobs, presence/frequency_penalty, logit_bias, suffix, tools, n > 1) are refused with a 400
 *   naming them; other fields are ignored, as vLLM does.
 * Triton, POST /v2/models/M/generate and generate_stream: {text_input, parameters?: {...}} with
 *   max_tokens, temperature, top_p, top_k, seed, stop (or stop_words), stream, either in
 *   parameters or at the top level (as TensorRT-LLM's ensemble takes them). */
#ifndef DLK_SERVE_OPENAI_H
#define DLK_SERVE_OPENAI_H

#include <stddef.h>

#include "lib/gen/lm.h"
#include "lib/serve/jsondoc.h"
#include "lib/util/buf.h"

enum dlk_oai_kind { DLK_OAI_COMPLETIONS, DLK_OAI_CHAT, DLK_OAI_TRITON };

#define DLK_OAI_MAX_PROMPTS 64
#define DLK_OAI_MAX_MESSAGES 1024
#define DLK_OAI_MAX_TOKENS (1 << 16)
#define DLK_OAI_DEFAULT_MAX_TOKENS 16        /* OpenAI's completions default */
#define DLK_OAI_DEFAULT_CHAT_MAX_TOKENS 256

struct dlk_oai_message {
	enum dlk_chat_role role;
	char *content;
	size_t len;
};

struct dlk_oai_request {
	enum dlk_oai_kind kind;
	char *model;                       /* NULL for Triton (the URL names it) */
	int n_prompts;                     /* completions and Triton: the prompts, one choice each */
	char **prompts;
	size_t *prompt_len;
	int n_messages;                    /* chat */
	struct dlk_oai_message *messages;
	struct dlk_gen_params params;      /* stop strings owned */
	int stream, include_usage;
};

/* Parses a body of `kind`. Returns 0, or -1 with a message for the client (a 400) and *param the
 * field at fault (a literal, or NULL). */
int dlk_oai_parse(enum dlk_oai_kind kind, const char *body, size_t len, const struct jd_limits *lim,
                  struct dlk_oai_request *req, char *msg, size_t msg_len, const char **param);
void dlk_oai_request_release(struct dlk_oai_request *req);

/* The prompt of a chat request through a template (lm.h). */
void dlk_oai_chat_prompt(const struct dlk_oai_request *req, const struct dlk_chat_template *t, struct dlk_buf *out);

/* One finished choice, for the writers. */
struct dlk_oai_choice {
	const char *text;
	size_t len;
	enum dlk_finish finish;
};

struct dlk_oai_usage {
	long long prompt_tokens, completion_tokens;
};

/* "cmpl-" or "chatcmpl-" and 24 hex digits, unique in practice; id_len at least 40. */
void dlk_oai_new_id(enum dlk_oai_kind kind, char *id, size_t id_len);

/* The whole (non-streamed) response. */
void dlk_oai_write_response(enum dlk_oai_kind kind, const char *id, long long created, const char *model,
                            const struct dlk_oai_choice *choices, int n, const struct dlk_oai_usage *usage,
                            struct dlk_buf *out);
/* One server-sent event of a stream: "data: {...}\n\n". text != NULL: a piece of choice `index`
 * (chat: role says whether the delta carries the role, as its first chunk does); finish: the
 * choice's last chunk; usage: the chunk with the usage and no choices. */
void dlk_oai_write_chunk(enum dlk_oai_kind kind, const char *id, long long created, const char *model, int index,
                         int role, const char *text, size_t len, enum dlk_finish finish,
                         const struct dlk_oai_usage *usage, struct dlk_buf *out);
/* "data: [DONE]\n\n" */
void dlk_oai_write_done(struct dlk_buf *out);
/* OpenAI's error object: {"error": {"message", "type", "param", "code"}}; type from the status
 * (invalid_request_error, not_found_error, server_error, ...). */
void dlk_oai_write_error(int status, const char *msg, const char *param, struct dlk_buf *out);
/* GET /v1/models: {"object": "list", "data": [{"id", "object": "model", "created", "owned_by"}]}. */
void dlk_oai_write_models(const char *const *names, int n, long long created, struct dlk_buf *out);

/* Triton: {"model_name", "model_version", "text_output"} (and the finish reason, an extra field);
 * streamed as "data: {...}\n\n" events, the last one with finish_reason. */
void dlk_triton_write_generate(const char *model, const char *text, size_t len, enum dlk_finish finish,
                               struct dlk_buf *out);
void dlk_triton_write_error_event(const char *msg, struct dlk_buf *out);

#endif
