/* The XML documents an S3-compatible server answers with, read with libxml2 (no network, no
 * entity expansion, no DTD): errors, object listings, multipart uploads and their parts. Element
 * names are matched by local name, so a document with or without the S3 namespace reads the
 * same. Every reader bounds what it keeps. */
#ifndef DLK_STORE_S3XML_H
#define DLK_STORE_S3XML_H

#include <stddef.h>

#include "lib/util/err.h"

#define S3XML_MAX_BYTES (16u << 20)

/* <Error><Code>..</Code><Message>..</Message></Error>: 1 when body is one (code and message
 * filled, truncated to fit), 0 when it is not. */
struct s3_error {
	char code[64];
	char message[512];
};
int s3xml_error(const char *body, size_t len, struct s3_error *e);

/* ListObjectsV2 (<ListBucketResult>): each <Contents> key and size, and where to go on. */
struct s3_object {
	char *key;
	unsigned long long size;
};
struct s3_listing {
	struct s3_object *v;
	size_t n;
	int truncated;
	char *next_token;           /* NextContinuationToken, or NULL */
};
#define S3_LISTING_INIT { NULL, 0, 0, NULL }
int s3xml_list_objects(const char *body, size_t len, struct s3_listing *out, struct dlk_err *err);
void s3_listing_release(struct s3_listing *l);

/* InitiateMultipartUploadResult: the UploadId (caller frees). */
int s3xml_upload_id(const char *body, size_t len, char **upload_id, struct dlk_err *err);

/* ListMultipartUploadsResult: the UploadId of the upload of `key` initiated last (its Initiated
 * text compared as written, ISO 8601), or *upload_id NULL when there is none. */
int s3xml_find_upload(const char *body, size_t len, const char *key, char **upload_id, struct dlk_err *err);

/* ListPartsResult: the parts, and the marker to go on from when truncated. */
struct s3_part {
	int number;                 /* 1..10000 */
	unsigned long long size;
	char etag[128];             /* as sent, quotes included */
};
struct s3_parts {
	struct s3_part *v;
	size_t n;
	int truncated;
	int next_marker;
};
#define S3_PARTS_INIT { NULL, 0, 0, 0 }
int s3xml_list_parts(const char *body, size_t len, struct s3_parts *out, struct dlk_err *err);
void s3_parts_release(struct s3_parts *p);

/* CompleteMultipartUploadResult: 0 when it is one, -1 (err: the Error's code and message, or
 * "unexpected answer") otherwise; S3 may answer 200 and then an Error. */
int s3xml_complete_ok(const char *body, size_t len, struct dlk_err *err);

#endif
