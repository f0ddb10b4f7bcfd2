/* A worker's failure as published on its pod and Job (see failure.h). */
#include "lib/jobs/failure.h"
#include "lib/util/err.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* copies src into dst (n bytes) as one line, cut at a UTF-8 character's boundary */
static void one_line(char *dst, size_t n, const char *src)
{
	size_t len = 0;

	for (; src && *src && len + 1 < n; src++, len++)
		dst[len] = *src == '\n' || *src == '\r' || *src == '\t' ? ' ' : *src;
	if (src && ((unsigned char)*src & 0xC0) == 0x80) {
		/* cut inside a character: it goes whole */
		while (len > 0 && ((unsigned char)dst[len - 1] & 0xC0) == 0x80)
			len--;
		if (len > 0 && ((unsigned char)dst[len - 1] & 0xC0) == 0xC0)
			len--;
	}
	dst[len] = '\0';
}

char *dlk_failure_json(const struct dlk_failure *f)
{
	char msg[sizeof(f->message)];
	size_t cut = sizeof(msg);

	for (;;) {
		cJSON *o = cJSON_CreateObject();
		char *s;
		one_line(msg, cut, f->message);
		if (f->rank >= 0)
			cJSON_AddNumberToObject(o, "rank", f->rank);
		if (f->pod[0])
			cJSON_AddStringToObject(o, "pod", f->pod);
		cJSON_AddStringToObject(o, "class", f->cls);
		cJSON_AddNumberToObject(o, "exitCode", f->exit_code);
		cJSON_AddStringToObject(o, "message", msg);
		if (f->time[0])
			cJSON_AddStringToObject(o, "time", f->time);
		s = cJSON_PrintUnformatted(o);
		cJSON_Delete(o);
		/* escapes (\u0001 is six bytes for one) can make a message too long: halve it */
		if (strlen(s) < DLK_FAILURE_MAX_BYTES || cut <= 1)
			return s;
		free(s);
		cut /= 2;
	}
}

static void str_field(const cJSON *o, const char *k, char *out, size_t n)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	one_line(out, n, cJSON_IsString(v) ? v->valuestring : "");
}

int dlk_failure_parse(const char *s, struct dlk_failure *f)
{
	cJSON *o;
	const cJSON *rank, *code, *cls, *msg;
	int rc = -1;

	memset(f, 0, sizeof(*f));
	f->rank = -1;
	if (!s || *s != '{' || strlen(s) >= 2 * DLK_FAILURE_MAX_BYTES)
		return -1;
	o = cJSON_Parse(s);
	if (!cJSON_IsObject(o))
		goto out;
	rank = cJSON_GetObjectItemCaseSensitive(o, "rank");
	code = cJSON_GetObjectItemCaseSensitive(o, "exitCode");
	cls = cJSON_GetObjectItemCaseSensitive(o, "class");
	msg = cJSON_GetObjectItemCaseSensitive(o, "message");
	if (!cJSON_IsString(msg) || (!cJSON_IsNumber(code) && !cJSON_IsString(cls)))
		goto out;
	/* numbers out of range are unknown, not converted (undefined behaviour) */
	if (cJSON_IsNumber(rank) && rank->valuedouble >= 0 && rank->valuedouble < 1 << 20)
		f->rank = (int)rank->valuedouble;
	if (cJSON_IsNumber(code) && code->valuedouble >= 0 && code->valuedouble < 256)
		f->exit_code = (int)code->valuedouble;
	str_field(o, "pod", f->pod, sizeof(f->pod));
	str_field(o, "class", f->cls, sizeof(f->cls));
	str_field(o, "message", f->message, sizeof(f->message));
	str_field(o, "time", f->time, sizeof(f->time));
	if (!f->cls[0] && dlk_exit_name(f->exit_code))
		snprintf(f->cls, sizeof(f->cls), "%s", dlk_exit_name(f->exit_code));
	rc = 0;
out:
	cJSON_Delete(o);
	return rc;
}

void dlk_failure_text(const struct dlk_failure *f, char *out, size_t n)
{
	char who[320] = "a worker";

	if (f->rank >= 0 && f->pod[0])
		snprintf(who, sizeof(who), "rank %d (pod %s)", f->rank, f->pod);
	else if (f->rank >= 0)
		snprintf(who, sizeof(who), "rank %d", f->rank);
	else if (f->pod[0])
		snprintf(who, sizeof(who), "pod %s", f->pod);
	snprintf(out, n, "%s failed: %s%s(exit %d): %s", who, f->cls, f->cls[0] ? " " : "", f->exit_code, f->message);
}

/* lower explains more */
static int cause_class(const struct dlk_rank_end *e)
{
	if (!e->signal && e->exit_code != DLK_EXIT_RESTARTABLE)
		return 0;
	if (e->signal && !e->signal_ours)
		return 1;
	return 2;
}

static int earlier(const struct dlk_rank_end *a, const struct dlk_rank_end *b)
{
	if (a->finished && a->finished[0] && b->finished && b->finished[0])
		return strcmp(a->finished, b->finished) < 0;
	return a->seq >= 0 && b->seq >= 0 && a->seq < b->seq;
}

int dlk_failure_cause(const struct dlk_rank_end *ranks, int n)
{
	int best = -1;

	for (int r = 0; r < n; r++) {
		if (ranks[r].exit_code == 0 && !ranks[r].signal)
			continue;
		if (best < 0 || cause_class(&ranks[r]) < cause_class(&ranks[best]) ||
		    (cause_class(&ranks[r]) == cause_class(&ranks[best]) && earlier(&ranks[r], &ranks[best])))
			best = r;
	}
	return best;
}
