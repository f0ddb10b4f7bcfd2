#include "lib/train/history.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/util/jsonfield.h"
#include "lib/util/mem.h"

#define MAX_STEPS 9007199254740992.0 /* 2^53: any step count a double holds exactly */

void dlk_history_add_step(struct dlk_history *h, double loss)
{
	if (!h->step_loss)
		h->step_loss = xmalloc(sizeof(double) * DLK_HISTORY_MAX_POINTS);
	if (h->every < 1)
		h->every = 1;
	h->pending_sum += loss;
	h->pending_n++;
	h->steps++;
	h->epoch_sum += loss;
	h->epoch_n++;
	if (h->pending_n < h->every)
		return;
	if (h->n_step_loss == DLK_HISTORY_MAX_POINTS) {
		/* full: every bucket absorbs its neighbour, so the curve keeps its whole length at half
		 * the resolution; the bucket being filled is aligned with the new ones (MAX is even) */
		for (size_t i = 0; i < DLK_HISTORY_MAX_POINTS / 2; i++)
			h->step_loss[i] = 0.5 * (h->step_loss[2 * i] + h->step_loss[2 * i + 1]);
		h->n_step_loss = DLK_HISTORY_MAX_POINTS / 2;
		h->every *= 2;
		if (h->pending_n < h->every)
			return;
	}
	h->step_loss[h->n_step_loss++] = h->pending_sum / (double)h->pending_n;
	h->pending_sum = 0;
	h->pending_n = 0;
}

double dlk_history_epoch_loss(const struct dlk_history *h)
{
	return h->epoch_n ? h->epoch_sum / (double)h->epoch_n : 0;
}

void dlk_history_add_epoch(struct dlk_history *h, const struct dlk_history_epoch *e)
{
	h->epoch_sum = 0;
	h->epoch_n = 0;
	if (h->n_epochs == h->cap_epochs) {
		h->cap_epochs = h->cap_epochs ? 2 * h->cap_epochs : 16;
		h->epochs = xrealloc(h->epochs, sizeof(*h->epochs) * h->cap_epochs);
	}
	h->epochs[h->n_epochs++] = *e;
}

void dlk_history_add_event(struct dlk_history *h, const struct dlk_history_event *e)
{
	/* a job restarted ten thousand times has its first and its latest ones recorded */
	if (h->n_events == DLK_HISTORY_MAX_EVENTS) {
		memmove(h->events + 1, h->events + 2, sizeof(*h->events) * (h->n_events - 2));
		h->n_events--;
	}
	if (h->n_events == h->cap_events) {
		h->cap_events = h->cap_events ? 2 * h->cap_events : 8;
		h->events = xrealloc(h->events, sizeof(*h->events) * h->cap_events);
	}
	h->events[h->n_events++] = *e;
}

double dlk_history_training_sec(const struct dlk_history *h)
{
	/* an epoch's entry is what a document (a bundle, a record, a Job's metrics) carries; the
	 * running clock is not, so the epoch's is the one every reader can get */
	return h->n_epochs ? h->epochs[h->n_epochs - 1].elapsed_sec : 0;
}

int dlk_history_world(const struct dlk_history *h)
{
	return h->n_events ? h->events[h->n_events - 1].world : 0;
}

static const char *event_name(enum dlk_history_event_kind k)
{
	return k == DLK_HISTORY_RESUME ? "resume" : "start";
}

/* cJSON prints a number with 15 digits when that reads back within an epsilon of it, which
 * is not always the same double; a checkpoint must give the resumed run its exact numbers */
static cJSON *exact(double v)
{
	char s[40];

	if (!isfinite(v))
		return cJSON_CreateNull();
	snprintf(s, sizeof(s), "%.17g", v);
	return cJSON_CreateRaw(s);
}

static void add_num(cJSON *o, const char *key, double v, int for_checkpoint)
{
	cJSON_AddItemToObject(o, key, for_checkpoint ? exact(v) : cJSON_CreateNumber(v));
}

