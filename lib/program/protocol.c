/* The progress protocol (lib/program/protocol.h). A line from a program is outside input: it is
 * bounded before it is parsed, and every field is checked for type and range, so a hostile or
 * broken program can neither crash dlk nor put a NaN into a run record. */
#include "lib/program/protocol.h"
#include "lib/util/mem.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void program_report_release(struct program_report *r)
{
	free(r->confusion);
	free(r->model);
	*r = (struct program_report)PROGRAM_REPORT_INIT;
}

const double *program_report_metric(const struct program_report *r, const char *name)
{
	for (int i = 0; i < r->n_metrics; i++)
		if (!strcmp(r->metrics[i].name, name))
			return &r->metrics[i].value;
	return NULL;
}

static int number(const cJSON *o, const char *key, double lo, double hi, int whole, double *out, char *why,
                  size_t len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi ||
	    (whole && v->valuedouble != floor(v->valuedouble))) {
		snprintf(why, len, "%s: expected a %s from %g to %g", key, whole ? "whole number" : "finite number", lo, hi);
		return -1;
	}
	*out = v->valuedouble;
	return 1;
}

int program_protocol_name_ok(const char *s)
{
	size_t n = strlen(s);
	return n > 0 && n <= PROGRAM_PROTOCOL_MAX_NAME &&
	       strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-/") == n;
}

static int parse_metrics(const cJSON *m, struct program_report *r, char *why, size_t len)
{
	const cJSON *it;
	if (!cJSON_IsObject(m))
		return snprintf(why, len, "metrics: expected an object of names to numbers"), -1;
	cJSON_ArrayForEach(it, m)
	{
		if (r->n_metrics >= PROGRAM_PROTOCOL_MAX_METRICS)
			return snprintf(why, len, "metrics: more than %d", PROGRAM_PROTOCOL_MAX_METRICS), -1;
		if (!it->string || !program_protocol_name_ok(it->string))
			return snprintf(why, len, "metrics: a name is empty, longer than %d or holds a character other than "
			                "letters, digits, '_', '.', '-', '/'", PROGRAM_PROTOCOL_MAX_NAME), -1;
		if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble))
			return snprintf(why, len, "metrics.%s: expected a finite number", it->string), -1;
		for (int i = 0; i < r->n_metrics; i++)
			if (!strcmp(r->metrics[i].name, it->string))
				return snprintf(why, len, "metrics.%s: given twice", it->string), -1;
		snprintf(r->metrics[r->n_metrics].name, sizeof(r->metrics[0].name), "%s", it->string);
		r->metrics[r->n_metrics++].value = it->valuedouble;
	}
	return 0;
}

static int parse_confusion(const cJSON *c, struct program_report *r, char *why, size_t len)
{
	int n = cJSON_IsArray(c) ? cJSON_GetArraySize(c) : -1;
	const cJSON *row;
	int i = 0;

	if (n < 1 || n > PROGRAM_PROTOCOL_MAX_CLASSES)
		return snprintf(why, len, "confusion: expected a square list of lists of counts, 1 to %d classes",
		                PROGRAM_PROTOCOL_MAX_CLASSES), -1;
	r->confusion = xcalloc((size_t)n * (size_t)n, sizeof(*r->confusion));
	cJSON_ArrayForEach(row, c)
	{
		const cJSON *v;
		int j = 0;
		if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != n)
			return snprintf(why, len, "confusion[%d]: expected %d counts (the matrix is square)", i, n), -1;
		cJSON_ArrayForEach(v, row)
		{
			if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0 || v->valuedouble > 1e15 ||
			    v->valuedouble != floor(v->valuedouble))
				return snprintf(why, len, "confusion[%d][%d]: expected a count (a whole number >= 0)", i, j), -1;
			r->confusion[(size_t)i * (size_t)n + (size_t)j] = (long long)v->valuedouble;
			j++;
		}
		i++;
	}
	r->n_classes = n;
	return 0;
}

