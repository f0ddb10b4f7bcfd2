/* dlk predict --workers N without a cluster (lib/serve/predict_workers.h): ranks scoring their
 * parts of a small bundle's input into a directory store, the join of the parts byte-identical to
 * one process's predictions.csv (and provenance.json), the join's refusals (a part missing, cut
 * short, of another run, out of order, of another range; a rank that failed), none of which
 * leaves output or temporary files behind, and the Job of the N pods. */
#include "check.h"
#include "lib/nn/net.h"
#include "lib/project/project.h"
#include "lib/serve/predict_workers.h"
#include "lib/store/store.h"
#include "lib/train/bundle.h"
#include "lib/util/fsutil.h"
#include "lib/util/mem.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define IN_ID "1111111111111111111111111111111111111111111111111111111111111111"
#define N_SAMPLES 10
#define BATCH 3

static char dir[256], tmp[300];
static struct dlk_serve_model model;
static struct dlk_dataset data = DLK_DATASET_INIT;
static struct dlk_store *store;
static char bundle_sha[65] = "2222222222222222222222222222222222222222222222222222222222222222";

static struct dlk_layer_spec layers[] = {
	{ .kind = DLK_LAYER_FLATTEN }, { .kind = DLK_LAYER_DENSE, .units = 8 }, { .kind = DLK_LAYER_RELU },
	{ .kind = DLK_LAYER_DENSE, .units = 3 },
};
static struct dlk_model spec = { .input = { 1, 2, 2 }, .input_rank = 3, .layers = layers, .n_layers = 4, .init = "torch" };

/* an untrained [1,2,2] -> 3 network with class names, loaded as dlk predict loads a bundle */
static void load_model(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_net net = DLK_NET_INIT;
	struct dlk_data d = { .scale = 1.0f / 255, .mean = 0.5f, .std = 2.0f };
	char *classes[] = { "cat", "dog", "emu" }, path[320];

	snprintf(path, sizeof(path), "%s/tiny.dlk", dir);
	CHECK(dlk_net_build(&net, &spec, "test", 3, dlk_backend_cpu(), &err) == 0 &&
	      dlk_net_init_params(&net, "torch", 11, &err) == 0);
	struct dlk_bundle_info info = { .name = "tiny", .model = &spec, .net = &net, .classes = classes, .data = &d };
	CHECK_MSG(dlk_bundle_write(path, &info, &err) == 0, "a bundle is written (%s)", err.msg);
	dlk_net_release(&net);
	CHECK_MSG(dlk_serve_model_load(&model, NULL, path, dlk_backend_cpu(), &err) == 0, "it loads (%s)", err.msg);
}

/* N_SAMPLES samples of [1,2,2], labelled */
static void make_data(void)
{
	data.n = data.total = N_SAMPLES;
	data.shape[0] = 1;
	data.shape[1] = data.shape[2] = 2;
	data.sample_size = 4;
	data.x = xcalloc(N_SAMPLES * 4, sizeof(float));
	data.y = xcalloc(N_SAMPLES, sizeof(int32_t));
	for (int i = 0; i < N_SAMPLES * 4; i++)
		data.x[i] = (float)((i * 37) % 17) / 8.0f - 1.0f;
	for (int i = 0; i < N_SAMPLES; i++)
		data.y[i] = i % 3;
	data.n_classes = 3;
}

static struct dlk_predict_workers run_of(const char *name, int workers)
{
	struct dlk_predict_workers w = { .model = &model, .data = &data, .input_id = IN_ID, .bundle_sha = bundle_sha,
		                         .images = "t10k-images-idx3-ubyte", .labels = "t10k-labels-idx1-ubyte",
		                         .name = name, .batch = BATCH, .threads = 1, .workers = workers, .store = store };
	return w;
}

/* whether the temporary directory (TMPDIR) is empty: nothing left behind */
static int tmp_empty(void)
{
	DIR *d = opendir(tmp);
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n == 0;
}

