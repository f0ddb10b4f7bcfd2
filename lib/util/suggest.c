#include "lib/util/suggest.h"
#include "lib/util/mem.h"

#include <stdio.h>
#include <string.h>

size_t dlk_edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t *d = xcalloc((la + 1) * (lb + 1), sizeof(*d));
#define D(i, j) d[(i) * (lb + 1) + (j)]
	for (size_t i = 0; i <= la; i++)
		D(i, 0) = i;
	for (size_t j = 0; j <= lb; j++)
		D(0, j) = j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			size_t cost = a[i - 1] != b[j - 1];
			size_t v = D(i - 1, j) + 1;
			if (D(i, j - 1) + 1 < v)
				v = D(i, j - 1) + 1;
			if (D(i - 1, j - 1) + cost < v)
				v = D(i - 1, j - 1) + cost;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    D(i - 2, j - 2) + 1 < v)
				v = D(i - 2, j - 2) + 1;
			D(i, j) = v;
		}
	}
	size_t r = D(la, lb);
#undef D
	free(d);
	return r;
}

const char *dlk_suggest(const char *word, const char *const *candidates, size_t n)
{
	const char *best = NULL;
	size_t best_d = (size_t)-1, wl = strlen(word);
	size_t limit = wl / 3 > 1 ? wl / 3 : 1;

	if (!wl)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (!candidates[i])
			continue;
		size_t dist = dlk_edit_distance(word, candidates[i]);
		if (dist < best_d) {
			best_d = dist;
			best = candidates[i];
		}
	}
	if (best && best_d <= limit)
		return best;
	/* a prefix of a longer name ("--epo" for "--epochs") is a plausible intent too */
	for (size_t i = 0; i < n; i++)
		if (candidates[i] && wl >= 2 && !strncmp(candidates[i], word, wl))
			return candidates[i];
	return NULL;
}

const char *dlk_suggest_or_list(char *buf, size_t len, const char *word, const char *const *candidates, size_t n,
                                const char *noun)
{
	const char *near = dlk_suggest(word, candidates, n);
	size_t used;
	int k = 0;

	if (!len)
		return buf;
	buf[0] = '\0';
	if (near) {
		snprintf(buf, len, " (did you mean '%s'?)", near);
		return buf;
	}
	if (!n)
		return buf;
	snprintf(buf, len, " (%s: ", noun);
	for (size_t i = 0; i < n; i++) {
		if (!candidates[i])
			continue;
		used = strlen(buf);
		snprintf(buf + used, len - used, "%s%s", k++ ? ", " : "", candidates[i]);
	}
	used = strlen(buf);
	snprintf(buf + used, len - used, ")");
	/* cut short: the list still ends as a list does */
	if (strlen(buf) == len - 1 && len > 5)
		memcpy(buf + len - 5, "...)", 5);
	return buf;
}