int program_protocol_parse(const char *line, size_t len, struct program_report *out, char *why, size_t why_len)
{
	size_t pl = strlen(PROGRAM_PROTOCOL_PREFIX);
	cJSON *o = NULL;
	const cJSON *v;
	const char *end = NULL;
	double d;
	int rc = -1;

	program_report_release(out);
	if (len < pl || memcmp(line, PROGRAM_PROTOCOL_PREFIX, pl))
		return 0;
	if (len > PROGRAM_PROTOCOL_MAX_LINE) {
		snprintf(why, why_len, "the line is %zu bytes, more than the limit of %d", len, PROGRAM_PROTOCOL_MAX_LINE);
		return -1;
	}
	if (len && line[len - 1] == '\r')
		len--;
	if (memchr(line, 0, len)) {
		snprintf(why, why_len, "the line holds a NUL byte");
		return -1;
	}
	o = cJSON_ParseWithLengthOpts(line + pl, len - pl, &end, 0);
	/* one object and nothing after it but blanks */
	while (o && end < line + len && (*end == ' ' || *end == '\t'))
		end++;
	if (!o || !cJSON_IsObject(o) || end != line + len) {
		snprintf(why, why_len, "expected one JSON object after the prefix");
		goto out;
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(o, "event")) && !cJSON_IsNull(v)) {
		const char *e = cJSON_GetStringValue(v);
		if (e && !strcmp(e, "step"))
			out->event = PROGRAM_EV_STEP;
		else if (e && !strcmp(e, "epoch"))
			out->event = PROGRAM_EV_EPOCH;
		else if (e && !strcmp(e, "done"))
			out->event = PROGRAM_EV_DONE;
		else {
			snprintf(why, why_len, "event: expected \"step\", \"epoch\" or \"done\"");
			goto out;
		}
	}
	/* 2^53: every whole number a double carries exactly */
	switch (number(o, "step", 0, 9007199254740992.0, 1, &d, why, why_len)) {
	case -1: goto out;
	case 1: out->step = (long long)d;
	}
	switch (number(o, "steps", 1, 9007199254740992.0, 1, &d, why, why_len)) {
	case -1: goto out;
	case 1: out->steps = (long long)d;
	}
	switch (number(o, "epoch", 0, 1e9, 1, &d, why, why_len)) {
	case -1: goto out;
	case 1: out->epoch = (int)d;
	}
	switch (number(o, "epochs", 1, 1e9, 1, &d, why, why_len)) {
	case -1: goto out;
	case 1: out->epochs = (int)d;
	}
	switch (number(o, "loss", -1e300, 1e300, 0, &out->loss, why, why_len)) {
	case -1: goto out;
	case 1: out->has_loss = 1;
	}
	if (number(o, "samples_per_s", 0, 1e300, 0, &out->samples_per_s, why, why_len) < 0 ||
	    number(o, "lr", 0, 1e300, 0, &out->lr, why, why_len) < 0)
		goto out;
	if (out->epoch >= 0 && out->epochs > 0 && out->epoch > out->epochs) {
		snprintf(why, why_len, "epoch %d is past epochs %d", out->epoch, out->epochs);
		goto out;
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(o, "metrics")) && !cJSON_IsNull(v) && parse_metrics(v, out, why, why_len))
		goto out;
	if ((v = cJSON_GetObjectItemCaseSensitive(o, "confusion")) && !cJSON_IsNull(v) &&
	    parse_confusion(v, out, why, why_len))
		goto out;
	if ((v = cJSON_GetObjectItemCaseSensitive(o, "model")) && !cJSON_IsNull(v)) {
		const char *m = cJSON_GetStringValue(v);
		if (!m || !*m || strlen(m) > PROGRAM_PROTOCOL_MAX_PATH || strpbrk(m, "\n\r")) {
			snprintf(why, why_len, "model: expected the path of the model file (one line, at most %d bytes)",
			         PROGRAM_PROTOCOL_MAX_PATH);
			goto out;
		}
		out->model = xstrdup(m);
	}
	rc = 1;
out:
	cJSON_Delete(o);
	if (rc < 0)
		program_report_release(out);
	return rc;
}
