/* Following the logs of a job's pods (see logfollow.h). */
#include "lib/jobs/logfollow.h"
#include "lib/jobs/jobstate.h"
#include "lib/kube/api.h"
#include "lib/util/mem.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STREAMS 1024

/* The pod has a container that runs or ran: its log can be read. */
static int pod_started(const cJSON *pod)
{
	const cJSON *ph = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "status"), "phase");
	return cJSON_IsString(ph) && strcmp(ph->valuestring, "Pending") != 0;
}

struct stream {
	struct dlk_logfollow *lf;
	struct kube_client *c;  /* made by the thread that starts the stream, used by the stream only */
	char *pod;
	int rank;
	long tail, since_s;
	pthread_t th;
	int done;
};

struct dlk_logfollow {
	struct kube_open_opts open;
	char *ns;
	struct dlk_log_opts o;
	dlk_log_line_fn *line;
	dlk_log_note_fn *note;
	void *ud;
	kube_cancel_fn *caller_cancel;
	void *caller_cancel_ud;
	struct stream *s[MAX_STREAMS];
	int n;
	int stop;
	int first_update_done;
};

/* Ctrl-C, as the caller's cancel hook tells it. */
static int cancelled(const struct dlk_logfollow *lf)
{
	return lf->caller_cancel && lf->caller_cancel(lf->caller_cancel_ud);
}

/* The streams' clients stop for the caller's hook, and when the follower is stopped. */
static int stream_cancel(void *ud)
{
	struct dlk_logfollow *lf = ud;

	return __atomic_load_n(&lf->stop, __ATOMIC_RELAXED) || cancelled(lf);
}

static void note(struct dlk_logfollow *lf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct dlk_logfollow *lf, const char *fmt, ...)
{
	char msg[DLK_ERR_MSG_MAX + 256];
	va_list ap;

	if (!lf->note)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	lf->note(lf->ud, msg);
}

static int stream_line(const char *line, size_t len, void *ud)
{
	struct stream *s = ud;

	s->lf->line(s->lf->ud, s->rank, line, len);
	return __atomic_load_n(&s->lf->stop, __ATOMIC_RELAXED) ? 1 : 0;
}

static void *stream_thread(void *ud)
{
	struct stream *s = ud;
	struct dlk_err err = DLK_ERR_INIT;
	struct kube_client *c = s->c;
	struct kube_log_opts o = KUBE_LOG_OPTS_INIT;

	o.follow = 1;
	o.timestamps = s->lf->o.timestamps;
	o.tail_lines = s->tail;
	o.since_seconds = s->since_s;
	if (kube_logs(c, s->lf->ns, s->pod, &o, stream_line, s, &err) < 0 &&
	    !__atomic_load_n(&s->lf->stop, __ATOMIC_RELAXED) && !cancelled(s->lf))
		note(s->lf, "log of rank %d (pod '%s') ended: %s", s->rank, s->pod, err.msg);
	kube_client_free(c);
	s->c = NULL;
	__atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

struct dlk_logfollow *dlk_logfollow_new(const struct kube_open_opts *open, const char *ns, const struct dlk_log_opts *o,
					dlk_log_line_fn *line, dlk_log_note_fn *note, void *ud)
{
	struct dlk_logfollow *lf = xcalloc(1, sizeof(*lf));

	lf->open = *open;
	lf->open.client.cancel = stream_cancel;
	lf->open.client.cancel_ud = lf;
	/* what stream_cancel asks besides the stop flag */
	lf->caller_cancel = open->client.cancel;
	lf->caller_cancel_ud = open->client.cancel_ud;
	lf->ns = xstrdup(ns);
	lf->o = *o;
	lf->line = line;
	lf->note = note;
	lf->ud = ud;
	return lf;
}

void dlk_logfollow_update(struct dlk_logfollow *lf, const cJSON *pods)
{
	const cJSON *p;
	int first = !lf->first_update_done;

	lf->first_update_done = 1;
	cJSON_ArrayForEach(p, pods) {
		const char *name = kube_meta(p, "name");
		int rank = dlk_pod_rank(p), known = 0;
		if (!name || rank < 0 || (lf->o.rank >= 0 && rank != lf->o.rank) || !pod_started(p))
			continue;
		for (int i = 0; i < lf->n && !known; i++)
			known = !strcmp(lf->s[i]->pod, name);
		if (known || lf->n >= MAX_STREAMS)
			continue;
		struct dlk_err err = DLK_ERR_INIT;
		/* clients are made here, one thread at a time: loading the kubeconfig (and running an
		 * exec credential plugin) is not something to do from many threads at once */
		struct kube_client *c = kube_client_open(&lf->open, &err);
		if (!c) {
			note(lf, "cannot follow rank %d: %s", rank, err.msg);
			continue;
		}
		struct stream *s = xcalloc(1, sizeof(*s));
		s->lf = lf;
		s->c = c;
		s->pod = xstrdup(name);
		s->rank = rank;
		/* --tail and --since describe what was already there when we started; a pod that
		 * starts later (a restart) is shown from its first line */
		s->tail = first ? lf->o.tail : -1;
		s->since_s = first ? lf->o.since_s : 0;
		if (pthread_create(&s->th, NULL, stream_thread, s)) {
			note(lf, "cannot start a thread to follow rank %d", rank);
			kube_client_free(s->c);
			free(s->pod);
			free(s);
			continue;
		}
		lf->s[lf->n++] = s;
	}
}

int dlk_logfollow_active(struct dlk_logfollow *lf)
{
	int n = 0;

	for (int i = 0; i < lf->n; i++)
		n += !__atomic_load_n(&lf->s[i]->done, __ATOMIC_ACQUIRE);
	return n;
}

void dlk_logfollow_free(struct dlk_logfollow *lf, int stop)
{
	if (!lf)
		return;
	if (stop)
		__atomic_store_n(&lf->stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < lf->n; i++) {
		pthread_join(lf->s[i]->th, NULL);
		free(lf->s[i]->pod);
		free(lf->s[i]);
	}
	free(lf->ns);
	free(lf);
}

