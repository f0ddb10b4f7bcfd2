/* The training loop run here: data with progress, the loop with a progress line or plain lines,
 * a metrics file, the final report and the model bundle. */
#include "commands/train_run.h"
#include "lib/data/dataset.h"
#include "lib/train/bundle.h"
#include "lib/train/train.h"
#include "lib/util/hash.h"
#include "lib/util/mem.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

static volatile sig_atomic_t cancel_flag;

static void on_signal(int sig)
{
	(void)sig;
	cancel_flag = 1;
}

struct report {
	struct dlk_ctx *ctx;
	struct dlk_progress bar;
	FILE *metrics;
	const char *phase;
	int last_plain_pct;
	int last_plain_epoch;
};

static void fmt_duration(char *buf, size_t n, double s)
{
	long t = s > 0 && s < 1e8 ? (long)(s + 0.5) : 0;

	if (t >= 3600)
		snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
	else
		snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

static int data_progress(void *vctx, const char *what, unsigned long long done, unsigned long long total)
{
	struct report *r = vctx;
	const char *base = strrchr(what, '/');

	base = base ? base + 1 : what;
	if (total)
		dlk_progress_draw(&r->bar, 0, "%s %s: %llu%% of %.1f MB", r->phase, base, done * 100 / total,
		                  (double)total / 1e6);
	else
		dlk_progress_draw(&r->bar, 0, "%s %s: %.1f MB", r->phase, base, (double)done / 1e6);
	return cancel_flag;
}

static void metrics_line(struct report *r, const struct dlk_train_event *ev)
{
	cJSON *o;
	char *s;

	if (!r->metrics)
		return;
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "event", ev->kind == DLK_TRAIN_STEP ? "step" : ev->kind == DLK_TRAIN_EPOCH ? "epoch" : "done");
	cJSON_AddNumberToObject(o, "epoch", ev->epoch);
	cJSON_AddNumberToObject(o, "step", (double)ev->global_step);
	cJSON_AddNumberToObject(o, "loss", ev->loss);
	cJSON_AddNumberToObject(o, "lr", ev->lr);
	cJSON_AddNumberToObject(o, "samples_per_sec", ev->samples_per_sec);
	cJSON_AddNumberToObject(o, "elapsed_sec", ev->elapsed_sec);
	if (ev->eval && ev->eval->n) {
		cJSON_AddNumberToObject(o, "test_loss", ev->eval->loss);
		cJSON_AddNumberToObject(o, "test_accuracy", ev->eval->accuracy);
	}
	s = cJSON_PrintUnformatted(o);
	fprintf(r->metrics, "%s\n", s);
	free(s);
	cJSON_Delete(o);
}

static void on_event(void *vctx, const struct dlk_train_event *ev)
{
	struct report *r = vctx;
	char eta[32], el[32];
	const struct dlk_ctx *ctx = r->ctx;

	metrics_line(r, ev);
	fmt_duration(eta, sizeof(eta), ev->eta_sec);
	fmt_duration(el, sizeof(el), ev->elapsed_sec);
	if (ev->kind == DLK_TRAIN_STEP) {
		if (ctx->tty_err) {
			int width = 24, fill = ev->steps_per_epoch ? (int)(width * ev->step / ev->steps_per_epoch) : 0;
			char bar[32];
			for (int i = 0; i < width; i++)
				bar[i] = i < fill ? '=' : (i == fill ? '>' : ' ');
			bar[width] = '\0';
			dlk_progress_draw(&r->bar, ev->step == ev->steps_per_epoch,
			                  "epoch %d/%d [%s] %ld/%ld  loss %.4f  %.0f samples/s  ETA %s", ev->epoch,
			                  ev->epochs, bar, ev->step, ev->steps_per_epoch, ev->loss, ev->samples_per_sec, eta);
		} else if (!ctx->quiet && ev->steps_per_epoch) {
			/* plain lines for logs: one every quarter of an epoch */
			int pct = (int)(100 * ev->step / ev->steps_per_epoch) / 25 * 25;
			if (ev->epoch != r->last_plain_epoch) {
				r->last_plain_epoch = ev->epoch;
				r->last_plain_pct = 0;
			}
			if (pct > r->last_plain_pct && pct < 100) {
				r->last_plain_pct = pct;
				fprintf(stderr, "epoch %d/%d  step %ld/%ld  loss %.4f  %.0f samples/s  ETA %s\n", ev->epoch,
				        ev->epochs, ev->step, ev->steps_per_epoch, ev->loss, ev->samples_per_sec, eta);
			}
		}
		return;
	}
	if (ev->kind == DLK_TRAIN_EPOCH) {
		dlk_progress_clear(&r->bar);
		if (ctx->quiet)
			return;
		if (ev->eval && ev->eval->n)
			fprintf(stderr, "epoch %d/%d  train loss %.4f  test loss %.4f  test accuracy %.2f%%  %.0f samples/s  %s\n",
			        ev->epoch, ev->epochs, ev->loss, ev->eval->loss, 100 * ev->eval->accuracy, ev->samples_per_sec, el);
		else
			fprintf(stderr, "epoch %d/%d  train loss %.4f  %.0f samples/s  %s\n", ev->epoch, ev->epochs, ev->loss,
			        ev->samples_per_sec, el);
	}
}

