#include "lib/util/jsonfield.h"

#include <math.h>
#include <stdio.h>

int dlk_json_number(const cJSON *o, const char *key, double lo, double hi, int whole, double *out, const char *who,
                    const char *where, struct dlk_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	char range[64];

	if (cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble >= lo && v->valuedouble <= hi &&
	    (!whole || v->valuedouble == floor(v->valuedouble))) {
		*out = v->valuedouble;
		return 0;
	}
	if (isinf(lo) && isinf(hi))
		snprintf(range, sizeof(range), "a finite number");
	else if (isinf(hi))
		snprintf(range, sizeof(range), "a %s >= %g", whole ? "whole number" : "number", lo);
	else
		snprintf(range, sizeof(range), "a %s in [%g, %g]", whole ? "whole number" : "number", lo, hi);
	return dlk_errf(err, DLK_EXIT_CONFIG, "%s: %s%s%s is %s (expected %s)", who, where, where[0] ? "." : "", key,
	                v ? "out of range" : "missing", range);
}