cJSON *dlk_history_json(const struct dlk_history *h, int for_checkpoint)
{
	cJSON *j = cJSON_CreateObject(), *arr, *sl;

	arr = cJSON_AddArrayToObject(j, "epochs");
	for (size_t i = 0; i < h->n_epochs; i++) {
		const struct dlk_history_epoch *e = &h->epochs[i];
		cJSON *o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "epoch", e->epoch);
		cJSON_AddNumberToObject(o, "step", (double)e->step);
		add_num(o, "train_loss", e->train_loss, for_checkpoint);
		if (e->have_test) {
			add_num(o, "test_loss", e->test_loss, for_checkpoint);
			if (e->test_metric[0]) {
				cJSON_AddStringToObject(o, "test_metric_name", e->test_metric);
				add_num(o, "test_metric", e->test_metric_value, for_checkpoint);
			} else {
				add_num(o, "test_accuracy", e->test_accuracy, for_checkpoint);
			}
		}
		add_num(o, "samples_per_sec", e->samples_per_sec, for_checkpoint);
		add_num(o, "elapsed_sec", e->elapsed_sec, for_checkpoint);
		add_num(o, "lr", e->lr, for_checkpoint);
		cJSON_AddNumberToObject(o, "world", e->world);
		if (e->time[0])
			cJSON_AddStringToObject(o, "time", e->time);
		cJSON_AddItemToArray(arr, o);
	}
	sl = cJSON_AddObjectToObject(j, "step_loss");
	cJSON_AddNumberToObject(sl, "every", (double)h->every);
	cJSON_AddNumberToObject(sl, "steps", (double)h->steps);
	/* cJSON_CreateDoubleArray gives NULL for no numbers */
	cJSON *vals = cJSON_AddArrayToObject(sl, "values");
	for (size_t i = 0; i < h->n_step_loss; i++)
		cJSON_AddItemToArray(vals, for_checkpoint ? exact(h->step_loss[i]) : cJSON_CreateNumber(h->step_loss[i]));
	if (for_checkpoint) {
		add_num(sl, "pending_sum", h->pending_sum, for_checkpoint);
		cJSON_AddNumberToObject(sl, "pending_steps", (double)h->pending_n);
		add_num(j, "elapsed_sec", h->elapsed_sec, for_checkpoint);
		cJSON *el = cJSON_AddObjectToObject(j, "epoch_loss");
		add_num(el, "sum", h->epoch_sum, for_checkpoint);
		cJSON_AddNumberToObject(el, "steps", (double)h->epoch_n);
	}
	arr = cJSON_AddArrayToObject(j, "events");
	for (size_t i = 0; i < h->n_events; i++) {
		const struct dlk_history_event *e = &h->events[i];
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "event", event_name(e->kind));
		cJSON_AddNumberToObject(o, "epoch", e->epoch);
		cJSON_AddNumberToObject(o, "step", (double)e->step);
		add_num(o, "elapsed_sec", e->elapsed_sec, for_checkpoint);
		cJSON_AddNumberToObject(o, "world", e->world);
		if (e->time[0])
			cJSON_AddStringToObject(o, "time", e->time);
		cJSON_AddItemToArray(arr, o);
	}
	return j;
}

/* ---- reading back ---- */


static int time_field(const cJSON *o, char out[32], const char *who, const char *where, struct dlk_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "time");

	out[0] = '\0';
	if (!v)
		return 0;
	if (!cJSON_IsString(v) || strlen(v->valuestring) > 31)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: %s.time is not a time", who, where);
	memcpy(out, v->valuestring, strlen(v->valuestring) + 1);
	return 0;
}

static int read_epoch(const cJSON *o, struct dlk_history_epoch *e, const char *who, const char *where,
                      struct dlk_err *err)
{
	double epoch, step, world;
	const cJSON *tl = cJSON_GetObjectItemCaseSensitive(o, "test_loss");
	const cJSON *ta = cJSON_GetObjectItemCaseSensitive(o, "test_accuracy");