static int score_ranks(const struct dlk_predict_workers *w)
{
	struct dlk_err err = DLK_ERR_INIT;
	int bad = 0;

	for (int r = 0; r < w->workers; r++) {
		struct dlk_predict_rank_result res = DLK_PREDICT_RANK_RESULT_INIT;
		if (dlk_predict_rank(w, r, &res, &err)) {
			printf("# rank %d: %s\n", r, err.msg);
			bad = 1;
		}
		dlk_predict_rank_result_release(&res);
	}
	return bad;
}

/* One process's predictions of the input and its CSV: what the join must reproduce. */
static char *one_process(struct dlk_predictions *p, size_t *len)
{
	struct dlk_err err = DLK_ERR_INIT;

	CHECK(dlk_predict_run(&model, &data, BATCH, NULL, NULL, p, &err) == 0);
	return dlk_predict_csv(p, &data, model.sig.classes, len);
}

static void test_ranks_and_join(void)
{
	struct dlk_predict_workers w = run_of("preds@v1", 3);
	struct dlk_predict_rank_result res = DLK_PREDICT_RANK_RESULT_INIT;
	struct dlk_predictions one = DLK_PREDICTIONS_INIT, totals = DLK_PREDICTIONS_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	char *whole, *csv = NULL, *p1, *p2, id1[65], id2[65], key[17];
	size_t wl, cl;

	whole = one_process(&one, &wl);
	/* ranks 2 and 1: their whole batches, pushed under their tags */
	CHECK(dlk_predict_rank(&w, 2, &res, &err) == 0 && res.scored == 1);
	CHECK(res.first == 6 && res.count == 4);
	dlk_predict_workers_key(&w, key);
	{
		char *t = dlk_predict_part_tag("preds", 2, 3, key);
		CHECK_STR(res.tag, t);
		free(t);
	}
	dlk_predict_rank_result_release(&res);
	CHECK(dlk_predict_rank(&w, 1, &res, &err) == 0 && res.scored == 1 && res.first == 3 && res.count == 3);
	memcpy(id1, res.id, 65);
	dlk_predict_rank_result_release(&res);

	/* rank 0's part missing: named, nothing joined */
	CHECK(dlk_predict_join(&w, NULL, NULL, &totals, &csv, &cl, &err) && err.code == DLK_EXIT_NOTFOUND);
	CHECK_CONTAINS(err.msg, "part 0 of 3 is not in");
	CHECK_CONTAINS(err.msg, "preds-part-0-of-3@");
	CHECK(csv == NULL && totals.n == 0);
	dlk_err_clear(&err);

	CHECK(dlk_predict_rank(&w, 0, &res, &err) == 0 && res.scored == 1 && res.first == 0 && res.count == 3);
	dlk_predict_rank_result_release(&res);
	/* the same bytes as one process, and the totals provenance.json is made of */
	CHECK_MSG(dlk_predict_join(&w, NULL, NULL, &totals, &csv, &cl, &err) == 0, "joined (%s)", err.msg);
	CHECK(csv && cl == wl && !memcmp(csv, whole, wl));
	CHECK(totals.n == N_SAMPLES && totals.k == 3 && totals.correct == one.correct);
	p1 = dlk_predict_provenance(&model, bundle_sha, IN_ID, "in@v1", "./store", w.images, w.labels, &one);
	p2 = dlk_predict_provenance(&model, bundle_sha, IN_ID, "in@v1", "./store", w.images, w.labels, &totals);
	CHECK_STR(p1, p2);
	/* pushed, the predictions dataset is the one one process pushes */
	CHECK(dlk_predict_push(store, "preds@v1", csv, cl, p2, NULL, NULL, id2, &err) == 0);
	{
		char got[65];
		CHECK(dlk_dataset_resolve(store, "preds@v1", 0, got, &err) == 0 && !strcmp(got, id2));
		CHECK(dlk_predict_push(store, "one@v1", whole, wl, p1, NULL, NULL, got, &err) == 0 && !strcmp(got, id2));
	}
	/* a re-run makes no part twice */
	CHECK(dlk_predict_rank(&w, 1, &res, &err) == 0 && res.scored == 0 && !strcmp(res.id, id1));
	CHECK(res.first == 3 && res.count == 3);
	dlk_predict_rank_result_release(&res);
	CHECK(tmp_empty());
	free(p1);
	free(p2);
	free(csv);
	free(whole);
	dlk_predictions_release(&one);
}

