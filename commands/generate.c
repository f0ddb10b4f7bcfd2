/* dlk generate: text from a language-model bundle, token by token on this machine (lib/gen). */
#include "commands/cluster.h"
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/ui.h"
#include "lib/gen/lm.h"
#include "lib/nn/backend.h"
#include "lib/nn/decode.h"
#include "lib/nn/net.h"
#include "lib/train/bundle.h"
#include "lib/util/clock.h"
#include "lib/util/jsonprint.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ge_max_tokens = 64, ge_top_k, ge_threads, ge_kv_cache = 1;
static const char *ge_temperature, *ge_top_p, *ge_seed;
static struct dlk_strlist ge_stop;

/* a number option in [lo, hi] */
static int number_opt(const char *name, const char *s, double lo, double hi, double *out, struct dlk_err *err)
{
	char *end;
	if (!s)
		return 0;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= lo && v <= hi))
		return dlk_errf(err, DLK_EXIT_USAGE, "%s '%s' is not a number from %g to %g", name, dlk_visible(s), lo, hi);
	*out = v;
	return 0;
}

static int run_generate(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_bundle b = DLK_BUNDLE_INIT;
	struct dlk_lm lm;
	struct dlk_net net = DLK_NET_INIT;
	struct dlk_gen_seq seq;
	struct dlk_gen_params p = { 0 };
	struct dlk_buf piece = DLK_BUF_INIT, all = DLK_BUF_INIT;
	const struct dlk_backend *be = dlk_backend_cpu();
	const char *path = args->pos[0], *prompt = args->pos[1];
	int have_lm = 0, have_seq = 0, rc = 0, stream = ctx->output == DLK_OUTPUT_TEXT;
	float *row = NULL, *out = NULL, *dev_ids = NULL;
	double t0, t_first = 0, seed = 0;
	struct dlk_decode dec = DLK_DECODE_INIT;
	int kv = 0;

	dlk_interrupt_catch();
	p.max_tokens = ge_max_tokens;
	p.sampling = (struct dlk_sampling)DLK_SAMPLING_INIT;
	p.sampling.top_k = ge_top_k;
	if (number_opt("--temperature", ge_temperature, 0, 100, &p.sampling.temperature, &err) ||
	    number_opt("--top-p", ge_top_p, 1e-9, 1, &p.sampling.top_p, &err) ||
	    number_opt("--seed", ge_seed, 0, 9007199254740992.0, &seed, &err))
		goto fail;
	if (seed != floor(seed)) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--seed '%s' is not a whole number", dlk_visible(ge_seed));
		goto fail;
	}
	p.sampling.seed = (uint64_t)seed;
	if (ge_stop.n > DLK_GEN_MAX_STOP) {
		dlk_errf(&err, DLK_EXIT_USAGE, "%zu --stop strings: at most %d", ge_stop.n, DLK_GEN_MAX_STOP);
		goto fail;
	}
	for (size_t i = 0; i < ge_stop.n; i++) {
		if (!*ge_stop.v[i]) {
			dlk_errf(&err, DLK_EXIT_USAGE, "--stop '': a stop string has at least one byte");
			goto fail;
		}
		p.stop[p.n_stop] = (char *)ge_stop.v[i];
		p.stop_len[p.n_stop++] = strlen(ge_stop.v[i]);
	}
	if (dlk_bundle_read(path, &b, &err) || dlk_lm_init(&lm, &b, path, &err))
		goto fail;
	have_lm = 1;
	be->set_threads(ge_threads);
	if (dlk_bundle_net(&b, be, &net, &err) || dlk_net_reserve(&net, 1, &err)) {
		dlk_err_prefix(&err, "'%s'", path);
		goto fail;
	}
	if (dlk_gen_seq_init(&seq, &lm, prompt, strlen(prompt), &p, &err))
		goto fail;
	have_seq = 1;
	row = xmalloc((size_t)lm.context * sizeof(float));
	out = xmalloc(lm.out_size * sizeof(float));
	/* a causal model over positions decodes with a key/value cache (lib/nn/decode.h); any other
	 * runs a full forward over the window per token */
	if (ge_kv_cache && lm.per_position) {
		struct dlk_err kerr = DLK_ERR_INIT;
		kv = !dlk_decode_begin(&dec, &net, 1, lm.context, &kerr);
		if (kv)
			dev_ids = be->alloc((size_t)lm.context * sizeof(float));
		else
			dlk_info(ctx, "no key/value cache for this model (%s): a full forward per token", kerr.msg);
		if (kv && !dev_ids) {
			dlk_errf(&err, DLK_EXIT_FAIL, "out of %s memory", be->name);
			goto fail;
		}
	}
	t0 = dlk_now();
	while (!seq.finish) {
		if (dlk_interrupted()) {
			dlk_errf(&err, DLK_EXIT_INTERRUPTED, "interrupted after %d tokens", seq.generated);
			goto fail;
		}
		int pos = dlk_gen_seq_input(&seq, &lm, row);
		if (kv) {
			/* the new token after the cached ones; a full cache starts again from the window */
			int n = 1;
			const float *ids = row + pos;
			if (!dec.len || dec.len >= lm.context) {
				dlk_decode_reset(&dec);
				n = pos + 1;
				ids = row;
			}
			be->to_device(dev_ids, ids, (size_t)n * sizeof(float));
			const float *y = dlk_decode_step(&dec, dev_ids, n, &err);
			if (!y)
				goto fail;
			be->to_host(out, y + (size_t)(n - 1) * (size_t)lm.vocab, (size_t)lm.vocab * sizeof(float));
			pos = 0;
		} else {
			const float *y = dlk_net_forward(&net, row, 1, 0);
			be->to_host(out, y, lm.out_size * sizeof(float));
		}
		char msg[256];
		if (be->check(msg, sizeof(msg))) {
			dlk_errf(&err, DLK_EXIT_FAIL, "%s backend: %s", be->name, msg);
			goto fail;
		}
		dlk_gen_seq_push(&seq, &lm, out, pos);
		if (!t_first)
			t_first = dlk_now();
		dlk_buf_reset(&piece);
		if (dlk_gen_seq_take(&seq, &piece)) {
			dlk_buf_add(&all, piece.data, piece.len);
			if (stream) {
				/* the model's text as it is: on a terminal control characters are made
				 * visible, in a pipe the bytes are exact */
				if (ctx->tty_out)
					dlk_put_text(stdout, piece.data, piece.len);
				else
					fwrite(piece.data, 1, piece.len, stdout);
				fflush(stdout);
			}
		}
	}
	double t = dlk_now() - t0;
	if (stream) {
		if (ctx->tty_out)
			fputc('\n', stdout);
		dlk_info(ctx, "%d tokens (%s) in %.2f s: %.1f tokens/s, first token after %.0f ms", seq.generated,
		         dlk_finish_name(seq.finish), t, t > 0 ? seq.generated / t : 0.0, (t_first - t0) * 1000);
	} else {
		cJSON *o = cJSON_CreateObject(), *u;
		char *s;
		cJSON_AddStringToObject(o, "model", path);
		dlk_buf_addc(&all, '\0');
		cJSON_AddStringToObject(o, "text", all.data);
		cJSON_AddStringToObject(o, "finish_reason", dlk_finish_name(seq.finish));
		u = cJSON_AddObjectToObject(o, "usage");
		cJSON_AddNumberToObject(u, "prompt_tokens", (double)seq.prompt_tokens);
		cJSON_AddNumberToObject(u, "completion_tokens", seq.generated);
		cJSON_AddNumberToObject(u, "total_tokens", (double)seq.prompt_tokens + seq.generated);
		cJSON_AddNumberToObject(o, "seconds", t);
		cJSON_AddNumberToObject(o, "time_to_first_token_seconds", t_first - t0);
		cJSON_AddBoolToObject(o, "kv_cache", kv);
		s = dlk_json_print(o);
		cJSON_Delete(o);
		puts(s);
		free(s);
	}
	goto out;
