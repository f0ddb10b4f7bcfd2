/* The run history (lib/runs): records (ids, outcomes, the checker), the directory store (list
 * newest first, get by id or prefix, damaged files counted, data lookups) and the ConfigMap
 * store against the test API server (a missing ConfigMap, records written by merge patch,
 * the size bound dropping the oldest runs and counting them). */
#include "tests/unit/check.h"
#include "tests/unit/test_kube_server.h"

#include <cJSON.h>

#include "lib/kube/api.h"
#include "lib/kube/client_impl.h"
#include "lib/runs/runs.h"
#include "lib/util/buf.h"
#include "lib/util/fsutil.h"
#include "lib/util/mem.h"

#include <unistd.h>

static struct kt_server srv;

static cJSON *record(const char *project, const char *id, const char *started, const char *train_sha)
{
	cJSON *r = dlk_run_record_new(project, id), *data = cJSON_CreateArray(), *d = cJSON_CreateObject();

	dlk_run_set_str(r, "started_at", started);
	cJSON_AddStringToObject(d, "split", "train");
	cJSON_AddStringToObject(d, "url", "train.csv");
	cJSON_AddStringToObject(d, "sha256", train_sha);
	cJSON_AddItemToArray(data, d);
	dlk_run_set_item(r, "data", data);
	return r;
}

static int check_text(const char *text, char *msg, size_t n)
{
	struct dlk_err err = DLK_ERR_INIT;
	cJSON *r = dlk_run_record_parse(text, strlen(text), "'r.json'", &err);

	snprintf(msg, n, "%.500s", err.msg);
	cJSON_Delete(r);
	return r ? 0 : err.code;
}

