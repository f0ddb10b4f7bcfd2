/* S3 response documents with libxml2's tree API. */
#include "lib/store/s3xml.h"

#include <errno.h>
#include <limits.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util/mem.h"

#define S3XML_MAX_ITEMS 100000

/* libxml2 would print parse errors to stderr itself; library code never prints */
static void quiet(void *ctx, const char *msg, ...)
{
	(void)ctx, (void)msg;
}

static xmlDocPtr parse(const char *body, size_t len)
{
	xmlParserCtxtPtr ctx;
	xmlDocPtr doc;

	if (!body || !len || len > S3XML_MAX_BYTES || len > INT_MAX)
		return NULL;
	ctx = xmlNewParserCtxt();
	if (!ctx)
		return NULL;
	xmlSetGenericErrorFunc(NULL, quiet);
	/* no network, no entity substitution (XML_PARSE_NOENT is left out), no DTD loading */
	doc = xmlCtxtReadMemory(ctx, body, (int)len, "s3.xml", NULL,
	                        XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_NOBLANKS);
	xmlFreeParserCtxt(ctx);
	/* S3 never sends a DTD; one could define entities that expand when text is read */
	if (doc && (doc->intSubset || doc->extSubset)) {
		xmlFreeDoc(doc);
		doc = NULL;
	}
	return doc;
}

static int is(const xmlNode *n, const char *name)
{
	return n && n->type == XML_ELEMENT_NODE && !strcmp((const char *)n->name, name);
}

static const xmlNode *child(const xmlNode *n, const char *name)
{
	for (const xmlNode *c = n ? n->children : NULL; c; c = c->next)
		if (is(c, name))
			return c;
	return NULL;
}

/* The text of n (its text children joined), owned by the caller; NULL when n is NULL. */
static char *text_of(const xmlNode *n)
{
	xmlChar *t;
	char *s;

	if (!n)
		return NULL;
	t = xmlNodeGetContent(n);
	s = xstrdup(t ? (const char *)t : "");
	xmlFree(t);
	return s;
}

static void copy_text(const xmlNode *n, char *out, size_t cap)
{
	char *t = text_of(n);

	snprintf(out, cap, "%s", t ? t : "");
	free(t);
}

static int parse_u64(const char *s, unsigned long long *v)
{
	char *end;

	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return -1;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno || *end ? -1 : 0;
}

static int bool_text(const xmlNode *n)
{
	char *t = text_of(n);
	int v = t && !strcmp(t, "true");

	free(t);
	return v;
}

int s3xml_error(const char *body, size_t len, struct s3_error *e)
{
	xmlDocPtr doc = parse(body, len);
	const xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;
	int rc = 0;

	memset(e, 0, sizeof(*e));
	if (is(root, "Error")) {
		copy_text(child(root, "Code"), e->code, sizeof(e->code));
		copy_text(child(root, "Message"), e->message, sizeof(e->message));
		/* a message is shown to the user: no control characters */
		for (char *p = e->message; *p; p++)
			if ((unsigned char)*p < 0x20)
				*p = ' ';
		for (char *p = e->code; *p; p++)
			if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
				*p = '?';
		rc = 1;
	}
	xmlFreeDoc(doc);
	return rc;
}

static int bad(struct dlk_err *err, const char *what)
{
	return dlk_errf(err, DLK_EXIT_CONNECT, "the object store answered with something that is not %s", what);
}

void s3_listing_release(struct s3_listing *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].key);
	free(l->v);
	free(l->next_token);
	memset(l, 0, sizeof(*l));
}

int s3xml_list_objects(const char *body, size_t len, struct s3_listing *out, struct dlk_err *err)
{
	xmlDocPtr doc = parse(body, len);
	const xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;
	struct s3_listing l = S3_LISTING_INIT;
	size_t cap = 0;
	int rc = -1;

	if (!is(root, "ListBucketResult")) {
		bad(err, "an object listing (ListBucketResult)");
		goto out;
	}
	for (const xmlNode *c = root->children; c; c = c->next) {
		char *k, *sz;
		unsigned long long size;
		if (!is(c, "Contents"))
			continue;
		if (l.n >= S3XML_MAX_ITEMS) {
			bad(err, "a listing of a sane size");
			goto out;
		}
		k = text_of(child(c, "Key"));
		sz = text_of(child(c, "Size"));
		if (!k || !*k || parse_u64(sz, &size)) {
			free(k);
			free(sz);
			bad(err, "an object listing (a Contents without Key or Size)");
			goto out;
		}
		free(sz);
		if (l.n == cap) {
			cap = cap ? cap * 2 : 64;
			l.v = xrealloc(l.v, cap * sizeof(*l.v));
		}
		l.v[l.n].key = k;
		l.v[l.n].size = size;
		l.n++;
	}
	l.truncated = bool_text(child(root, "IsTruncated"));
	l.next_token = text_of(child(root, "NextContinuationToken"));
	if (l.truncated && (!l.next_token || !*l.next_token)) {
		bad(err, "a listing that says where it goes on");
		goto out;
	}
	*out = l;
	memset(&l, 0, sizeof(l));
	rc = 0;
out:
	s3_listing_release(&l);
	xmlFreeDoc(doc);
	return rc;
}

