/* A small YAML document tree built from libyaml's events, with positions, bounds and the
 * YAML 1.2 core-schema typing of scalars.
 *
 * libyaml's own document loader expands nothing but shares aliased nodes, so walking its tree
 * can still blow up ("billion laughs"); this builder rejects aliases outright, and bounds
 * nesting depth, node count and collection lengths, so any input costs time and memory in
 * proportion to its size. */
#ifndef DLK_UTIL_YTREE_H
#define DLK_UTIL_YTREE_H

#include <stddef.h>

enum ynode_kind { YN_SCALAR, YN_MAP, YN_SEQ };

/* What a scalar means under the core schema (a quoted scalar is always a string). */
enum yscalar_type { YS_NULL, YS_BOOL, YS_INT, YS_FLOAT, YS_STR, YS_BADTAG };

#define YTREE_MAX_DEPTH 32
#define YTREE_MAX_NODES 200000
#define YTREE_MAX_ITEMS 100000   /* entries in one sequence or mapping */

struct ynode {
	enum ynode_kind kind;
	int line, col;       /* 1-based position of the node's start */
	int set_index;       /* -1: from the document; else which --set created it */
	/* scalar */
	char *text;          /* NUL-terminated (embedded NULs are rejected when parsing) */
	int quoted;          /* not a plain scalar: always a string */
	char *tag;           /* explicit tag, NULL when none */
	/* mapping: keys[i] -> vals[i]; sequence: vals[i] */
	struct ynode **keys, **vals;
	int n, cap;
};

/* Parses one YAML document. Returns 0 with *root set (NULL for an empty document), or -1 with
 * a message "LINE:COL: what" (libyaml's own problem text for syntax errors) in msg and the
 * 1-based position in *line, *col. */
int ytree_parse(const char *text, size_t len, struct ynode **root, char *msg, size_t msg_len,
                int *line, int *col);

struct ynode *ynode_new(enum ynode_kind kind, int line, int col, int set_index);
struct ynode *ynode_scalar(const char *text, int quoted, int line, int col, int set_index);
/* Appends to a mapping (key, val) or a sequence (key NULL); the node takes ownership. */
void ynode_append(struct ynode *parent, struct ynode *key, struct ynode *val);
void ynode_free(struct ynode *n);

/* Core-schema type of a scalar node (honouring !!str, !!int, !!float, !!bool, !!null). */
enum yscalar_type ynode_type(const struct ynode *n);
int ynode_is_null(const struct ynode *n);
/* Converts an int / float scalar; 0 on success, -1 when not of that type or out of range. */
int ynode_int(const struct ynode *n, long long *out);
int ynode_float(const struct ynode *n, double *out);
/* Describes a node for messages ("a mapping", "a sequence", "the string \"3\"", "the integer 0",
 * "'lots'"), written into buf, which is returned. */
const char *ynode_describe(const struct ynode *n, char *buf, size_t len);

#endif