fail:
	if (stream && all.len && !ctx->tty_out)
		fflush(stdout);
	rc = dlk_report(ctx, &err);
out:
	free(row);
	free(out);
	if (dev_ids)
		be->free(dev_ids);
	if (kv)
		dlk_decode_release(&dec);
	dlk_buf_release(&piece);
	dlk_buf_release(&all);
	if (have_seq)
		dlk_gen_seq_release(&seq);
	dlk_net_release(&net);
	if (have_lm)
		dlk_lm_release(&lm);
	dlk_bundle_release(&b);
	return rc;
}

static const struct dlk_option generate_options[] = {
	OPT_INT(0, "max-tokens", &ge_max_tokens, "N", 64, "the most tokens to generate", .min = 1, .max = 1 << 20),
	OPT_STRING(0, "temperature", &ge_temperature, "T", NULL, "divide the logits by T before sampling; 0 is greedy",
	           .def_doc = "1"),
	OPT_INT(0, "top-k", &ge_top_k, "K", 0, "sample from the K most likely tokens (ties included); 0: all", .min = 0,
	        .max = 1 << 30),
	OPT_STRING(0, "top-p", &ge_top_p, "P", NULL, "sample from the smallest set of tokens whose probability reaches P",
	           .def_doc = "1"),
	OPT_STRING(0, "seed", &ge_seed, "S", NULL, "the sampler's seed: the same seed gives the same text", .def_doc = "0"),
	OPT_LIST(0, "stop", &ge_stop, "TEXT", "stop before TEXT (repeatable, up to 4)"),
	OPT_BOOL(0, "kv-cache", &ge_kv_cache, "decode with a key/value cache when the model allows (--no-kv-cache: a full "
	         "forward over the window per token)", .def = 1),
	OPT_INT(0, "threads", &ge_threads, "N", 0, "threads of the forward pass", .min = 0, .max = 1024,
	        .def_doc = "the online cores"),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_generate = {
	.usage = "BUNDLE PROMPT",
	.description = "Generate text from the language model in BUNDLE, starting from PROMPT: the prompt in one\n"
	               "pass, then each new token over a key/value cache (--no-kv-cache: a forward pass over the\n"
	               "last context tokens per token), the next token drawn as --temperature, --top-k and\n"
	               "--top-p say (Hugging Face transformers' semantics; --temperature 0 is greedy), with a seeded\n"
	               "generator, so the same --seed gives the same text. Stops after --max-tokens or before a\n"
	               "--stop string. The text goes to stdout as it comes, exactly as generated (the prompt is\n"
	               "not repeated); -o json prints it at the end with the finish reason and token counts.",
	.options = generate_options,
	.min_pos = 2,
	.max_pos = 2,
	.complete_pos = COMPLETE_BUNDLE,
	.run = run_generate,
	.examples = "  $ dlk generate shakespeare.dlk \"ROMEO:\" --max-tokens 200 --temperature 0.8 --top-p 0.95 --seed 1\n"
	            "  $ dlk generate shakespeare.dlk \"To be\" --temperature 0 -o json\n",
};