struct waiter {
	const struct dlk_predict_workers *w;
	int calls, fail_rank;
};

/* a rank finishing while the join waits; or, with fail_rank, the caller learning that it failed */
static int on_wait(void *vctx, int have, int workers, struct dlk_err *err)
{
	struct waiter *wt = vctx;
	struct dlk_predict_rank_result res = DLK_PREDICT_RANK_RESULT_INIT;
	int rc;

	wt->calls++;
	CHECK(have == workers - 1);
	if (wt->fail_rank >= 0)
		return dlk_predict_rank_failed(err, DLK_EXIT_CONFIG, wt->fail_rank, workers,
		                               "dataset sha256:1111 has no file 'x-images-idx3-ubyte'");
	rc = dlk_predict_rank(wt->w, 0, &res, err);
	dlk_predict_rank_result_release(&res);
	return rc;
}

static void test_wait(void)
{
	struct dlk_predict_workers w = run_of("late@v1", 2);
	struct dlk_predictions one = DLK_PREDICTIONS_INIT, totals = DLK_PREDICTIONS_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_predict_rank_result res = DLK_PREDICT_RANK_RESULT_INIT;
	struct waiter wt = { &w, 0, -1 };
	char *whole, *csv = NULL;
	size_t wl, cl;

	whole = one_process(&one, &wl);
	CHECK(dlk_predict_rank(&w, 1, &res, &err) == 0);
	dlk_predict_rank_result_release(&res);
	/* rank 0's part comes while the join waits: one wait, then the whole */
	CHECK_MSG(dlk_predict_join(&w, on_wait, &wt, &totals, &csv, &cl, &err) == 0, "joined (%s)", err.msg);
	CHECK(wt.calls == 1 && csv && cl == wl && !memcmp(csv, whole, wl));
	free(csv);
	csv = NULL;

	/* a rank that failed: the join stops at once with its cause, and makes nothing */
	w = run_of("failed@v1", 2);
	CHECK(dlk_predict_rank(&w, 0, &res, &err) == 0);
	dlk_predict_rank_result_release(&res);
	wt.w = &w;
	wt.calls = 0;
	wt.fail_rank = 1;
	CHECK(dlk_predict_join(&w, on_wait, &wt, &totals, &csv, &cl, &err) && err.code == DLK_EXIT_CONFIG);
	CHECK_STR(err.msg, "rank 1 of 2 failed: dataset sha256:1111 has no file 'x-images-idx3-ubyte'");
	CHECK(wt.calls == 1 && csv == NULL && totals.n == 0);
	CHECK(tmp_empty());
	free(whole);
	dlk_predictions_release(&one);
}

/* rank's genuine part.csv and part.json texts, for forging */
static void genuine(const struct dlk_predict_workers *w, int rank, char **csv, size_t *csv_len, char **json,
                    struct dlk_predict_part *p)
{
	struct dlk_predictions pred = DLK_PREDICTIONS_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	size_t lo, hi;

	dlk_predict_part_range(data.n, BATCH, rank, w->workers, &lo, &hi);
	CHECK(dlk_predict_run_range(&model, &data, lo, hi, BATCH, NULL, NULL, &pred, &err) == 0);
	memset(p, 0, sizeof(*p));
	dlk_predict_workers_key(w, p->key);
	p->rank = rank;
	p->workers = w->workers;
	p->first = lo;
	p->count = hi - lo;
	p->samples = data.n;
	p->correct = pred.correct;
	*csv = dlk_predict_csv_rows(&pred, &data, model.sig.classes, csv_len);
	*json = dlk_predict_part_json(p);
	dlk_predictions_release(&pred);
}

