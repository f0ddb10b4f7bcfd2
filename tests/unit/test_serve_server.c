/* The server in-process, over real HTTP (libcurl): health that tells the truth before and after
 * the models load, every route's status codes, limits, keep-alive, metrics and draining. The
 * model is a small untrained network written as a bundle here. */
#include "tests/unit/check.h"

#include <cJSON.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/nn/net.h"
#include "lib/serve/server.h"
#include "lib/train/bundle.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"

static char dir[256], bundle_path[300], base[64];
static CURL *curl;

static struct dlk_layer_spec layers[] = {
	{ .kind = DLK_LAYER_FLATTEN }, { .kind = DLK_LAYER_DENSE, .units = 8 }, { .kind = DLK_LAYER_RELU },
	{ .kind = DLK_LAYER_DENSE, .units = 3 },
};
static struct dlk_model model = { .input = { 1, 2, 2 }, .input_rank = 3, .layers = layers, .n_layers = 4, .init = "torch" };

/* a bundle of an untrained [1,2,2] -> 3 network, scaling raw v to (v/255 - 0.5) / 2 */
static void write_bundle(const char *path)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_net net = DLK_NET_INIT;
	struct dlk_data data = { .scale = 1.0f / 255, .mean = 0.5f, .std = 2.0f };
	char *classes[] = { "cat", "dog", "emu" };
	CHECK(dlk_net_build(&net, &model, "test", 3, dlk_backend_cpu(), &err) == 0 &&
	      dlk_net_init_params(&net, "torch", 11, &err) == 0);
	struct dlk_bundle_info info = { .name = "tiny", .model = &model, .net = &net, .classes = classes, .data = &data };
	CHECK_MSG(dlk_bundle_write(path, &info, &err) == 0, "a bundle is written (%s)", err.msg);
	dlk_net_release(&net);
}

static size_t collect(char *p, size_t size, size_t n, void *ud)
{
	dlk_buf_add(ud, p, size * n);
	return size * n;
}

/* One request; the status (0 when the connection failed). */
static long http(const char *method, const char *path, const char *body, long len, const char *hdr, struct dlk_buf *resp,
                 struct dlk_buf *headers)
{
	char url[256];
	struct curl_slist *h = NULL;
	long code = 0;

	snprintf(url, sizeof(url), "%s%s", base, path);
	dlk_buf_reset(resp);
	if (headers)
		dlk_buf_reset(headers);
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(curl, CURLOPT_NOBODY, !strcmp(method, "HEAD") ? 1L : 0L);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, body ? (len >= 0 ? len : (long)strlen(body)) : 0L);
	if (!body)
		curl_easy_setopt(curl, CURLOPT_HTTPGET, !strcmp(method, "GET") ? 1L : 0L);
	h = curl_slist_append(h, "Expect:");
	if (hdr)
		h = curl_slist_append(h, hdr);
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, resp);
	curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, headers ? collect : NULL);
	curl_easy_setopt(curl, CURLOPT_HEADERDATA, headers);
	if (curl_easy_perform(curl) == CURLE_OK)
		curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
	curl_slist_free_all(h);
	return code;
}

#define INFER "{\"id\":\"7\",\"inputs\":[{\"name\":\"input\",\"shape\":[2,1,2,2],\"datatype\":\"UINT8\",\"data\":[0,64,128,255,1,2,3,4]}]}"

static struct dlk_server *server(struct dlk_serving *cfg, const char *const *models, int n, struct dlk_err *err)
{
	struct dlk_server_opts o = { .cfg = cfg, .host = "127.0.0.1", .port = 0, .models = models, .n_models = n,
		                     .access_log_fd = -1, .be = dlk_backend_cpu(), .version = "9.9.9" };
	struct dlk_server *s = dlk_server_new(&o, err);
	if (s)
		snprintf(base, sizeof(base), "http://127.0.0.1:%d", dlk_server_port(s));
	return s;
}

