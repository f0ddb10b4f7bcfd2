/* Syntax checks for the values a project file names: Kubernetes names, label keys and values,
 * quantities, cron schedules, image references, data source URLs.
 *
 * Each returns 0 when s is valid, or -1 and writes why (lowercase, no full stop) into why. */
#ifndef DLK_PROJECT_CHECK_H
#define DLK_PROJECT_CHECK_H

#include <stddef.h>

#include "lib/project/project.h"
#include "lib/util/buf.h"

/* RFC 1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most max characters (63 in Kubernetes). */
int check_dns_label(const char *s, size_t max, char *why, size_t why_len);
/* RFC 1123 subdomain: dot-separated labels, at most 253 characters. */
int check_dns_subdomain(const char *s, char *why, size_t why_len);
/* A Gateway reference: NAME or NAMESPACE/NAME. */
int check_gateway_ref(const char *s, char *why, size_t why_len);
/* Label key: [prefix/]name, prefix a DNS subdomain, name 1..63 of [A-Za-z0-9._-] with
 * alphanumeric ends. */
int check_label_key(const char *s, char *why, size_t why_len);
/* Label value: empty, or 1..63 of [A-Za-z0-9._-] with alphanumeric ends. */
int check_label_value(const char *s, char *why, size_t why_len);
/* Kubernetes resource.Quantity: [+-]number[suffix], suffix Ki..Ei, n u m k M G T P E or e<exp>.
 * Negative quantities are refused (no resource amount is negative). */
int check_quantity(const char *s, char *why, size_t why_len);
/* A quantity of bytes as a whole number (plain integers are accepted too); *out in bytes. */
int parse_bytes(const char *s, long long *out, char *why, size_t why_len);
/* Five-field cron (minute hour day-of-month month day-of-week) with *, lists, ranges, steps,
 * JAN..DEC and SUN..SAT, or one of @yearly @annually @monthly @weekly @daily @midnight @hourly. */
int check_cron(const char *s, char *why, size_t why_len);
/* Container image reference: [registry[:port]/]path[:tag][@algo:hex]. */
int check_image(const char *s, char *why, size_t why_len);
/* Data source: file:///abs/path, https://host/..., http://host/..., pvc://claim/path or a bare
 * path (no scheme). */
int check_source_url(const char *s, char *why, size_t why_len);
/* Dataset store: a directory (a bare path or file:///abs), s3://BUCKET[/PREFIX] or
 * pvc://CLAIM[/PATH]. */
int check_store_url(const char *s, char *why, size_t why_len);

/* What will not work when a loaded project runs in a cluster, though it runs on this machine:
 * data on this machine's disk (file:// or a bare path, a store in a directory), an image that
 * names no registry (the default, what `make image` builds, is on no registry), no storage (the
 * checkpoints and the model bundle are written in the pod and go with it). Appends one line per
 * problem to out, "KEY: what is wrong; what to do", lines separated by '\n'; returns how many. */
int project_cluster_warnings(const struct dlk_project *spec, struct dlk_buf *out);

#endif
