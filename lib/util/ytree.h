/* The one YAML reader: libyaml's events become a tree of nodes that keep their positions, with
 * the YAML 1.2 core-schema typing of scalars. The project loader walks the tree (and names
 * FILE:LINE:COL in its messages); lib/util/yamljson turns it into cJSON.
 *
 * libyaml's own document loader shares aliased nodes, so walking its tree can still blow up
 * ("billion laughs"). This reader either refuses aliases or copies them, and bounds nesting
 * depth, nodes in all (copies included) and entries per collection, so any input costs time
 * and memory in proportion to its size and the bounds. */
#ifndef DLK_UTIL_YTREE_H
#define DLK_UTIL_YTREE_H

#include <stddef.h>

enum ynode_kind { YN_SCALAR, YN_MAP, YN_SEQ };

/* What a scalar means under the core schema (a quoted scalar is always a string). */
enum yscalar_type { YS_NULL, YS_BOOL, YS_INT, YS_FLOAT, YS_STR, YS_BADTAG };

struct ynode {
	enum ynode_kind kind;
	int line, col;       /* 1-based position of the node's start */
	int set_index;       /* -1: from the document; else which --set created it */
	char *tag;           /* explicit tag as libyaml gives it ("tag:yaml.org,2002:int", "!"), or NULL */
	int anchored;        /* the node carried an anchor */
	/* scalar */
	char *text;          /* NUL-terminated (embedded NULs are rejected when parsing) */
	int quoted;          /* not a plain scalar: always a string */
	/* mapping: keys[i] -> vals[i] (keys are scalars); sequence: vals[i] */
	struct ynode **keys, **vals;
	int n, cap;
};

/* What a reader accepts. */
struct ytree_opts {
	int max_depth;       /* nesting of mappings and sequences */
	long max_nodes;      /* nodes of the whole stream, keys and aliases' copies included */
	int max_items;       /* entries in one mapping or sequence; 0 = no bound */
	int aliases;         /* 1: an alias is a copy of its anchor's node; 0: aliases are refused */
};

enum ytree_problem {
	YTREE_SYNTAX,         /* libyaml refused the text: yaml_problem, yaml_context, byte */
	YTREE_MORE_DOCS,      /* ytree_parse(): a second document */
	YTREE_ALIAS,          /* an alias where they are refused (name) */
	YTREE_UNKNOWN_ALIAS,  /* an alias to no anchor seen before it in its document (name) */
	YTREE_ALIAS_KEY,      /* an alias as a mapping key */
	YTREE_ANCHOR_KEY,     /* an anchor on a mapping key (only where aliases are copied) */
	YTREE_NUL,            /* a scalar holds a NUL byte */
	YTREE_KEY_NOT_SCALAR, /* a mapping or sequence as a mapping key */
	YTREE_TOO_DEEP,       /* nesting deeper than max_depth */
	YTREE_TOO_MANY_NODES, /* more than max_nodes */
	YTREE_TOO_MANY_KEYS,  /* a mapping with more than max_items keys */
	YTREE_TOO_MANY_ITEMS, /* a sequence with more than max_items items */
};

/* Why reading stopped, for the caller to word (the project file and kubeconfig/template readers
 * word some problems differently). */
struct ytree_error {
	enum ytree_problem problem;
	int line, col;             /* 1-based position of the problem */
	char name[1024];           /* YTREE_ALIAS, YTREE_UNKNOWN_ALIAS: the alias */
	/* YTREE_SYNTAX: libyaml's words (static strings; yaml_problem NULL when it gave none) */
	const char *yaml_problem, *yaml_context;
	int context_line, context_col;
	int byte;                  /* an encoding error's offending byte, -1 when none */
};

/* Reads one YAML document. Returns 0 with *root set (NULL when the text holds no document), or
 * -1 with e filled (a second document is YTREE_MORE_DOCS). The caller frees *root. */
int ytree_parse(const char *text, size_t len, const struct ytree_opts *o, struct ynode **root,
                struct ytree_error *e);

/* How the reader meets a node: a mapping's key, a value (a scalar, or a mapping or sequence
 * that starts and is still empty), the end of a mapping or sequence. */
enum ytree_visit { YTREE_KEY, YTREE_VALUE, YTREE_END };

/* What ytree_parse_stream() calls; a non-zero return stops the reader and is returned by it. */
struct ytree_hooks {
	/* Optional: every node as the reader meets it, in the order of the text (aliases' copies
	 * excepted), for checks that should be reported in that order. */
	int (*node)(const struct ynode *n, enum ytree_visit v, void *ud);
	/* Each document's root, as soon as the document ends; the callee owns it. */
	int (*document)(struct ynode *root, void *ud);
	void *ud;
};

/* Reads every document of a stream. Returns 0 at the end of the stream, -1 with e filled when
 * the reader failed, or a hook's non-zero return. */
int ytree_parse_stream(const char *text, size_t len, const struct ytree_opts *o, const struct ytree_hooks *h,
                       struct ytree_error *e);

/* The problem in words ("unknown alias '*x'"), into buf, which is returned. */
const char *ytree_error_text(const struct ytree_error *e, const struct ytree_opts *o, char *buf, size_t len);

struct ynode *ynode_new(enum ynode_kind kind, int line, int col, int set_index);
struct ynode *ynode_scalar(const char *text, int quoted, int line, int col, int set_index);
/* Appends to a mapping (key, val) or a sequence (key NULL); the node takes ownership. */
void ynode_append(struct ynode *parent, struct ynode *key, struct ynode *val);
void ynode_free(struct ynode *n);

/* Core-schema type of a plain scalar's text. */
enum yscalar_type yscalar_classify(const char *text);
/* Core-schema type of a scalar node (honouring !!str, !!int, !!float, !!bool, !!null and the
 * non-specific "!"; any other tag, or a value its tag does not allow, is YS_BADTAG). */
enum yscalar_type ynode_type(const struct ynode *n);
int ynode_is_null(const struct ynode *n);
/* 1 when a scalar's text is true/True/TRUE (for a YS_BOOL node). */
int ynode_is_true(const struct ynode *n);
/* Converts an int / float scalar; 0 on success, -1 when not of that type or out of range. */
int ynode_int(const struct ynode *n, long long *out);
int ynode_float(const struct ynode *n, double *out);
/* Describes a node for messages ("a mapping", "a sequence", "the string \"3\"", "the integer 0",
 * "'lots'"), written into buf, which is returned. */
const char *ynode_describe(const struct ynode *n, char *buf, size_t len);

#endif
