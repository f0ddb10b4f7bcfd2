/* "did you mean" suggestions: the nearest candidate by edit distance. */
#ifndef DLK_UTIL_SUGGEST_H
#define DLK_UTIL_SUGGEST_H

#include <stddef.h>

/* Damerau-Levenshtein (optimal string alignment) distance between a and b. */
size_t dlk_edit_distance(const char *a, const char *b);
/* The candidate closest to word, or NULL when none is close enough to be a plausible typo
 * (distance <= max(1, strlen(word)/3), or candidate starts with word). Borrowed pointer. */
const char *dlk_suggest(const char *word, const char *const *candidates, size_t n);

/* What to add to an "unknown X 'word'" message so that the reader can fix it: " (did you mean
 * 'near'?)" when a candidate is near word, else " (NOUN: a, b, c)" naming every candidate, so that
 * a word with no near match never leaves the reader guessing (noun: "layers are", "keys here
 * are"). Empty when there is no candidate. Written into buf (cut to len), which is returned. */
const char *dlk_suggest_or_list(char *buf, size_t len, const char *word, const char *const *candidates, size_t n,
                                const char *noun);

#endif