/* puts csv and json in the store under rank's tag (the tag moves to them) */
static void forge(const struct dlk_predict_workers *w, int rank, const char *csv, size_t csv_len, const char *json)
{
	struct dlk_err err = DLK_ERR_INIT;
	const char *names[] = { DLK_PREDICT_PART_CSV, DLK_PREDICT_PART_JSON }, *texts[] = { csv, json };
	size_t lens[] = { csv_len, strlen(json) };
	char key[17], id[65], *tag;

	dlk_predict_workers_key(w, key);
	tag = dlk_predict_workers_tag(w, key, rank, &err);
	CHECK(tag && dlk_dataset_push_mem(store, names, texts, lens, 2, tag, 1, NULL, NULL, id, &err) == 0);
	free(tag);
}

/* the join of run name, whose rank 2 (of 3) is forged by case; its message must hold want */
static void refused(const char *name, int which, const char *want)
{
	struct dlk_predict_workers w = run_of(name, 3);
	struct dlk_predictions totals = DLK_PREDICTIONS_INIT;
	struct dlk_predict_part p, q;
	struct dlk_err err = DLK_ERR_INIT;
	char *csv, *json, *csv1, *json1, *out = NULL;
	size_t len, len1, ol;

	CHECK(score_ranks(&w) == 0);
	genuine(&w, 2, &csv, &len, &json, &p);
	genuine(&w, 1, &csv1, &len1, &json1, &q);
	switch (which) {
	case 0: /* cut in its last row */
		forge(&w, 2, csv, len - 5, json);
		break;
	case 1: /* its last row lost whole */
		forge(&w, 2, csv, (size_t)((const char *)memrchr(csv, '\n', len - 1) - csv) + 1, json);
		break;
	case 2: { /* a part of another run (another key) */
		struct dlk_predict_part o = p;
		char *j;
		memcpy(o.key, "0123456789abcdef", 17);
		j = dlk_predict_part_json(&o);
		forge(&w, 2, csv, len, j);
		free(j);
		break;
	}
	case 3: /* out of order: rank 1's part where rank 2's is due */
		forge(&w, 2, csv1, len1, json1);
		break;
	case 4: /* part.json right, part.csv another range's rows */
		forge(&w, 2, csv1, len1, json);
		break;
	}
	CHECK_MSG(dlk_predict_join(&w, NULL, NULL, &totals, &out, &ol, &err) && err.code == DLK_EXIT_CONFIG,
	          "%s: refused (%s)", name, err.msg);
	CHECK_CONTAINS(err.msg, "part 2");
	CHECK_CONTAINS(err.msg, want);
	CHECK(out == NULL && totals.n == 0);
	CHECK(tmp_empty());
	free(csv);
	free(json);
	free(csv1);
	free(json1);
}

static void test_refusals(void)
{
	refused("cut@v1", 0, "part.csv is cut short: its row 4 has no end");
	refused("short@v1", 1, "part.csv is cut short: 3 of the 4 rows");
	refused("other@v1", 2, "part 2 of 3 is of run 0123456789abcdef, not of this run");
	refused("order@v1", 3, "part 2 of 3 is rank 1 of 3: the parts are out of order");
	refused("range@v1", 4, "row 1 is not sample 6's");
}

static void test_rows_check(void)
{
	struct dlk_predict_part p = { "0123456789abcdef", 1, 2, 5, 2, 7, 1 };
	struct dlk_err err = DLK_ERR_INIT;

	CHECK(dlk_predict_part_rows_check("5,1,0,0.5,0.5\n6,0,0,1,0\n", 24, &p, &err) == 0);
	CHECK(dlk_predict_part_rows_check("5,1,0,0.5,0.5\n6,0,0,1,0\n7,0,0,1,0\n", 34, &p, &err) &&
	      err.code == DLK_EXIT_CONFIG);
	CHECK_CONTAINS(err.msg, "more than the 2 rows");
	dlk_err_clear(&err);
	CHECK(dlk_predict_part_rows_check("5,1,0,0.5,0.5\n66,0,0,1,0\n", 25, &p, &err));
	CHECK_CONTAINS(err.msg, "row 2 is not sample 6's");
	dlk_err_clear(&err);
	CHECK(dlk_predict_part_rows_check("5\n6,0\n", 6, &p, &err));
	CHECK_CONTAINS(err.msg, "row 1 is not sample 5's");
	p.count = 0;
	CHECK(dlk_predict_part_rows_check("", 0, &p, &err) == 0);
}

