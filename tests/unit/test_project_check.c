/* The value checks behind project_load(): names, labels, quantities, cron, images, URLs. */
#include "tests/unit/check.h"
#include "lib/project/check.h"
#include "tests/unit/test_project.h"

static char why[256];

#define OK(fn, s) CHECK_MSG(fn(s, why, sizeof(why)) == 0, "%s accepts '%s' (%s)", #fn, s, why)
#define BAD(fn, s, msg)                                                                  \
	do {                                                                             \
		why[0] = '\0';                                                           \
		CHECK_MSG(fn(s, why, sizeof(why)) == -1, "%s rejects '%s'", #fn, s);     \
		CHECK_CONTAINS(why, msg);                                                \
	} while (0)

static int label63(const char *s, char *w, size_t l) { return check_dns_label(s, 63, w, l); }

int main(void)
{
	/* DNS-1123 labels and subdomains */
	OK(label63, "fashion-mlp");
	OK(label63, "a");
	OK(label63, "0abc9");
	BAD(label63, "", "must not be empty");
	BAD(label63, "Fashion", "lowercase letters, digits and '-'");
	BAD(label63, "a_b", "lowercase letters");
	BAD(label63, "-a", "must start and end");
	BAD(label63, "a-", "must start and end");
	BAD(label63, "a.b", "lowercase letters");
	BAD(label63, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "at most 63 characters (it has 64)");
	OK(check_dns_subdomain, "high-priority.example.com");
	BAD(check_dns_subdomain, "a..b", "DNS-1123 subdomain");
	BAD(check_dns_subdomain, ".a", "DNS-1123 subdomain");
	BAD(check_dns_subdomain, "A.b", "DNS-1123 subdomain");

	/* label keys and values */
	OK(check_label_key, "team");
	OK(check_label_key, "app.kubernetes.io/name");
	OK(check_label_key, "Team_1.x-y");
	BAD(check_label_key, "/name", "prefix before '/'");
	BAD(check_label_key, "Example.com/name", "the prefix must be lowercase");
	BAD(check_label_key, "example.com/", "the name part must not be empty");
	BAD(check_label_key, "a/b/c", "may only contain");
	BAD(check_label_key, "_x", "must start and end");
	OK(check_label_value, "");
	OK(check_label_value, "NVIDIA-H100-80GB-HBM3");
	BAD(check_label_value, "a b", "may only contain");
	BAD(check_label_value, "x-", "must start and end");
	BAD(check_label_value, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	    "at most 63 characters");

	/* quantities (Kubernetes' grammar) */
	OK(check_quantity, "2");
	OK(check_quantity, "500m");
	OK(check_quantity, "1.5");
	OK(check_quantity, ".5");
	OK(check_quantity, "4Gi");
	OK(check_quantity, "1G");
	OK(check_quantity, "1E");
	OK(check_quantity, "1e3");
	OK(check_quantity, "1E-3");
	OK(check_quantity, "+2Ki");
	OK(check_quantity, "100n");
	BAD(check_quantity, "", "is not a quantity");
	BAD(check_quantity, "Gi", "is not a quantity");
	BAD(check_quantity, "4GB", "unknown suffix 'GB'");
	BAD(check_quantity, "4gi", "unknown suffix 'gi'");
	BAD(check_quantity, "-1", "must not be negative");
	BAD(check_quantity, "1.2.3", "unknown suffix '.3'");
	BAD(check_quantity, "1 Gi", "unknown suffix ' Gi'");
	BAD(check_quantity, "1e3x", "after the exponent");
	long long b = 0;
	CHECK(parse_bytes("8Gi", &b, why, sizeof(why)) == 0 && b == 8LL << 30);
	CHECK(parse_bytes("1.5Ki", &b, why, sizeof(why)) == 0 && b == 1536);
	CHECK(parse_bytes("2k", &b, why, sizeof(why)) == 0 && b == 2000);
	CHECK(parse_bytes("1e6", &b, why, sizeof(why)) == 0 && b == 1000000);
	CHECK(parse_bytes("4096", &b, why, sizeof(why)) == 0 && b == 4096);
	CHECK(parse_bytes("0", &b, why, sizeof(why)) == -1);
	CHECK(parse_bytes("1.5", &b, why, sizeof(why)) == -1);
	CHECK(parse_bytes("9Ei", &b, why, sizeof(why)) == -1);
	CHECK_CONTAINS(why, "too large");

	/* cron */
	OK(check_cron, "0 3 * * *");
	OK(check_cron, "*/15 * * * *");
	OK(check_cron, "0 0-23/2 1,15 JAN-jun MON-FRI");
	OK(check_cron, "0 0 ? * 7");
	OK(check_cron, "5   4 *   * sun");
	OK(check_cron, "@daily");
	OK(check_cron, "@hourly");
	OK(check_cron, "@annually");
	BAD(check_cron, "60 * * * *", "minute field '60' is not valid (values 0-59)");
	BAD(check_cron, "0 24 * * *", "hour field '24'");
	BAD(check_cron, "0 0 0 * *", "day of month field '0' is not valid (values 1-31)");
	BAD(check_cron, "0 0 * 13 *", "month field '13' is not valid (values 1-12 or JAN-DEC)");
	BAD(check_cron, "0 0 * FOO *", "month field 'FOO'");
	BAD(check_cron, "0 0 * * 8", "day of week field '8' is not valid (values 0-7 or SUN-SAT)");
	BAD(check_cron, "0 0 * * MON-", "day of week field 'MON-'");
	BAD(check_cron, "5-1 * * * *", "minute range '5-1' runs backwards");
	BAD(check_cron, "*/0 * * * *", "minute step in '*/0' must be a number from 1 to 59");
	BAD(check_cron, "1,,2 * * * *", "minute field");
	BAD(check_cron, "? * * * *", "minute field '?'");
	BAD(check_cron, "* * * *", "must have 5 fields");
	BAD(check_cron, "* * * * * *", "it has 6");
	BAD(check_cron, "", "it has 0");
	BAD(check_cron, "@reboot", "unknown schedule macro");
	BAD(check_cron, "CRON_TZ=UTC 0 3 * * *", "minute field 'CRON_TZ=UTC'");

	/* image references */
	OK(check_image, "dlk:0.1.0");
	OK(check_image, "dlk");
	OK(check_image, "registry.example.com/team/dlk:0.1.0");
	OK(check_image, "localhost:5000/dlk");
	OK(check_image, "localhost/dlk:latest");
	OK(check_image, "ghcr.io/a/b_c/d__e/f-g.h:v1.2_3-rc");
	OK(check_image, "dlk@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
	OK(check_image, "r.io:443/dlk:1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
	BAD(check_image, "", "must not be empty");
	BAD(check_image, "Dlk:1", "invalid repository name");
	BAD(check_image, "team/Dlk", "invalid repository name");
	BAD(check_image, "dlk:", "tag that is empty");
	BAD(check_image, "dlk:-x", "tag that does not start");
	BAD(check_image, "dlk:a/b", "invalid registry host");
	BAD(check_image, "dlk:a b", "tag with characters");
	BAD(check_image, "a//b", "invalid repository name");
	BAD(check_image, "a/b/", "invalid repository name");
	BAD(check_image, "host:99999999/x", "invalid registry host");
	BAD(check_image, "-r.io/x", "invalid registry host");
	BAD(check_image, "dlk@sha256:abc", "not lowercase hex");
	BAD(check_image, "dlk@sha256:0123456789abcdef0123456789abcdef0123456789abcdef", "not 64 hex digits");
	BAD(check_image, "dlk@md5", "not 'algorithm:hex'");
	BAD(check_image, "a..b", "invalid repository name");

	/* data source URLs */
	OK(check_source_url, "file:///usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
	OK(check_source_url, "https://example.com/data.tar?x=1");
	OK(check_source_url, "http://10.0.0.1:8080/d.csv");
	OK(check_source_url, "pvc://datasets/fashion/train.gz");
	OK(check_source_url, "data/train.csv");
	OK(check_source_url, "/abs/train.csv");
	BAD(check_source_url, "", "must not be empty");
	BAD(check_source_url, "s3://bucket/x", "unsupported scheme 's3'");
	BAD(check_source_url, "file://relative", "absolute path");
	BAD(check_source_url, "file:///", "absolute path");
	BAD(check_source_url, "https:///x", "has no host");
	BAD(check_source_url, "https://h/a b", "contains a space");
	BAD(check_source_url, "pvc://claim", "pvc://CLAIM/path");
	BAD(check_source_url, "pvc://claim/", "pvc://CLAIM/path");
	BAD(check_source_url, "pvc://Claim/x", "claim name");
	BAD(check_source_url, "/a\tb", "control character");

	/* what a cluster needs that a run here does not: each missing thing one line, with the fix */
	{
		struct dlk_buf w = DLK_BUF_INIT;
		struct dlk_project *p = load("name: demo\ndata: {train: {images: file:///d/i.gz, labels: /d/l.gz}}\n"
		                             "model: {input: [4], layers: [{dense: {units: 2}}]}\n");
		CHECK(p && project_cluster_warnings(p, &w) == 3);
		CHECK_CONTAINS(w.data, "data.train.images: 'file:///d/i.gz' is on this machine's disk");
		CHECK_CONTAINS(w.data, "\nimage: 'dlk:" DLK_VERSION "' names no registry");
		CHECK_CONTAINS(w.data, "set image: REGISTRY/dlk:" DLK_VERSION);
		CHECK_CONTAINS(w.data, "\nstorage: none, so the checkpoints and the model bundle are written inside the pod");
		project_free(p);
		dlk_buf_reset(&w);
		p = load("name: demo\nimage: registry.example.com/team/dlk:1\nstorage: {size: 1Gi}\n"
		         "data: {train: {images: https://e.org/i.gz, labels: pvc://data/l.gz}}\n"
		         "model: {input: [4], layers: [{dense: {units: 2}}]}\n");
		CHECK(p && project_cluster_warnings(p, &w) == 0 && !w.len);
		project_free(p);
		dlk_buf_reset(&w);
		/* a dataset's sources are paths inside it: its store is what must be reachable */
		p = load("name: demo\nimage: r.example.com/dlk:1\nstorage: {claim: ckpt}\n"
		         "data: {dataset: fashion@v1, store: ./datasets, train: {images: i.gz, labels: l.gz}}\n"
		         "model: {input: [4], layers: [{dense: {units: 2}}]}\n");
		CHECK_MSG(p != NULL, "dataset project loads: %s", spec_test_err.msg);
		CHECK(p && project_cluster_warnings(p, &w) == 1);
		CHECK_CONTAINS(w.data, "data.store: './datasets' is on this machine's disk");
		project_free(p);
		dlk_buf_release(&w);
	}

	return CHECK_DONE();
}