#define SHA_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define SHA_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static void test_records(void)
{
	char id[37], id2[37], msg[512];
	struct dlk_err err = DLK_ERR_INIT;
	cJSON *r;

	CHECK(dlk_run_new_id(id, &err) == 0 && dlk_run_new_id(id2, &err) == 0);
	CHECK_MSG(strlen(id) == 36 && id[8] == '-' && id[14] == '4' && strchr("89ab", id[19]), "a run id is a UUID v4: %s", id);
	CHECK(strcmp(id, id2) != 0);
	for (int o = DLK_RUN_RUNNING; o <= DLK_RUN_SKIPPED; o++)
		CHECK(dlk_run_outcome_parse(dlk_run_outcome_name(o)) == o);
	CHECK(dlk_run_outcome_parse("won") == -1);

	r = dlk_run_record_new("p", id);
	CHECK(dlk_run_record_check(r, "r", &err) == 0);
	CHECK(dlk_run_outcome(r) == DLK_RUN_RUNNING && !strcmp(dlk_run_project(r), "p"));
	dlk_run_add_world(r, 4);
	dlk_run_add_world(r, 4);
	dlk_run_add_world(r, 2);
	dlk_run_count_restart(r);
	dlk_run_count_restart(r);
	char *s = cJSON_PrintUnformatted(dlk_run_info(r));
	CHECK_MSG(strstr(s, "\"worlds\":[4,2]") && strstr(s, "\"restarts\":2"), "worlds recorded once per change: %s", s);
	free(s);
	dlk_run_set_failure(r, 3, DLK_EXIT_RESTARTABLE, "lost rank 3");
	s = cJSON_PrintUnformatted(dlk_run_info(r));
	CHECK_MSG(strstr(s, "\"failure\":{\"rank\":3,\"exit_code\":75,\"class\":\"restartable\",\"message\":\"lost rank 3\"}"),
	          "the failure names rank, code, class and message: %s", s);
	free(s);
	CHECK(dlk_run_record_check(r, "r", &err) == 0);
	cJSON_Delete(r);

	/* records read from outside are checked, and errors name the field */
	CHECK(check_text("{\"format\":\"dlk-run\",\"version\":1,\"name\":\"p\",\"run\":{\"id\":\"a1b2\",\"project\":\"p\","
	                 "\"outcome\":\"succeeded\",\"started_at\":\"2026-01-01T00:00:00.000Z\"}}",
	                 msg, sizeof(msg)) == 0);
	CHECK(check_text("{\"format\":\"dlk-run\",\"version\":1,\"name\":\"p\",\"run\":{\"id\":\"../x\",\"project\":\"p\","
	                 "\"outcome\":\"succeeded\",\"started_at\":\"2026-01-01T00:00:00.000Z\"}}",
	                 msg, sizeof(msg)) == DLK_EXIT_CONFIG);
	CHECK_MSG(strstr(msg, "'r.json'") && strstr(msg, "id"), "a path in an id is refused: %s", msg);
	CHECK(check_text("{\"format\":\"dlk-run\",\"version\":1,\"name\":\"p\",\"run\":{\"id\":\"a1b2\",\"project\":\"p\","
	                 "\"outcome\":\"won\",\"started_at\":\"2026-01-01T00:00:00.000Z\"}}",
	                 msg, sizeof(msg)) == DLK_EXIT_CONFIG);
	CHECK_MSG(strstr(msg, "outcome"), "an unknown outcome is named: %s", msg);
	CHECK(check_text("{\"format\":\"dlk-run\",\"version\":1,\"name\":\"p\",\"run\":{\"id\":\"a1b2\",\"project\":\"p\","
	                 "\"outcome\":\"running\",\"started_at\":\"2026-01-01T00:00:00.000Z\",\"worlds\":[2,-1]}}",
	                 msg, sizeof(msg)) == DLK_EXIT_CONFIG);
	CHECK_MSG(strstr(msg, "worlds"), "a negative world size is named: %s", msg);
	CHECK(check_text("{\"format\":\"dlk-run\",\"version\":1,\"name\":\"p\",\"run\":{\"id\":\"a1b2\",\"project\":\"p\","
	                 "\"outcome\":\"running\",\"outcome\":\"won\",\"started_at\":\"2026-01-01T00:00:00.000Z\"}}",
	                 msg, sizeof(msg)) == DLK_EXIT_CONFIG);
	CHECK_MSG(strstr(msg, "\"outcome\" appears twice"), "a member given twice is refused: %s", msg);
	CHECK(check_text("{\"format\":\"dlk-run\",\"version\":1,\"name\":\"p\",\"run\":{\"id\":\"a1", msg, sizeof(msg)) ==
	      DLK_EXIT_CONFIG);
	CHECK_MSG(strstr(msg, "not valid JSON"), "%s", msg);

	/* data: which runs used which sources */
	cJSON *a = record("p", "r1", "2026-01-01T00:00:00.000Z", SHA_A), *b = record("p", "r2", "2026-01-01T00:00:01.000Z", SHA_A);
	cJSON *c = record("p", "r3", "2026-01-01T00:00:02.000Z", SHA_B);
	CHECK(dlk_run_uses_data(a, SHA_A) && dlk_run_uses_data(a, "sha256:" SHA_A) && !dlk_run_uses_data(a, SHA_B));
	CHECK(dlk_run_same_data(a, b) && !dlk_run_same_data(a, c));
	cJSON_Delete(a);
	cJSON_Delete(b);
	cJSON_Delete(c);
}

