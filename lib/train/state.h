/* The training state as checkpoint blobs: what dlk_train_run's checkpoint hook saves and its
 * resume hook restores, so that a resumed run continues bit for bit where the old one stopped.
 *
 *   state.json    {"format": "dlk-train-state", "version": 1, "arch": sha256 of the network's
 *                  layout, "seed", "world", "batchSize", "epoch", "stepInEpoch", "globalStep",
 *                  "optimizerT", "dropoutCounter", "dropoutSeed", "params",
 *                  "scheduleStepsPerEpoch", "scheduleTotalSteps"}  (64-bit numbers as decimal
 *                  strings; the schedule's two are absent in checkpoints of older dlk)
 *   params.f32    the flat parameters, float32 in host byte order
 *   optim_m.f32   the optimizer's first moment / momentum buffer
 *   optim_v.f32   Adam's second moment (absent for SGD)
 *   history.json  the run's history so far (lib/train/history.h), when the state has one
 */
#ifndef DLK_TRAIN_STATE_H
#define DLK_TRAIN_STATE_H

#include <stdint.h>

#include "lib/train/checkpoint.h"
#include "lib/train/train.h"

/* What identifies the run a checkpoint belongs to; a checkpoint of another run is refused.
 * world and batch_size are this run's; a checkpoint written at another world size belongs to
 * the same run when world x batch_size (the global batch) is the same (elastic resume). */
struct dlk_state_meta {
	char arch[65];            /* dlk_net_arch_digest() */
	unsigned long long seed;
	int world, batch_size;
};

/* sha256 hex of the network's layout: every layer's kind, activation, shapes and parameter
 * counts. Two specs with the same digest have interchangeable flat parameter arrays. */
void dlk_net_arch_digest(const struct dlk_net *net, char hex[65]);

/* The optimizer's moments from elsewhere than st->opt's arrays (ZeRO-1: gathered from the ranks'
 * shards as they are written): fill(ctx, which (0: m, 1: v), buf, len, err) gives the next len
 * bytes of the whole moment, in order; 0, or -1 with err. st->opt says which moments there are
 * and their count (opt->n). */
struct dlk_state_moments {
	int (*fill)(void *ctx, int which, void *buf, size_t len, struct dlk_err *err);
	void *ctx;
};

/* Writes st (copied from the device) as checkpoint step st->global_step in dir, keeping the
 * newest `keep`. wo and mv may be NULL. Returns 0 or -1 with err (see ckpt_write_atomic). */
int dlk_state_save(const char *dir, int keep, const struct dlk_train_state *st, const struct dlk_state_meta *meta,
                   const struct ckpt_write_opts *wo, const struct dlk_state_moments *mv, struct dlk_err *err);

/* Checks c (a loaded checkpoint) against meta and the sizes of st's net and optimizer, then
 * copies its params and optimizer state into them and sets st's position, the counters and
 * (when c has it) the run's schedule. A checkpoint of another model, seed or global batch
 * fails with DLK_EXIT_CONFIG and a message naming c->path and what differs. */
int dlk_state_restore(const struct ckpt *c, struct dlk_train_state *st, const struct dlk_state_meta *meta,
                      struct dlk_err *err);

/* The world size and per-worker batch c was written at. Returns 0 or -1 (DLK_EXIT_CONFIG). */
int dlk_state_peek(const struct ckpt *c, int *world, int *batch_size, struct dlk_err *err);

/* The per-worker batch that keeps a run's global batch (ckpt_world x ckpt_batch) at `world`
 * workers. A global batch that does not split into `world` equal batches fails with
 * DLK_EXIT_CONFIG and a message naming both counts and the batch. */
int dlk_state_elastic_batch(int ckpt_world, int ckpt_batch, int world, int *batch_size, struct dlk_err *err);

#endif