int s3xml_upload_id(const char *body, size_t len, char **upload_id, struct dlk_err *err)
{
	xmlDocPtr doc = parse(body, len);
	const xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;
	char *id = is(root, "InitiateMultipartUploadResult") ? text_of(child(root, "UploadId")) : NULL;
	int rc = 0;

	if (!id || !*id || strlen(id) > 1024) {
		free(id);
		id = NULL;
		rc = bad(err, "the start of a multipart upload (InitiateMultipartUploadResult)");
	}
	*upload_id = id;
	xmlFreeDoc(doc);
	return rc;
}

int s3xml_find_upload(const char *body, size_t len, const char *key, char **upload_id, struct dlk_err *err)
{
	xmlDocPtr doc = parse(body, len);
	const xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;
	char *best = NULL, *best_when = NULL;
	int rc = -1;

	*upload_id = NULL;
	if (!is(root, "ListMultipartUploadsResult")) {
		bad(err, "a list of multipart uploads (ListMultipartUploadsResult)");
		goto out;
	}
	for (const xmlNode *c = root->children; c; c = c->next) {
		char *k, *id, *when;
		if (!is(c, "Upload"))
			continue;
		k = text_of(child(c, "Key"));
		id = text_of(child(c, "UploadId"));
		when = text_of(child(c, "Initiated"));
		if (k && id && *id && strlen(id) <= 1024 && !strcmp(k, key) &&
		    (!best || strcmp(when ? when : "", best_when ? best_when : "") >= 0)) {
			free(best);
			free(best_when);
			best = id;
			best_when = when;
			id = when = NULL;
		}
		free(k);
		free(id);
		free(when);
	}
	*upload_id = best;
	best = NULL;
	rc = 0;
out:
	free(best);
	free(best_when);
	xmlFreeDoc(doc);
	return rc;
}

void s3_parts_release(struct s3_parts *p)
{
	free(p->v);
	memset(p, 0, sizeof(*p));
}

int s3xml_list_parts(const char *body, size_t len, struct s3_parts *out, struct dlk_err *err)
{
	xmlDocPtr doc = parse(body, len);
	const xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;
	struct s3_parts p = S3_PARTS_INIT;
	size_t cap = 0;
	int rc = -1;

	if (!is(root, "ListPartsResult")) {
		bad(err, "a list of parts (ListPartsResult)");
		goto out;
	}
	for (const xmlNode *c = root->children; c; c = c->next) {
		char *num, *sz;
		unsigned long long n, size;
		if (!is(c, "Part"))
			continue;
		if (p.n >= 10000) {
			bad(err, "a list of at most 10000 parts");
			goto out;
		}
		num = text_of(child(c, "PartNumber"));
		sz = text_of(child(c, "Size"));
		if (parse_u64(num, &n) || n < 1 || n > 10000 || parse_u64(sz, &size)) {
			free(num);
			free(sz);
			bad(err, "a list of parts (a Part without PartNumber or Size)");
			goto out;
		}
		free(num);
		free(sz);
		if (p.n == cap) {
			cap = cap ? cap * 2 : 16;
			p.v = xrealloc(p.v, cap * sizeof(*p.v));
		}
		p.v[p.n].number = (int)n;
		p.v[p.n].size = size;
		copy_text(child(c, "ETag"), p.v[p.n].etag, sizeof(p.v[p.n].etag));
		p.n++;
	}
	p.truncated = bool_text(child(root, "IsTruncated"));
	if (p.truncated) {
		char *m = text_of(child(root, "NextPartNumberMarker"));
		unsigned long long v;
		if (parse_u64(m, &v) || v < 1 || v > 10000) {
			free(m);
			bad(err, "a list of parts that says where it goes on");
			goto out;
		}
		free(m);
		p.next_marker = (int)v;
	}
	*out = p;
	memset(&p, 0, sizeof(p));
	rc = 0;
out:
	s3_parts_release(&p);
	xmlFreeDoc(doc);
	return rc;
}

int s3xml_complete_ok(const char *body, size_t len, struct dlk_err *err)
{
	xmlDocPtr doc = parse(body, len);
	const xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;
	int rc = 0;

	if (is(root, "Error")) {
		struct s3_error e;
		s3xml_error(body, len, &e);
		rc = dlk_errf(err, DLK_EXIT_FAIL, "completing the upload failed: %s (%s)", e.message, e.code);
	} else if (!is(root, "CompleteMultipartUploadResult")) {
		rc = bad(err, "the end of a multipart upload (CompleteMultipartUploadResult)");
	}
	xmlFreeDoc(doc);
	return rc;
}