static void test_dir_store(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	char *dir = xasprintf("%s/runs/p", kt_tmpdir());
	struct dlk_run_store *s = dlk_runs_open_dir(dir, "p");
	cJSON *all = NULL, *got = NULL, *r;
	long dropped = -1;
	int bad = -1;

	CHECK(dlk_runs_list(s, &all, &dropped, &bad, &err) == 0 && cJSON_GetArraySize(all) == 0 && dropped == 0 && bad == 0);
	cJSON_Delete(all);
	const char *ids[] = { "abcd1111-0000-4000-8000-000000000001", "abcd2222-0000-4000-8000-000000000002",
		              "ef000000-0000-4000-8000-000000000003" };
	const char *times[] = { "2026-01-01T00:00:00.100Z", "2026-01-01T00:00:00.200Z", "2026-01-01T00:00:00.050Z" };
	for (int i = 0; i < 3; i++) {
		r = record("p", ids[i], times[i], i == 2 ? SHA_B : SHA_A);
		if (i == 0)
			dlk_run_set_outcome(r, DLK_RUN_FAILED);
		CHECK(dlk_runs_put(s, r, &err) == 0);
		cJSON_Delete(r);
	}
	CHECK(dlk_runs_list(s, &all, &dropped, &bad, &err) == 0 && cJSON_GetArraySize(all) == 3);
	CHECK_MSG(!strcmp(dlk_run_id(cJSON_GetArrayItem(all, 0)), ids[1]) &&
	          !strcmp(dlk_run_id(cJSON_GetArrayItem(all, 2)), ids[2]), "newest first, by the milliseconds");
	cJSON_Delete(all);

	CHECK(dlk_runs_get(s, ids[2], &got, &err) == 0 && !strcmp(dlk_run_id(got), ids[2]));
	cJSON_Delete(got);
	CHECK(dlk_runs_get(s, "abcd2", &got, &err) == 0 && !strcmp(dlk_run_id(got), ids[1]));
	cJSON_Delete(got);
	got = NULL;
	CHECK(dlk_runs_get(s, "abcd", &got, &err) == -1 && err.code == DLK_EXIT_USAGE && !got);
	CHECK_MSG(strstr(err.msg, "ambiguous") && strstr(err.msg, ids[0]) && strstr(err.msg, ids[1]), "%s", err.msg);
	dlk_err_clear(&err);
	CHECK(dlk_runs_get(s, "ef0", &got, &err) == -1 && err.code == DLK_EXIT_NOTFOUND);
	CHECK_MSG(strstr(err.hint, "4 characters"), "a prefix too short to use says so: %s", err.hint);
	dlk_err_clear(&err);

	/* a put of the same id replaces the record */
	r = record("p", ids[1], times[1], SHA_A);
	dlk_run_set_outcome(r, DLK_RUN_SUCCEEDED);
	CHECK(dlk_runs_put(s, r, &err) == 0);
	cJSON_Delete(r);
	CHECK(dlk_runs_newest(s, DLK_RUN_SUCCEEDED, &got, &err) == 0 && got && !strcmp(dlk_run_id(got), ids[1]));
	cJSON_Delete(got);
	CHECK(dlk_runs_newest(s, DLK_RUN_FAILED, &got, &err) == 0 && got && !strcmp(dlk_run_id(got), ids[0]));
	cJSON_Delete(got);
	CHECK(dlk_runs_newest(s, DLK_RUN_SKIPPED, &got, &err) == 0 && !got);
	CHECK(dlk_runs_find_data(s, SHA_A, &all, &err) == 0 && cJSON_GetArraySize(all) == 2);
	cJSON_Delete(all);

	/* a record of another project is refused; damaged files are counted, not fatal */
	r = record("q", "ff000000-1", times[0], SHA_A);
	CHECK(dlk_runs_put(s, r, &err) == -1 && strstr(err.msg, "of project 'q'"));
	dlk_err_clear(&err);
	cJSON_Delete(r);
	kt_write(kt_path("runs/p/junk.json"), "{ not json");
	kt_write(kt_path("runs/p/other.json"), "{\"format\":\"dlk-run\",\"version\":1,\"name\":\"q\",\"run\":{\"id\":\"x1\","
	                                       "\"project\":\"q\",\"outcome\":\"running\",\"started_at\":\"2026-01-01T00:00:00Z\"}}");
	CHECK(dlk_runs_list(s, &all, &dropped, &bad, &err) == 0 && cJSON_GetArraySize(all) == 3);
	CHECK_MSG(bad == 2, "a file that is not JSON and a record of another project are counted as bad: %d", bad);
	cJSON_Delete(all);
	dlk_runs_close(s);
	free(dir);
}