	memset(e, 0, sizeof(*e));
	if (!cJSON_IsObject(o))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: %s is not an object", who, where);
	if (dlk_json_number(o, "epoch", 1, 1e9, 1, &epoch, who, where, err) ||
	    dlk_json_number(o, "step", 0, MAX_STEPS, 1, &step, who, where, err) ||
	    dlk_json_number(o, "train_loss", -HUGE_VAL, HUGE_VAL, 0, &e->train_loss, who, where, err) ||
	    dlk_json_number(o, "samples_per_sec", 0, HUGE_VAL, 0, &e->samples_per_sec, who, where, err) ||
	    dlk_json_number(o, "elapsed_sec", 0, HUGE_VAL, 0, &e->elapsed_sec, who, where, err) ||
	    dlk_json_number(o, "lr", -HUGE_VAL, HUGE_VAL, 0, &e->lr, who, where, err) ||
	    dlk_json_number(o, "world", 1, 1 << 20, 1, &world, who, where, err) || time_field(o, e->time, who, where, err))
		return -1;
	const cJSON *mn = cJSON_GetObjectItemCaseSensitive(o, "test_metric_name");
	if (mn) {
		if (!cJSON_IsString(mn) || !mn->valuestring[0] || strlen(mn->valuestring) >= sizeof(e->test_metric) ||
		    strspn(mn->valuestring, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(mn->valuestring))
			return dlk_errf(err, DLK_EXIT_CONFIG, "%s: %s.test_metric_name is not a metric's name", who, where);
		if (!tl || ta)
			return dlk_errf(err, DLK_EXIT_CONFIG, "%s: %s has test_metric_name without test_loss, or with "
			                "test_accuracy", who, where);
		if (dlk_json_number(o, "test_loss", -HUGE_VAL, HUGE_VAL, 0, &e->test_loss, who, where, err) ||
		    dlk_json_number(o, "test_metric", -HUGE_VAL, HUGE_VAL, 0, &e->test_metric_value, who, where, err))
			return -1;
		snprintf(e->test_metric, sizeof(e->test_metric), "%s", mn->valuestring);
	} else if (!!tl != !!ta) {
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: %s has one of test_loss and test_accuracy without the other", who,
		                where);
	}
	if (tl && !mn && (dlk_json_number(o, "test_loss", -HUGE_VAL, HUGE_VAL, 0, &e->test_loss, who, where, err) ||
	                  dlk_json_number(o, "test_accuracy", 0, 1, 0, &e->test_accuracy, who, where, err)))
		return -1;
	e->have_test = tl != NULL;
	e->epoch = (int)epoch;
	e->step = (long)step;
	e->world = (int)world;
	return 0;
}

static int read_event(const cJSON *o, struct dlk_history_event *e, const char *who, const char *where,
                      struct dlk_err *err)
{
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(o, "event");
	double epoch, step, world;

	memset(e, 0, sizeof(*e));
	if (!cJSON_IsObject(o))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: %s is not an object", who, where);
	if (!cJSON_IsString(k) || (strcmp(k->valuestring, "start") && strcmp(k->valuestring, "resume")))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: %s.event is not \"start\" or \"resume\"", who, where);
	e->kind = strcmp(k->valuestring, "resume") ? DLK_HISTORY_START : DLK_HISTORY_RESUME;
	if (dlk_json_number(o, "epoch", 0, 1e9, 1, &epoch, who, where, err) ||
	    dlk_json_number(o, "step", 0, MAX_STEPS, 1, &step, who, where, err) ||
	    dlk_json_number(o, "elapsed_sec", 0, HUGE_VAL, 0, &e->elapsed_sec, who, where, err) ||
	    dlk_json_number(o, "world", 1, 1 << 20, 1, &world, who, where, err) || time_field(o, e->time, who, where, err))
		return -1;
	e->epoch = (int)epoch;
	e->step = (long)step;
	e->world = (int)world;
	return 0;
}