static void print_report(FILE *out, const struct dlk_spec *spec, const struct dlk_eval *ev)
{
	int n = ev->n_classes;
	int w = 5;

	fprintf(out, "test accuracy: %.2f%% (%zu samples), test loss %.4f\n", 100 * ev->accuracy, ev->n, ev->loss);
	fprintf(out, "\nconfusion matrix (rows: true class, columns: predicted)\n");
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++) {
			char num[32];
			int l = snprintf(num, sizeof(num), "%lld", ev->confusion[i * n + j]);
			if (l + 1 > w)
				w = l + 1;
		}
	fprintf(out, "%14s", "");
	for (int j = 0; j < n; j++)
		fprintf(out, "%*d", w, j);
	fprintf(out, "   recall\n");
	for (int i = 0; i < n; i++) {
		const char *name = spec->data.classes && i < spec->data.n_classes ? spec->data.classes[i] : NULL;
		char label[32];
		if (name)
			snprintf(label, sizeof(label), "%d %.11s", i, name);
		else
			snprintf(label, sizeof(label), "%d", i);
		fprintf(out, "%-14s", label);
		for (int j = 0; j < n; j++)
			fprintf(out, "%*lld", w, ev->confusion[i * n + j]);
		fprintf(out, "   %5.1f%%\n", 100 * ev->recall[i]);
	}
	fprintf(out, "%-14s", "precision");
	for (int j = 0; j < n; j++)
		fprintf(out, "%*.0f", w, 100 * ev->precision[j]);
	fprintf(out, "   (%%)\n");
}

static cJSON *result_json(const struct dlk_spec *spec, const struct dlk_train_result *res, const char *bundle)
{
	cJSON *o = cJSON_CreateObject();
	const struct dlk_eval *ev = &res->eval;

	cJSON_AddStringToObject(o, "name", spec->name);
	cJSON_AddStringToObject(o, "bundle", bundle);
	cJSON_AddNumberToObject(o, "epochs", res->epochs_done);
	cJSON_AddNumberToObject(o, "steps", (double)res->steps);
	cJSON_AddNumberToObject(o, "trainLoss", res->train_loss);
	cJSON_AddNumberToObject(o, "seconds", res->seconds);
	cJSON_AddNumberToObject(o, "samplesPerSecond", res->train_samples_per_sec);
	if (ev->n) {
		cJSON *cm = cJSON_CreateArray();
		cJSON_AddNumberToObject(o, "testAccuracy", ev->accuracy);
		cJSON_AddNumberToObject(o, "testLoss", ev->loss);
		for (int i = 0; i < ev->n_classes; i++) {
			cJSON *row = cJSON_CreateArray();
			for (int j = 0; j < ev->n_classes; j++)
				cJSON_AddItemToArray(row, cJSON_CreateNumber((double)ev->confusion[i * ev->n_classes + j]));
			cJSON_AddItemToArray(cm, row);
		}
		cJSON_AddItemToObject(o, "confusionMatrix", cm);
	}
	return o;
}

static char *default_bundle_path(const char *spec_file, const char *name)
{
	const char *slash = strrchr(spec_file, '/');

	if (!slash)
		return xasprintf("%s.dlk", name);
	return xasprintf("%.*s/%s.dlk", (int)(slash - spec_file), spec_file, name);
}

static char *project_dir(const char *spec_file)
{
	const char *slash = strrchr(spec_file, '/');

	return slash ? xstrndup(spec_file, (size_t)(slash - spec_file)) : xstrdup(".");
}