static void test_lifecycle(struct dlk_serving *cfg)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_buf r = DLK_BUF_INIT, h = DLK_BUF_INIT;
	const char *models[] = { bundle_path };
	struct dlk_server *s = server(cfg, models, 1, &err);

	CHECK_MSG(s != NULL, "the server listens (%s)", err.msg);
	/* listening, not loaded: live, not ready, models unavailable */
	CHECK(http("GET", "/v2/health/live", NULL, 0, NULL, &r, NULL) == 200);
	CHECK(http("GET", "/v2/health/ready", NULL, 0, NULL, &r, NULL) == 400);
	CHECK_STR(r.data, "{\"ready\":false}");
	CHECK(http("GET", "/v2/models/tiny", NULL, 0, NULL, &r, NULL) == 503);
	CHECK_CONTAINS(r.data, "still loading");
	CHECK(http("POST", "/v2/models/tiny/infer", INFER, -1, NULL, &r, NULL) == 503);
	CHECK(http("GET", "/v2/models/tiny/ready", NULL, 0, NULL, &r, NULL) == 400);
	CHECK_MSG(dlk_server_start(s, NULL, &err) == 0, "the model loads and warms up (%s)", err.msg);
	CHECK(http("GET", "/v2/health/ready", NULL, 0, NULL, &r, NULL) == 200);
	CHECK(http("HEAD", "/v2/health/ready", NULL, 0, NULL, &r, NULL) == 200 && r.len == 0);
	CHECK(http("GET", "/v2/models/tiny/ready", NULL, 0, NULL, &r, NULL) == 200);

	/* routes */
	CHECK(http("GET", "/v2", NULL, 0, NULL, &r, NULL) == 200);
	CHECK_CONTAINS(r.data, "\"version\":\"9.9.9\"");
	CHECK(http("GET", "/v2/models/tiny", NULL, 0, NULL, &r, NULL) == 200);
	CHECK_CONTAINS(r.data, "\"shape\":[-1,1,2,2]");
	CHECK(http("GET", "/v2/models/tiny/versions/1", NULL, 0, NULL, &r, NULL) == 200);
	CHECK(http("GET", "/v2/models/tiny/versions/2", NULL, 0, NULL, &r, NULL) == 404);
	CHECK_CONTAINS(r.data, "has no version '2'");
	CHECK(http("GET", "/v2/models/nope", NULL, 0, NULL, &r, NULL) == 404);
	CHECK_STR(r.data, "{\"error\":\"unknown model 'nope' (models here are: tiny)\"}");
	CHECK(http("GET", "/v2/models/tinx", NULL, 0, NULL, &r, NULL) == 404);
	CHECK_STR(r.data, "{\"error\":\"unknown model 'tinx' (did you mean 'tiny'?)\"}");
	CHECK(http("GET", "/v2/models/nope/ready", NULL, 0, NULL, &r, NULL) == 404);
	CHECK(http("GET", "/v3/anything", NULL, 0, NULL, &r, NULL) == 404);
	CHECK(http("GET", "/v2/models/tiny/infer", NULL, 0, NULL, &r, &h) == 405);
	CHECK_CONTAINS(h.data, "Allow: POST");
	CHECK(http("DELETE", "/v2/health/ready", NULL, 0, NULL, &r, NULL) == 405);
	CHECK(http("GET", "/v1/models/tiny", NULL, 0, NULL, &r, NULL) == 200);
	CHECK_CONTAINS(r.data, "\"state\":\"AVAILABLE\"");
	CHECK(http("GET", "/v1/models/tiny/metadata", NULL, 0, NULL, &r, NULL) == 200);
	CHECK(http("POST", "/v1/models/tiny:classify", "{}", -1, NULL, &r, NULL) == 501);
	CHECK(http("GET", "/", NULL, 0, NULL, &r, NULL) == 200);

	/* inference, JSON and TF Serving, and the same rows through both agree */
	CHECK(http("POST", "/v2/models/tiny/infer", INFER, -1, NULL, &r, NULL) == 200);
	cJSON *j = cJSON_Parse(r.data);
	cJSON *logits = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "outputs"), 1), "data");
	CHECK_MSG(j && cJSON_GetArraySize(logits) == 6, "infer answers 2 rows of 3 logits: %s", r.data);
	double v2 = logits ? cJSON_GetArrayItem(logits, 4)->valuedouble : 0;
	cJSON_Delete(j);
	CHECK(http("POST", "/v1/models/tiny:predict", "{\"instances\":[[0,64,128,255],[1,2,3,4]]}", -1, NULL, &r, NULL) == 200);
	j = cJSON_Parse(r.data);
	cJSON *p1 = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "predictions"), 1), "logits");
	CHECK(p1 && cJSON_GetArrayItem(p1, 1)->valuedouble == v2);
	cJSON_Delete(j);
	CHECK(http("POST", "/v2/models/tiny/infer", "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,3],\"datatype\":\"FP32\",\"data\":[1,2,3]}]}",
	           -1, NULL, &r, NULL) == 400);
	CHECK_CONTAINS(r.data, "does not fit the model's [-1,1,2,2] (or [-1,4])");
	CHECK(http("POST", "/v2/models/tiny/infer", "{\"inputs\":", -1, NULL, &r, NULL) == 400);
	CHECK_CONTAINS(r.data, "invalid JSON at byte");
	CHECK(http("POST", "/v2/models/tiny/infer", INFER, -1, "Content-Encoding: gzip", &r, NULL) == 400);
	CHECK(http("POST", "/v2/models/tiny/infer", INFER, -1, "Inference-Header-Content-Length: x", &r, NULL) == 400);
	CHECK(http("POST", "/v1/models/tiny:predict", INFER, -1, "Inference-Header-Content-Length: 3", &r, NULL) == 400);

	/* limits: the body (by Content-Length, and as it arrives) and the JSON depth */
	char *big = xmalloc(5000);
	memset(big, ' ', 5000);
	CHECK(http("POST", "/v2/models/tiny/infer", big, 5000, NULL, &r, NULL) == 413);
	CHECK_CONTAINS(r.data, "over the limit of 4096 bytes (serving.max_request_bytes)");
	long st = http("POST", "/v2/models/tiny/infer", big, 5000, "Transfer-Encoding: chunked", &r, NULL);
	CHECK_MSG(st == 413, "a chunked body is stopped at the limit (%ld: %s)", st, r.data);
	free(big);
	struct dlk_buf deep = DLK_BUF_INIT;
	dlk_buf_adds(&deep, "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":");
	for (int i = 0; i < 40; i++)
		dlk_buf_addc(&deep, '[');
	for (int i = 0; i < 40; i++)
		dlk_buf_addc(&deep, ']');
	dlk_buf_adds(&deep, "}]}");
	CHECK(http("POST", "/v2/models/tiny/infer", deep.data, -1, NULL, &r, NULL) == 400);
	CHECK_CONTAINS(r.data, "JSON nesting deeper than 16");
	dlk_buf_release(&deep);

	/* keep-alive: a second request reuses the connection */
	long connects = -1;
	http("GET", "/v2/health/live", NULL, 0, NULL, &r, NULL);
	http("POST", "/v2/models/tiny/infer", INFER, -1, NULL, &r, NULL);
	curl_easy_getinfo(curl, CURLINFO_NUM_CONNECTS, &connects);
	CHECK_MSG(connects == 0, "an inference reuses the kept-alive connection (%ld new connections)", connects);

	/* metrics */
	CHECK(http("GET", "/metrics", NULL, 0, NULL, &r, &h) == 200);
	CHECK_CONTAINS(h.data, "text/plain; version=0.0.4");
	CHECK_CONTAINS(r.data, "dlk_inference_request_success_total{model=\"tiny\"} 3");
	CHECK_CONTAINS(r.data, "dlk_inference_request_failure_total{model=\"tiny\",reason=\"too_large\"} 2");
	CHECK_CONTAINS(r.data, "dlk_inference_count_total{model=\"tiny\"} 7"); /* 2 + 2 + 2 rows, and the warm-up's */
	CHECK_CONTAINS(r.data, "dlk_inference_request_duration_seconds_count{model=\"tiny\"} 3");

	/* drain: not ready, inferences refused and the connection closed, the rest still answered */
	CHECK(dlk_server_drain(s, 5) == 0);
	CHECK(http("GET", "/v2/health/ready", NULL, 0, NULL, &r, NULL) == 400);
	CHECK(http("GET", "/v2/health/live", NULL, 0, NULL, &r, NULL) == 200);
	CHECK(http("POST", "/v2/models/tiny/infer", INFER, -1, NULL, &r, &h) == 503);
	CHECK_CONTAINS(r.data, "shutting down");
	CHECK_CONTAINS(h.data, "Connection: close");
	CHECK(http("GET", "/v1/models/tiny", NULL, 0, NULL, &r, NULL) == 200);
	CHECK_CONTAINS(r.data, "UNLOADING");
	CHECK(http("GET", "/metrics", NULL, 0, NULL, &r, NULL) == 200);
	CHECK_CONTAINS(r.data, "dlk_inference_request_failure_total{model=\"tiny\",reason=\"unavailable\"} 1");
	CHECK_CONTAINS(r.data, "dlk_server_draining 1");
	dlk_server_free(s);
	dlk_buf_release(&r);
	dlk_buf_release(&h);
}