int dlk_history_from_json(const cJSON *j, const char *who, struct dlk_history *out, struct dlk_err *err)
{
	struct dlk_history h = DLK_HISTORY_INIT;
	const cJSON *epochs = cJSON_GetObjectItemCaseSensitive(j, "epochs");
	const cJSON *events = cJSON_GetObjectItemCaseSensitive(j, "events");
	const cJSON *sl = cJSON_GetObjectItemCaseSensitive(j, "step_loss");
	const cJSON *values = cJSON_GetObjectItemCaseSensitive(sl, "values"), *it;
	char where[64];
	double every, steps, v;
	size_t i = 0;

	if (!cJSON_IsObject(j))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: history is not an object", who);
	if (!cJSON_IsArray(epochs) || cJSON_GetArraySize(epochs) > DLK_HISTORY_MAX_EPOCHS)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: history.epochs is missing or holds more than %d entries", who,
		                DLK_HISTORY_MAX_EPOCHS);
	if (!cJSON_IsArray(events) || cJSON_GetArraySize(events) > DLK_HISTORY_MAX_EVENTS)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: history.events is missing or holds more than %d entries", who,
		                DLK_HISTORY_MAX_EVENTS);
	if (!cJSON_IsObject(sl) || !cJSON_IsArray(values) || cJSON_GetArraySize(values) > DLK_HISTORY_MAX_POINTS)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: history.step_loss.values is missing or holds more than %d values",
		                who, DLK_HISTORY_MAX_POINTS);
	cJSON_ArrayForEach(it, epochs) {
		struct dlk_history_epoch e;
		snprintf(where, sizeof(where), "history.epochs[%zu]", i++);
		if (read_epoch(it, &e, who, where, err))
			goto fail;
		dlk_history_add_epoch(&h, &e);
	}
	i = 0;
	cJSON_ArrayForEach(it, events) {
		struct dlk_history_event e;
		snprintf(where, sizeof(where), "history.events[%zu]", i++);
		if (read_event(it, &e, who, where, err))
			goto fail;
		dlk_history_add_event(&h, &e);
	}
	if (dlk_json_number(sl, "every", 1, MAX_STEPS, 1, &every, who, "history.step_loss", err) ||
	    dlk_json_number(sl, "steps", 0, MAX_STEPS, 1, &steps, who, "history.step_loss", err))
		goto fail;
	h.every = (long)every;
	h.steps = (long)steps;
	h.step_loss = xmalloc(sizeof(double) * DLK_HISTORY_MAX_POINTS);
	cJSON_ArrayForEach(it, values) {
		if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble)) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s: history.step_loss.values[%zu] is not a number", who, h.n_step_loss);
			goto fail;
		}
		h.step_loss[h.n_step_loss++] = it->valuedouble;
	}
	/* every value is a whole bucket; what is left over is the bucket being filled */
	if ((double)h.n_step_loss * every > steps || steps - (double)h.n_step_loss * every >= every) {
		dlk_errf(err, DLK_EXIT_CONFIG, "%s: history.step_loss: %zu values, each the mean of %ld steps, do not make %ld steps",
		         who, h.n_step_loss, h.every, h.steps);
		goto fail;
	}
	h.pending_n = h.steps - (long)h.n_step_loss * h.every;
	if (cJSON_GetObjectItemCaseSensitive(sl, "pending_steps")) {
		if (dlk_json_number(sl, "pending_steps", 0, MAX_STEPS, 1, &v, who, "history.step_loss", err) ||
		    dlk_json_number(sl, "pending_sum", -HUGE_VAL, HUGE_VAL, 0, &h.pending_sum, who, "history.step_loss", err))
			goto fail;
		if ((long)v != h.pending_n) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s: history.step_loss.pending_steps is %ld, not the %ld steps left over",
			         who, (long)v, h.pending_n);
			goto fail;
		}
	}
	if (cJSON_GetObjectItemCaseSensitive(j, "elapsed_sec") &&
	    dlk_json_number(j, "elapsed_sec", 0, HUGE_VAL, 0, &h.elapsed_sec, who, "history", err))
		goto fail;
	const cJSON *el = cJSON_GetObjectItemCaseSensitive(j, "epoch_loss");
	if (el) {
		if (dlk_json_number(el, "sum", -HUGE_VAL, HUGE_VAL, 0, &h.epoch_sum, who, "history.epoch_loss", err) ||
		    dlk_json_number(el, "steps", 0, steps, 1, &v, who, "history.epoch_loss", err))
			goto fail;
		h.epoch_n = (long)v;
	}
	dlk_history_release(out);
	*out = h;
	return 0;
fail:
	dlk_history_release(&h);
	return -1;
}

void dlk_history_copy(struct dlk_history *dst, const struct dlk_history *src)
{
	*dst = *src;
	dst->epochs = src->n_epochs ? xmalloc(sizeof(*src->epochs) * src->n_epochs) : NULL;
	dst->cap_epochs = src->n_epochs;
	if (src->n_epochs)
		memcpy(dst->epochs, src->epochs, sizeof(*src->epochs) * src->n_epochs);
	dst->events = src->n_events ? xmalloc(sizeof(*src->events) * src->n_events) : NULL;
	dst->cap_events = src->n_events;
	if (src->n_events)
		memcpy(dst->events, src->events, sizeof(*src->events) * src->n_events);
	dst->step_loss = NULL;
	if (src->step_loss) {
		dst->step_loss = xmalloc(sizeof(double) * DLK_HISTORY_MAX_POINTS);
		memcpy(dst->step_loss, src->step_loss, sizeof(double) * src->n_step_loss);
	}
}

void dlk_history_release(struct dlk_history *h)
{
	free(h->epochs);
	free(h->events);
	free(h->step_loss);
	*h = (struct dlk_history)DLK_HISTORY_INIT;
}