int dlk_train_here(struct dlk_ctx *ctx, struct dlk_args *args, const struct dlk_spec *spec, int worker)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_dataset train = DLK_DATASET_INIT, test = DLK_DATASET_INIT;
	struct dlk_data_opts dopts = { 0 };
	struct dlk_train_opts topts = DLK_TRAIN_OPTS_INIT;
	struct dlk_train_result res = DLK_TRAIN_RESULT_INIT;
	struct report rep = { 0 };
	struct sigaction sa = { 0 }, old_int, old_term;
	char *bundle = NULL, *dir = project_dir(ctx->file), digest[65];
	const char *mpath = dlk_opt_str(args, "metrics");
	int rc = 0, ran;

	rep.ctx = ctx;
	rep.bar.ctx = ctx;
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);

	if (mpath) {
		rep.metrics = fopen(mpath, "a");
		if (!rep.metrics) {
			dlk_errf(&err, DLK_EXIT_FAIL, "cannot open metrics file '%s': %s", mpath, strerror(errno));
			goto fail;
		}
		setvbuf(rep.metrics, NULL, _IOLBF, 0);
	}
	memcpy(dopts.shape, spec->model.input, sizeof(dopts.shape));
	dopts.base_dir = dir;
	dopts.progress = data_progress;
	dopts.progress_ctx = &rep;
	rep.phase = "loading training data";
	if (dlk_data_load(&spec->data, "train", &dopts, &train, &err))
		goto fail;
	rep.phase = "loading test data";
	if ((spec->data.test.images.url || spec->data.test.source.url) &&
	    dlk_data_load(&spec->data, "test", &dopts, &test, &err))
		goto fail;
	dlk_progress_clear(&rep.bar);
	if (!ctx->quiet)
		fprintf(stderr, "training '%s' on %zu samples%s (%d epochs, batch %d, %s)\n", spec->name, train.n,
		        test.n ? "" : ", no test set", spec->training.epochs, spec->training.batch_size,
		        spec_optimizer_name(spec->training.optimizer));

	topts.model = &spec->model;
	topts.training = &spec->training;
	topts.spec_file = spec->path ? spec->path : ctx->file;
	topts.train = &train;
	topts.test = test.n ? &test : NULL;
	topts.rank = 0;
	topts.world = 1;
	topts.on_event = on_event;
	topts.event_ctx = &rep;
	topts.cancel = &cancel_flag;
	ran = dlk_train_run(&topts, &res, &err);
	dlk_progress_clear(&rep.bar);
	if (ran < 0)
		goto fail;
	if (ran == 1) {
		dlk_errf(&err, worker ? DLK_EXIT_RESTARTABLE : DLK_EXIT_FAIL, "training interrupted after %ld steps", res.steps);
		goto fail;
	}

	bundle = dlk_opt_str(args, "bundle") ? xstrdup(dlk_opt_str(args, "bundle")) : default_bundle_path(ctx->file, spec->name);
	spec_digest(spec, digest);
	{
		struct dlk_bundle_info bi = { 0 };
		bi.name = spec->name;
		bi.model = &spec->model;
		bi.training = &spec->training;
		bi.net = &res.net;
		bi.classes = spec->data.classes;
		bi.eval = res.eval.n ? &res.eval : NULL;
		bi.train_loss = res.train_loss;
		bi.train = &train;
		bi.test = test.n ? &test : NULL;
		bi.spec_digest = digest;
		bi.seed = res.seed;
		bi.started_at = res.started_at;
		bi.finished_at = res.finished_at;
		if (dlk_bundle_write(bundle, &bi, &err))
			goto fail;
	}

	if (!strcmp(ctx->output, "json")) {
		cJSON *o = result_json(spec, &res, bundle);
		char *s = cJSON_Print(o);
		printf("%s\n", s);
		free(s);
		cJSON_Delete(o);
	} else {
		if (res.eval.n)
			print_report(stdout, spec, &res.eval);
		else
			printf("no test set: final train loss %.4f\n", res.train_loss);
		printf("\nmodel bundle: %s\n", bundle);
		if (!ctx->quiet)
			fprintf(stderr, "trained %d epochs in %.1fs (%.0f samples/s)\n", res.epochs_done, res.seconds,
			        res.train_samples_per_sec);
	}
	goto out;
fail:
	dlk_progress_clear(&rep.bar);
	rc = dlk_report(ctx, &err);
out:
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	if (rep.metrics)
		fclose(rep.metrics);
	dlk_train_result_release(&res);
	dlk_dataset_release(&train);
	dlk_dataset_release(&test);
	free(bundle);
	free(dir);
	return rc;
}