static void test_job(void)
{
	struct dlk_predict_job j = { .job = "preds-predict", .bundle_id = IN_ID, .store = "s3://b/p", .from = NULL,
		                     .data = "in@v1", .tag = "it's@v1", .batch = 300, .threads = 2, .workers = 3,
		                     .secret = "creds", .cpu = "500m", .memory = "1Gi" };
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_project *p;
	char *y, *n;
	size_t len;
	int fails3 = 0, fails143 = 0;

	y = dlk_predict_job_yaml(&j, &len);
	CHECK(len == strlen(y));
	p = project_load_mem(y, len, "job", NULL, 0, &err);
	CHECK_MSG(p != NULL, "the Job's project loads (%s)", err.msg);
	if (p) {
		CHECK(p->resources.workers == 3);
		CHECK_STR(p->resources.cpu, "500m");
		CHECK_STR(p->data.store_secret, "creds");
		CHECK(p->program.n_command == 3);
		CHECK_STR(p->program.command[0], "sh");
		/* every word quoted for sh, a quote in a value too; the rank from the Indexed Job */
		CHECK_CONTAINS(p->program.command[2], "dlk data get -q sha256:" IN_ID " --from 's3://b/p' model;");
		CHECK_CONTAINS(p->program.command[2], "--name 'it'\\''s@v1' ");
		CHECK_CONTAINS(p->program.command[2], "--batch 300 --threads 2 --workers 3 --rank \"$DLK_RANK\"");
		for (int i = 0; i < p->program.n_fail_codes; i++) {
			fails3 |= p->program.fail_codes[i] == 3;
			fails143 |= p->program.fail_codes[i] == 143;
		}
		CHECK(fails3 && fails143);
		project_free(p);
	}
	free(y);

	n = dlk_predict_job_name("Fashion_Preds@v1");
	CHECK_STR(n, "fashion-preds-predict");
	free(n);
	n = dlk_predict_job_name("@v1");
	CHECK_STR(n, "predict");
	free(n);
	CHECK(dlk_predict_store_reachable("s3://b/p", "--to", &err) == 0);
	CHECK(dlk_predict_store_reachable("pvc://claim/p", "--to", &err) == 0);
	CHECK(dlk_predict_store_reachable("./store", "--to", &err) && err.code == DLK_EXIT_USAGE);
	CHECK_CONTAINS(err.msg, "--to './store' is a directory here");
	CHECK_CONTAINS(err.hint, "s3://");
	dlk_err_clear(&err);
	CHECK(dlk_predict_store_reachable("file:///srv/store", "--from", &err) && err.code == DLK_EXIT_USAGE);
}

int main(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	char path[320], cmd[400];

	char *d = dlk_mkdtemp("dlk-predict-workers", &err);

	if (!d) {
		printf("not ok - a scratch directory: %s\n", err.msg);
		return 1;
	}
	snprintf(dir, sizeof(dir), "%s", d);
	free(d);
	/* the library's temporary directories go here, to see that none stays */
	snprintf(tmp, sizeof(tmp), "%s/tmp", dir);
	CHECK(dlk_mkdir_p(tmp, &err) == 0);
	setenv("TMPDIR", tmp, 1);
	dlk_backend_cpu()->set_threads(1);
	load_model();
	make_data();
	snprintf(path, sizeof(path), "%s/store", dir);
	store = dlk_store_open(path, NULL, &err);
	CHECK(store != NULL);
	test_ranks_and_join();
	test_wait();
	test_refusals();
	test_rows_check();
	test_job();
	dlk_store_close(store);
	dlk_dataset_release(&data);
	dlk_serve_model_release(&model);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		return 1;
	return CHECK_DONE();
}