static struct kube_client *client(struct dlk_err *err)
{
	struct kube_config cfg = KUBE_CONFIG_INIT;
	struct kube_config_opts o = KUBE_CONFIG_OPTS_INIT;

	kt_write(kt_path("kc"), "clusters:\n- name: c\n  cluster: {server: '%s', certificate-authority: certs/ca.crt}\n"
	         "users:\n- name: u\n  user: {token: test-token}\n"
	         "contexts:\n- name: c\n  context: {cluster: c, user: u, namespace: default}\ncurrent-context: c\n",
	         srv.url);
	o.kubeconfig = kt_path("kc");
	if (kube_config_load(&o, &cfg, err) < 0)
		return NULL;
	struct kube_client *c = kube_client_new(&cfg, NULL, err);
	if (c)
		c->o.backoff_ms = 20;
	return c;
}

static void test_configmap_store(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct kube_client *c;
	struct dlk_run_store *s;
	cJSON *all = NULL, *cm = NULL, *r;
	long dropped = 0;
	int bad = 0;

	if (kt_server_start(&srv, NULL) < 0) {
		CHECK_MSG(0, "the test API server starts (node is installed by .ci/deps test)");
		return;
	}
	c = client(&err);
	CHECK_MSG(c != NULL, "client: %s", err.msg);
	if (!c)
		return;
	s = dlk_runs_open_configmap(c, NULL, "p");
	CHECK(!strcmp(dlk_runs_store_kind(s), "cluster"));
	CHECK(dlk_runs_list(s, &all, &dropped, &bad, &err) == 0 && cJSON_GetArraySize(all) == 0);
	cJSON_Delete(all);
	r = record("p", "11111111-0000-4000-8000-000000000001", "2026-01-01T00:00:00.000Z", SHA_A);
	CHECK(dlk_runs_put(s, r, &err) == -1);
	CHECK_MSG(strstr(err.msg, "p-runs") && strstr(err.msg, "does not exist"), "writing needs the ConfigMap: %s", err.msg);
	dlk_err_clear(&err);

	cm = cJSON_Parse("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"p-runs\",\"namespace\":\"default\"},\"data\":{}}");
	CHECK(kube_create(c, cm, NULL, &err) == 0);
	cJSON_Delete(cm);
	CHECK(dlk_runs_put(s, r, &err) == 0);
	cJSON_Delete(r);

	/* records of ~8 KiB each: the ConfigMap's bound drops the oldest and counts them */
	char *big = xmalloc(8001);
	memset(big, 'x', 8000);
	big[8000] = '\0';
	int n = (int)(DLK_RUNS_CONFIGMAP_BYTES / 8000) + 10, ok = 1;
	for (int i = 0; i < n; i++) {
		char id[64], t[64];
		snprintf(id, sizeof(id), "22222222-0000-4000-8000-%012d", i);
		snprintf(t, sizeof(t), "2026-01-02T00:%02d:%02d.000Z", i / 60, i % 60);
		r = record("p", id, t, i % 2 ? SHA_A : SHA_B);
		dlk_run_set_failure(r, 0, 1, big);
		dlk_run_set_outcome(r, DLK_RUN_FAILED);
		if (dlk_runs_put(s, r, &err))
			ok = 0;
		cJSON_Delete(r);
	}
	free(big);
	CHECK_MSG(ok, "every put succeeds: %s", err.msg);
	CHECK(dlk_runs_list(s, &all, &dropped, &bad, &err) == 0);
	int kept = cJSON_GetArraySize(all);
	CHECK_MSG(kept < n + 1 && dropped == n + 1 - kept && bad == 0, "kept %d of %d, dropped %ld (counted)", kept, n + 1,
	          dropped);
	char newest[64];
	snprintf(newest, sizeof(newest), "22222222-0000-4000-8000-%012d", n - 1);
	CHECK_MSG(!strcmp(dlk_run_id(cJSON_GetArrayItem(all, 0)), newest), "the newest stays: %s",
	          dlk_run_id(cJSON_GetArrayItem(all, 0)));
	cJSON_Delete(all);
	CHECK(kube_get(c, "ConfigMap", "default", "p-runs", &cm, &err) == 0);
	char *text = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(cm, "data"));
	CHECK_MSG(strlen(text) <= DLK_RUNS_CONFIGMAP_BYTES + 4096, "the ConfigMap stays within its bound: %zu bytes",
	          strlen(text));
	CHECK(strstr(text, "11111111-0000-4000-8000-000000000001.json") == NULL);
	free(text);
	cJSON_Delete(cm);
	dlk_runs_close(s);
	kube_client_free(c);
}

