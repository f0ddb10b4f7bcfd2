/* The GPU samples a user's program's supervisor publishes for its processes (lib/program/gpus.h):
 * the "gpus" array from the same builder as dlk's own rank 0 (lib/train/progress.h), and the
 * dlk_gpu_* series of every rank on the one metrics endpoint (lib/trainer/metrics.h): a series a
 * rank and GPU, a new sample of the same pair replacing the last, what a GPU does not report left
 * out, at most DLK_TRAIN_METRICS_MAX_GPUS pairs. */
#include "tests/unit/check.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "lib/train/progress.h"
#include "lib/trainer/metrics.h"
#include "lib/util/mem.h"

/* GET /metrics on 127.0.0.1:port: the whole answer (the caller frees) */
static char *scrape(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct timeval tv = { 10, 0 };
	const char *req = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	size_t cap = 1 << 20, got = 0;
	char *buf = xcalloc(cap, 1);
	ssize_t n;
	int s = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) || write(s, req, strlen(req)) < 0) {
		close(s);
		return buf;
	}
	while (got + 1 < cap && (n = read(s, buf + got, cap - 1 - got)) > 0)
		got += (size_t)n;
	close(s);
	return buf;
}

static int count(const char *s, const char *what)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

int main(void)
{
	struct dlk_rank_gpu g[2] = { { 0, 1, 91, 21474836480.0, 85899345920.0, -1, 1755 },
		                     { 1, 0, 2, 10737418240.0, 85899345920.0, 412, 1755 } };
	struct dlk_train_event ev;
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_train_metrics *m;
	cJSON *a, *p;
	char *s, *t;

	/* the supervisor's array is the one dlk_progress_json writes for the same samples */
	a = dlk_progress_gpus(g, 2);
	s = cJSON_PrintUnformatted(a);
	CHECK_STR(s, "[{\"rank\":0,\"gpu\":1,\"utilization\":91,\"memoryUsed\":21474836480,\"memoryTotal\":85899345920,"
	             "\"smClockMhz\":1755},{\"rank\":1,\"gpu\":0,\"utilization\":2,\"memoryUsed\":10737418240,"
	             "\"memoryTotal\":85899345920,\"powerWatts\":412,\"smClockMhz\":1755}]");
	memset(&ev, 0, sizeof(ev));
	ev.kind = DLK_TRAIN_STEP;
	ev.rank_gpu = g;
	ev.n_rank_gpu = 2;
	t = dlk_progress_json(&ev, 0, 0, "2026-01-01T00:00:00Z");
	p = cJSON_Parse(t);
	free(t);
	t = cJSON_PrintUnformatted(cJSON_GetObjectItem(p, DLK_PROGRESS_GPUS));
	CHECK_STR(t, s);
	free(t);
	free(s);
	cJSON_Delete(p);
	cJSON_Delete(a);

	/* one endpoint, both ranks' series */
	m = dlk_train_metrics_start(0, 0, 2, NULL, 0, &err);
	CHECK(m != NULL);
	if (!m)
		return CHECK_DONE();
	dlk_train_metrics_rank_gpu(m, &g[0]);
	dlk_train_metrics_rank_gpu(m, &g[1]);
	g[1].util_percent = 7; /* a new sample of rank 1's GPU replaces the last */
	dlk_train_metrics_rank_gpu(m, &g[1]);
	s = scrape(dlk_train_metrics_port(m));
	CHECK(strstr(s, "\ndlk_gpu_utilization{rank=\"0\",gpu=\"1\"} 0.91000000000000003\n") != NULL);
	CHECK(strstr(s, "\ndlk_gpu_utilization{rank=\"1\",gpu=\"0\"} 0.070000000000000007\n") != NULL);
	CHECK(count(s, "dlk_gpu_utilization{") == 2);
	CHECK(count(s, "# TYPE dlk_gpu_utilization gauge") == 1);
	CHECK(strstr(s, "\ndlk_gpu_memory_used_bytes{rank=\"1\",gpu=\"0\"} 10737418240\n") != NULL);
	/* rank 0's GPU reports no power: its series is not written, rank 1's is */
	CHECK(count(s, "dlk_gpu_power_watts{") == 1);
	CHECK(strstr(s, "\ndlk_gpu_power_watts{rank=\"1\",gpu=\"0\"} 412\n") != NULL);
	CHECK(count(s, "dlk_gpu_sm_clock_hertz{") == 2);
	free(s);

	/* bounded: 100 ranks give DLK_TRAIN_METRICS_MAX_GPUS series a family */
	for (int i = 0; i < 100; i++) {
		struct dlk_rank_gpu x = { i, i % 8, 50, 1e9, 8e10, 300, 1500 };
		dlk_train_metrics_rank_gpu(m, &x);
	}
	s = scrape(dlk_train_metrics_port(m));
	CHECK(count(s, "dlk_gpu_utilization{") == DLK_TRAIN_METRICS_MAX_GPUS);
	free(s);
	dlk_train_metrics_stop(m);
	return CHECK_DONE();
}