struct drainer {
	struct dlk_server *s;
	long left;
};

static void *drain_thread(void *arg)
{
	struct drainer *d = arg;
	d->left = dlk_server_drain(d->s, 5);
	return NULL;
}

/* serving.drain_delay_s: readiness fails at once, requests are still answered for the delay */
static void test_drain_delay(struct dlk_serving *cfg)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_buf r = DLK_BUF_INIT;
	struct dlk_serving c2 = *cfg;
	const char *models[] = { bundle_path };
	struct drainer d = { NULL, -1 };
	pthread_t th;

	c2.drain_delay_s = 2;
	d.s = server(&c2, models, 1, &err);
	CHECK(d.s && dlk_server_start(d.s, NULL, &err) == 0);
	pthread_create(&th, NULL, drain_thread, &d);
	usleep(300000);
	CHECK(http("GET", "/v2/health/ready", NULL, 0, NULL, &r, NULL) == 400);
	CHECK_MSG(http("POST", "/v2/models/tiny/infer", INFER, -1, NULL, &r, NULL) == 200,
	          "during serving.drain_delay_s an inference is still answered");
	pthread_join(th, NULL);
	CHECK(d.left == 0);
	CHECK(http("POST", "/v2/models/tiny/infer", INFER, -1, NULL, &r, NULL) == 503);
	dlk_server_free(d.s);
	dlk_buf_release(&r);
}