static int seen(const char *dir, const char *project, void *ud)
{
	struct dlk_buf *b = ud;

	dlk_buf_addf(b, "%s=%s;", project, dir);
	return 0;
}

/* "the runs trained here": the project beside -f, then each directory below the current one */
static void test_local_each(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_buf b = DLK_BUF_INIT;
	char *top = xasprintf("%s/here", kt_tmpdir()), cwd[4096];
	const char *const dirs[] = { "proj/.dlk/runs/alpha", "other/.dlk/runs/beta", "empty" };
	cJSON *r;

	CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
	CHECK(dlk_mkdir_p(top, &err) == 0 && chdir(top) == 0);
	for (int i = 0; i < 3; i++) {
		CHECK(dlk_mkdir_p(dirs[i], &err) == 0);
		if (i == 2)
			break;
		struct dlk_run_store *s = dlk_runs_open_dir(dirs[i], i ? "beta" : "alpha");
		r = record(i ? "beta" : "alpha", i ? "abcd9999-0000-4000-8000-000000000009" : "abcd1111-0000-4000-8000-000000000001",
		           "2026-01-01T00:00:00.100Z", SHA_A);
		CHECK(dlk_runs_put(s, r, &err) == 0);
		cJSON_Delete(r);
		dlk_runs_close(s);
	}
	/* the project beside -f is read once, though it is also a directory below this one */
	CHECK(dlk_runs_local_each("proj/dlk.yaml", seen, &b) == 0);
	CHECK_STR(b.data, "alpha=proj/.dlk/runs/alpha;beta=other/.dlk/runs/beta;");
	dlk_buf_reset(&b);
	CHECK(dlk_runs_local_each("./proj/dlk.yaml", seen, &b) == 0);
	CHECK_STR(b.data, "alpha=./proj/.dlk/runs/alpha;beta=other/.dlk/runs/beta;");
	dlk_buf_reset(&b);
	/* from a directory without a project file: every project below */
	CHECK(dlk_runs_local_each("dlk.yaml", seen, &b) == 0);
	CHECK_STR(b.data, "beta=other/.dlk/runs/beta;alpha=proj/.dlk/runs/alpha;");
	dlk_buf_release(&b);

	r = dlk_runs_local_find("dlk.yaml", "abcd9999", &err);
	CHECK(r && !strcmp(dlk_run_project(r), "beta"));
	cJSON_Delete(r);
	CHECK(dlk_runs_local_find("dlk.yaml", "abcd", &err) == NULL && err.code == DLK_EXIT_USAGE);
	CHECK_CONTAINS(err.msg, "run 'abcd' is ambiguous: runs of 'beta' and 'alpha' start so");
	CHECK(dlk_runs_local_find("dlk.yaml", "ffff0000", &err) == NULL && err.code == DLK_EXIT_NOTFOUND);
	CHECK_CONTAINS(err.msg, "no run 'ffff0000' in the local histories here");
	CHECK(chdir(cwd) == 0);
	free(top);
}

int main(void)
{
	test_records();
	test_dir_store();
	test_local_each();
	test_configmap_store();
	kt_server_stop(&srv);
	return CHECK_DONE();
}
