/* A JSON document read for serving: request bodies of thousands of numbers, parsed without a node
 * per number.
 *
 * The reader builds a small tree in one arena per document. Objects, strings and arrays are
 * nodes; a number inside an array is not: it goes to one flat pool of doubles in document order,
 * so every array knows the span [leaf_begin, leaf_end) of the numbers anywhere inside it, and a
 * nested tensor ([[1, 2], [3, 4]]) reads as the same flat run as its flattened form. Parsing stops
 * at a nesting depth limit and at a limit on the number of values, so hostile bodies cost bounded
 * memory and time. */
#ifndef DLK_SERVE_JSONDOC_H
#define DLK_SERVE_JSONDOC_H

#include <stddef.h>

#include "lib/util/buf.h"

enum jd_type { JD_NULL, JD_BOOL, JD_NUMBER, JD_STRING, JD_OBJECT, JD_ARRAY };

struct jd_value {
	enum jd_type type;
	struct jd_value *next;        /* next sibling (object member or non-number array item) */
	const char *key;              /* as a member of an object: its key (NUL-terminated) */
	size_t key_len;
	int boolean;                  /* JD_BOOL */
	double num;                   /* JD_NUMBER (only as an object member or the root) */
	const char *str;              /* JD_STRING: NUL-terminated, may hold NULs (see len) */
	size_t len;
	/* JD_OBJECT: members; JD_ARRAY: the items that are not numbers, in order */
	struct jd_value *first, *last;
	size_t n_items;               /* JD_ARRAY: every item, numbers included; JD_OBJECT: members */
	size_t n_numbers;             /* JD_ARRAY: items that are numbers */
	size_t leaf_begin, leaf_end;  /* JD_ARRAY: numbers anywhere inside, in the pool */
	int numeric;                  /* JD_ARRAY: every item is a number or a numeric array */
};

struct jd_doc {
	struct jd_value *root;
	double *nums;                 /* the number pool */
	size_t n_nums, cap_nums;
	/* private */
	struct jd_chunk *chunks;
	char *cur;
	size_t left;
};
#define JD_DOC_INIT { NULL, NULL, 0, 0, NULL, NULL, 0 }

struct jd_limits {
	int max_depth;                /* arrays and objects nested deeper fail */
	size_t max_values;            /* numbers, strings, ... in all; 0 = no limit */
};

/* Parses len bytes of JSON into doc. On failure returns -1 with a message in msg naming the
 * byte offset ("JSON nesting deeper than 32 at byte 812", "invalid JSON at byte 17: ..."). */
int jd_parse(struct jd_doc *doc, const char *text, size_t len, const struct jd_limits *lim, char *msg,
             size_t msg_len);
void jd_release(struct jd_doc *doc);

/* The member of an object with this key, or NULL (also for a non-object). */
const struct jd_value *jd_get(const struct jd_value *obj, const char *key);
/* 1 when v is a JSON number with an integral value in [lo, hi], stored in *out. */
int jd_int(const struct jd_value *v, long long lo, long long hi, long long *out);

/* Shape of a numeric array: the lengths of the first item at each nesting level, and 1 when
 * every item at every level agrees with them (a rectangular, numbers-only tensor). rank 0 for
 * anything else; at most max_rank levels. */
int jd_shape(const struct jd_value *arr, long long *dims, int max_rank, int *rank);

/* JSON string literal of s (len bytes), quotes included, appended to b. */
void jd_write_string(struct dlk_buf *b, const char *s, size_t len);
/* A decimal that reads back as exactly this float (9 significant digits, "%.9g"); NaN and the
 * infinities, which JSON lacks, as null. */
void jd_write_float(struct dlk_buf *b, float f);

#endif