static void test_refusals(struct dlk_serving *cfg)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_server *s;
	char bad[320], named[320];

	/* a damaged bundle is refused before the server says it is ready */
	snprintf(bad, sizeof(bad), "%s/bad.dlk", dir);
	FILE *f = fopen(bundle_path, "rb"), *g = fopen(bad, "wb");
	char buf[65536];
	size_t n = fread(buf, 1, sizeof(buf), f);
	buf[n - 2000] ^= 0x55; /* inside the weights */
	fwrite(buf, 1, n, g);
	fclose(f);
	fclose(g);
	const char *m1[] = { bad };
	s = server(cfg, m1, 1, &err);
	CHECK(s && dlk_server_start(s, NULL, &err) == -1 && err.code == DLK_EXIT_CONFIG);
	CHECK_CONTAINS(err.msg, "bad.dlk");
	dlk_server_free(s);

	/* two models of one name; then named apart */
	const char *m2[] = { bundle_path, bundle_path };
	s = server(cfg, m2, 2, &err);
	CHECK(s && dlk_server_start(s, NULL, &err) == -1);
	CHECK_CONTAINS(err.msg, "are both named 'tiny'");
	dlk_server_free(s);
	snprintf(named, sizeof(named), "other=%s", bundle_path);
	const char *m3[] = { bundle_path, named };
	s = server(cfg, m3, 2, &err);
	CHECK(s && dlk_server_start(s, NULL, &err) == 0);
	struct dlk_buf r = DLK_BUF_INIT;
	CHECK(http("GET", "/v2/models/other", NULL, 0, NULL, &r, NULL) == 200);
	/* a front end of its own runs rows through the same batcher */
	struct dlk_serve_model *m = dlk_server_model(s, "other");
	float x[2 * 4], y[2 * 3];
	CHECK(m && !dlk_server_model(s, "nope") && m->sig.in_size == 4 && m->sig.n_classes == 3);
	CHECK(m && dlk_serve_convert_doubles(&m->sig, DLK_DT_FP64, (const double[8]){ 0, 64, 128, 255, 1, 2, 3, 4 }, 8, x, &(size_t){ 0 }) == 0 &&
	      dlk_batcher_run(m->batcher, x, 2, y, &err) == 0);
	CHECK(http("POST", "/v2/models/other/infer", INFER, -1, NULL, &r, NULL) == 200);
	dlk_buf_release(&r);
	dlk_server_free(s);

	/* more compute than cores */
	struct dlk_serving c2 = *cfg;
	c2.workers = dlk_serve_cores();
	c2.threads = 2;
	s = server(&c2, m1, 1, &err);
	CHECK(!s && err.code == DLK_EXIT_USAGE);
	CHECK_CONTAINS(err.msg, "BLAS threads is more than the");
	CHECK(dlk_serve_cores() >= 1);
}

int main(void)
{
	struct dlk_serving cfg;
	struct dlk_err err = DLK_ERR_INIT;
	const char *sets[] = { "serving.max_request_bytes=4096", "serving.max_json_depth=16" };

	snprintf(dir, sizeof(dir), "%s/dlk-serve-test.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir))
		return 1;
	snprintf(bundle_path, sizeof(bundle_path), "%s/tiny.dlk", dir);
	write_bundle(bundle_path);
	CHECK(project_serving_load(sets, 2, &cfg, &err) == 0 && cfg.max_batch == 64 && cfg.max_request_bytes == 4096);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	curl = curl_easy_init();
	test_lifecycle(&cfg);
	test_drain_delay(&cfg);
	test_refusals(&cfg);
	curl_easy_cleanup(curl);
	curl_global_cleanup();
	project_serving_release(&cfg);
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		return 1;
	return CHECK_DONE();
}
