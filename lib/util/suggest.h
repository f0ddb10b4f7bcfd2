/* "did you mean" suggestions: the nearest candidate by edit distance. */
#ifndef DLK_UTIL_SUGGEST_H
#define DLK_UTIL_SUGGEST_H

#include <stddef.h>

/* Damerau-Levenshtein (optimal string alignment) distance between a and b. */
size_t dlk_edit_distance(const char *a, const char *b);
/* The candidate closest to word, or NULL when none is close enough to be a plausible typo
 * (distance <= max(1, strlen(word)/3), or candidate starts with word). Borrowed pointer. */
const char *dlk_suggest(const char *word, const char *const *candidates, size_t n);

#endif
