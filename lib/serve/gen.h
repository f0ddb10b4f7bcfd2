/* Continuous batching of text generation: one scheduler per language model.
 *
 * Sequences (one per prompt) queue; between two forward passes the scheduler admits queued ones
 * up to max_seqs running, builds one row per running sequence (each at its own length: lib/gen/lm.h's
 * window), runs them as one pass through the model's batcher (so generation shares the compute
 * pool, its thread budget and its metrics with every other request), samples each sequence's next
 * token and retires the finished ones. A new request thus waits for at most one pass, never for the
 * others to finish.
 *
 * A request is shared by its submitter (an HTTP connection) and the scheduler, counted by
 * references: the submitter polls it for text (dlk_gen_req_poll, which arms a wake-up, called
 * under the request's lock, when there is none yet) and releases it when done or gone; a released
 * request still running is dropped at the next step. */
#ifndef DLK_SERVE_GEN_H
#define DLK_SERVE_GEN_H

#include <stdatomic.h>
#include <stdint.h>

#include "lib/gen/lm.h"
#include "lib/serve/batcher.h"
#include "lib/serve/metrics.h"
#include "lib/util/buf.h"

/* Prometheus series, labelled model="name":
 *   dlk_generation_prompt_tokens_total, dlk_generation_tokens_total   counters
 *   dlk_generation_sequences_running, dlk_generation_sequences_waiting gauges
 *   dlk_generation_queue_duration_seconds         from submission to the first pass it is in
 *   dlk_generation_time_to_first_token_seconds    from submission to its first token
 *   dlk_generation_tokens_per_second              each finished sequence's rate after its first token */
struct dlk_gen_stats {
	_Atomic uint64_t prompt_tokens, tokens;
	_Atomic int64_t running, waiting;
	struct dlk_hist queue, ttft, rate;
};
void dlk_gen_stats_init(struct dlk_gen_stats *s);
void dlk_gen_metrics_write(struct dlk_buf *out, const char *const *names, const struct dlk_gen_stats *const *stats, int n);

struct dlk_gen_req;
struct dlk_gen_sched;

/* A request for one prompt (the caller's reference). NULL with err for an empty prompt. */
struct dlk_gen_req *dlk_gen_req_new(const struct dlk_lm *lm, const char *prompt, size_t len,
                                    const struct dlk_gen_params *p, struct dlk_err *err);
/* What the request has made since the last poll: text appended to out (well-formed UTF-8).
 * Returns 1 when it is finished (*finish set; every piece of text taken), -1 when it failed (msg),
 * 0 while it runs; with 0 and nothing appended, arm(arg) is called under the request's lock and
 * wake(arg) will be called once, from the scheduler, when there is more (a connection suspended
 * by arm is resumed by wake, never before it was suspended). */
int dlk_gen_req_poll(struct dlk_gen_req *r, struct dlk_buf *out, enum dlk_finish *finish, char *msg, size_t msg_len,
                     void (*arm)(void *), void (*wake)(void *), void *arg);
void dlk_gen_req_counts(struct dlk_gen_req *r, long long *prompt_tokens, long long *completion_tokens);
/* Drops the caller's reference; a running request stops at the next step and no wake comes. */
void dlk_gen_req_release(struct dlk_gen_req *r);

/* A scheduler running lm's sequences, at most max_seqs per pass, through batcher (whose engine is
 * the lm's network). Starts its thread. With a bundle (NULL: none), a causal model over positions
 * (lib/nn/decode.h accepts it) is decoded instead on the scheduler's own copy of the network, built
 * on be in its thread: each sequence with a key/value cache of its own, one position per token
 * after its prompt, a full window again once the cache holds `context` positions (the same text
 * as the full forward); the passes then do not go through the batcher. */
struct dlk_gen_sched *dlk_gen_sched_new(const struct dlk_lm *lm, struct dlk_batcher *batcher, int max_seqs,
                                        struct dlk_gen_stats *stats, const struct dlk_bundle *bundle,
                                        const struct dlk_backend *be);
/* 1 when the scheduler decodes with key/value caches. */
int dlk_gen_sched_kv(const struct dlk_gen_sched *s);
/* Queues r (the scheduler takes its own reference). -1 once the scheduler is closed. */
int dlk_gen_submit(struct dlk_gen_sched *s, struct dlk_gen_req *r);
/* Refuses new requests; the running and queued ones fail with "the server is shutting down" and
 * are woken; the thread ends. Then frees. NULL is allowed. */
void dlk_gen_sched_free(struct dlk_gen_sched *s);

#endif
