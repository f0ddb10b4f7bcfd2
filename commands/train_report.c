/* What a training run here shows (see train_report.h). */
#include "commands/train_report.h"
#include "lib/nn/loss.h"
#include "commands/train_data.h"
#include "lib/trainer/here.h"
#include "lib/util/buf.h"
#include "lib/util/duration.h"
#include "lib/util/utf8.h"

#include <cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

int dlk_train_report_open(struct dlk_train_report *r, const struct dlk_ctx *ctx, const char *metrics_path,
                          struct dlk_err *err)
{
	memset(r, 0, sizeof(*r));
	r->ctx = ctx;
	r->bar.ctx = ctx;
	if (metrics_path) {
		r->metrics = fopen(metrics_path, "a");
		if (!r->metrics)
			return dlk_errf(err, DLK_EXIT_FAIL, "cannot open metrics file '%s': %s", metrics_path, strerror(errno));
		setvbuf(r->metrics, NULL, _IOLBF, 0);
	}
	return 0;
}

void dlk_train_report_close(struct dlk_train_report *r)
{
	if (r->metrics)
		fclose(r->metrics);
	r->metrics = NULL;
}

void dlk_train_report_clear(struct dlk_train_report *r)
{
	dlk_progress_clear(&r->bar);
}

void dlk_train_report_data(struct dlk_train_report *r, const char *what, unsigned long long done,
                           unsigned long long total)
{
	const char *base = strrchr(what, '/');

	base = base ? base + 1 : what;
	if (total)
		dlk_progress_draw(&r->bar, 0, "%s %s: %llu%% of %.1f MB", r->phase, base, done * 100 / total,
		                  (double)total / 1e6);
	else
		dlk_progress_draw(&r->bar, 0, "%s %s: %.1f MB", r->phase, base, (double)done / 1e6);
}

void dlk_train_report_start(struct dlk_train_report *r, const struct dlk_project *spec, const struct dlk_training *tr,
                            size_t n_train, size_t n_test, int world)
{
	if (r->ctx->quiet)
		return;
	if (r->ctx->log_json) {
		char msg[512];
		cJSON *f = cJSON_CreateObject();
		snprintf(msg, sizeof(msg), "training '%s' on %zu samples%s (%d epochs, %d workers x batch %d, %s)", spec->name,
		         n_train, n_test ? "" : ", no test set", tr->epochs, world, tr->batch_size,
		         project_optimizer_name(tr->optimizer));
		cJSON_AddStringToObject(f, "name", spec->name);
		cJSON_AddNumberToObject(f, "samples", (double)n_train);
		cJSON_AddNumberToObject(f, "test_samples", (double)n_test);
		cJSON_AddNumberToObject(f, "epochs", tr->epochs);
		cJSON_AddNumberToObject(f, "batch_size", tr->batch_size);
		cJSON_AddNumberToObject(f, "world_size", world);
		dlk_log_json(r->ctx, "info", msg, f);
		cJSON_Delete(f);
		return;
	}
	if (world > 1)
		fprintf(stderr, "training '%s' on %zu samples%s (%d epochs, %d workers x batch %d, %s)\n", spec->name,
		        n_train, n_test ? "" : ", no test set", tr->epochs, world, tr->batch_size,
		        project_optimizer_name(tr->optimizer));
	else
		fprintf(stderr, "training '%s' on %zu samples%s (%d epochs, batch %d, %s)\n", spec->name, n_train,
		        n_test ? "" : ", no test set", tr->epochs, tr->batch_size, project_optimizer_name(tr->optimizer));
}

/* the task's named test metrics as {"test": {"mae": ..., ...}} */
static void add_test_metrics(cJSON *o, const struct dlk_eval *ev)
{
	cJSON *t = cJSON_AddObjectToObject(o, "test");
	for (int i = 0; i < ev->n_metrics; i++)
		cJSON_AddNumberToObject(t, ev->metrics[i].name, ev->metrics[i].value);
}

static void metrics_line(struct dlk_train_report *r, const struct dlk_train_event *ev)
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
		if (ev->eval->task == DLK_TASK_CLASSIFICATION)
			cJSON_AddNumberToObject(o, "test_accuracy", ev->eval->accuracy);
		add_test_metrics(o, ev->eval);
	}
	s = cJSON_PrintUnformatted(o);
	fprintf(r->metrics, "%s\n", s);
	free(s);
	cJSON_Delete(o);
}

/* A progress line of --log-format json: the text line as msg, its numbers as fields. */
static void json_progress(const struct dlk_train_report *r, const struct dlk_train_event *ev, const char *msg)
{
	cJSON *f = cJSON_CreateObject();

	cJSON_AddStringToObject(f, "event", ev->kind == DLK_TRAIN_STEP ? "step" : "epoch");
	cJSON_AddNumberToObject(f, "epoch", ev->epoch);
	cJSON_AddNumberToObject(f, "epochs", ev->epochs);
	cJSON_AddNumberToObject(f, "step", (double)ev->step);
	cJSON_AddNumberToObject(f, "steps_per_epoch", (double)ev->steps_per_epoch);
	cJSON_AddNumberToObject(f, "global_step", (double)ev->global_step);
	cJSON_AddNumberToObject(f, "loss", ev->loss);
	cJSON_AddNumberToObject(f, "lr", ev->lr);
	cJSON_AddNumberToObject(f, "samples_per_sec", ev->samples_per_sec);
	cJSON_AddNumberToObject(f, "elapsed_sec", ev->elapsed_sec);
	if (ev->kind == DLK_TRAIN_STEP)
		cJSON_AddNumberToObject(f, "eta_sec", ev->eta_sec);
	if (ev->eval && ev->eval->n) {
		cJSON_AddNumberToObject(f, "test_loss", ev->eval->loss);
		if (ev->eval->task == DLK_TASK_CLASSIFICATION)
			cJSON_AddNumberToObject(f, "test_accuracy", ev->eval->accuracy);
		add_test_metrics(f, ev->eval);
	}
	dlk_log_json(r->ctx, "info", msg, f);
	cJSON_Delete(f);
}

void dlk_train_report_event(struct dlk_train_report *r, const struct dlk_train_event *ev)
{
	const struct dlk_ctx *ctx = r->ctx;
	char eta[32], el[32];

	metrics_line(r, ev);
	dlk_duration_span(ev->eta_sec, eta, sizeof(eta));
	dlk_duration_span(ev->elapsed_sec, el, sizeof(el));
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
				if (ctx->log_json) {
					char msg[256];
					snprintf(msg, sizeof(msg), "epoch %d/%d  step %ld/%ld  loss %.4f  %.0f samples/s  ETA %s",
					         ev->epoch, ev->epochs, ev->step, ev->steps_per_epoch, ev->loss, ev->samples_per_sec,
					         eta);
					json_progress(r, ev, msg);
				} else {
					fprintf(stderr, "epoch %d/%d  step %ld/%ld  loss %.4f  %.0f samples/s  ETA %s\n", ev->epoch,
					        ev->epochs, ev->step, ev->steps_per_epoch, ev->loss, ev->samples_per_sec, eta);
				}
			}
		}
		return;
	}
	if (ev->kind == DLK_TRAIN_EPOCH) {
		dlk_progress_clear(&r->bar);
		if (ctx->quiet)
			return;
		if (ctx->log_json) {
			char msg[512], brief[256];
			if (ev->eval && ev->eval->n)
				dlk_eval_brief(ev->eval, brief, sizeof(brief));
			if (ev->eval && ev->eval->n)
				snprintf(msg, sizeof(msg), "epoch %d/%d  train loss %.4f  test loss %.4f  %s  %.0f samples/s  %s",
				         ev->epoch, ev->epochs, ev->loss, ev->eval->loss, brief, ev->samples_per_sec, el);
			else
				snprintf(msg, sizeof(msg), "epoch %d/%d  train loss %.4f  %.0f samples/s  %s", ev->epoch, ev->epochs,
				         ev->loss, ev->samples_per_sec, el);
			json_progress(r, ev, msg);
		} else if (ev->eval && ev->eval->n) {
			char brief[256];
			dlk_eval_brief(ev->eval, brief, sizeof(brief));
			if (ev->eval->task == DLK_TASK_LM) /* the brief has the validation loss */
				fprintf(stderr, "epoch %d/%d  train loss %.4f  %s  %.0f samples/s  %s\n", ev->epoch, ev->epochs,
				        ev->loss, brief, ev->samples_per_sec, el);
			else
				fprintf(stderr, "epoch %d/%d  train loss %.4f  test loss %.4f  %s  %.0f samples/s  %s\n",
				        ev->epoch, ev->epochs, ev->loss, ev->eval->loss, brief, ev->samples_per_sec, el);
		}
		else
			fprintf(stderr, "epoch %d/%d  train loss %.4f  %.0f samples/s  %s\n", ev->epoch, ev->epochs, ev->loss,
			        ev->samples_per_sec, el);
	}
}

/* task lm: the tokens of a sequence (model.input's width), what tokens/s counts */
static double lm_context(const struct dlk_project *spec)
{
	return (double)spec->model.input[0] * spec->model.input[1] * spec->model.input[2];
}

static void print_report(FILE *out, const struct dlk_project *spec, const struct dlk_eval *ev, int quiet)
{
	int n = ev->n_classes;
	int w = 7; /* " 100.0%": the precision row's widest */

	if (ev->task == DLK_TASK_LM) {
		/* a language model: its validation loss and perplexity */
		fprintf(out, "val loss %.4f (%zu sequences of %.0f tokens)\nval perplexity %.3f\n", ev->loss, ev->n,
		        lm_context(spec), ev->n_metrics ? ev->metrics[0].value : NAN);
		return;
	}
	if (ev->task != DLK_TASK_CLASSIFICATION) {
		/* no classes, no matrix: the task's metrics, one a line */
		fprintf(out, "test loss %.4f (%zu samples)\n", ev->loss, ev->n);
		for (int i = 0; i < ev->n_metrics; i++)
			fprintf(out, "test %-16s %.4f%s\n", ev->metrics[i].name, ev->metrics[i].value,
			        !strcmp(ev->metrics[i].name, "psnr") ? " dB" : "");
		for (int i = 0; !quiet && ev->f1 && i < n; i++)
			fprintf(out, "  class %-4d f1 %.4f\n", i, ev->f1[i]);
		return;
	}
	fprintf(out, "test accuracy: %.2f%% (%zu samples), test loss %.4f\n", 100 * ev->accuracy, ev->n, ev->loss);
	/* -q: the result, not the table (the report page and -o json have it) */
	if (quiet)
		return;
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
		struct dlk_buf label = DLK_BUF_INIT;
		size_t chars = 0;
		dlk_buf_addf(&label, "%d", i);
		if (name) {
			/* a class name from the project file: control characters made visible, cut at a
			 * character's end to the column's 13 characters, padded by characters, not bytes */
			dlk_buf_addc(&label, ' ');
			dlk_buf_add_visible(&label, name, strlen(name), 0);
		}
		for (size_t k = 0, n0 = 0; k < label.len; k++)
			if (((unsigned char)label.data[k] & 0xc0) != 0x80 && ++n0 > 13) {
				label.len = k;
				break;
			}
		for (size_t k = 0; k < label.len; k++)
			chars += ((unsigned char)label.data[k] & 0xc0) != 0x80;
		fprintf(out, "%.*s%*s", (int)label.len, label.data, (int)(14 - chars), "");
		dlk_buf_release(&label);
		for (int j = 0; j < n; j++)
			fprintf(out, "%*lld", w, ev->confusion[i * n + j]);
		fprintf(out, "   %5.1f%%\n", 100 * ev->recall[i]);
	}
	/* in recall's format: one table, one way of writing a percentage */
	fprintf(out, "%-14s", "precision");
	for (int j = 0; j < n; j++)
		fprintf(out, "%*.1f%%", w - 1, 100 * ev->precision[j]);
	fprintf(out, "\n");
}

static cJSON *result_json(const struct dlk_project *spec, const struct dlk_train_result *res, const char *bundle)
{
	cJSON *o = cJSON_CreateObject();
	const struct dlk_eval *ev = &res->eval;

	cJSON_AddStringToObject(o, "name", spec->name);
	cJSON_AddStringToObject(o, "bundle", bundle);
	cJSON_AddNumberToObject(o, "epochs", res->epochs_done);
	cJSON_AddNumberToObject(o, "steps", (double)res->steps);
	cJSON_AddNumberToObject(o, "trainLoss", res->train_loss);
	cJSON_AddNumberToObject(o, "seconds", dlk_history_training_sec(&res->history));
	cJSON_AddNumberToObject(o, "samplesPerSecond", res->train_samples_per_sec);
	/* this rank's optimizer state and the whole of it: different under ZeRO-1 (training.zero) */
	cJSON_AddNumberToObject(o, "optimizerStateBytes", (double)res->optim_state_bytes);
	cJSON_AddNumberToObject(o, "optimizerStateBytesWhole", (double)res->optim_full_bytes);
	/* a training batch's activations, and what they would be without training.recompute */
	cJSON_AddNumberToObject(o, "activationBytes", res->activation_bytes);
	cJSON_AddNumberToObject(o, "activationBytesWhole", res->activation_bytes_whole);
	cJSON_AddNumberToObject(o, "recomputedBlocks", res->recomputed_blocks);
	/* training.precision: what the dense layers' products multiplied */
	cJSON_AddStringToObject(o, "precision", spec->training.precision == DLK_PRECISION_BF16 ? "bf16" : "fp32");
	if (spec->model.task == DLK_TASK_LM)
		cJSON_AddNumberToObject(o, "tokensPerSecond", res->train_samples_per_sec * lm_context(spec));
	if (ev->n) {
		cJSON_AddStringToObject(o, "task", dlk_task_name(ev->task));
		cJSON_AddNumberToObject(o, "testLoss", ev->loss);
		add_test_metrics(o, ev);
	}
	if (ev->n && ev->task == DLK_TASK_CLASSIFICATION) {
		cJSON *cm = cJSON_CreateArray();
		cJSON_AddNumberToObject(o, "testAccuracy", ev->accuracy);
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

void dlk_train_report_result(struct dlk_train_report *r, const struct dlk_project *spec,
                             const struct dlk_train_result *res, const char *bundle, int world)
{
	const struct dlk_ctx *ctx = r->ctx;
	char took[32];

	if (ctx->output == DLK_OUTPUT_JSON) {
		cJSON *o = result_json(spec, res, bundle);
		char *s = cJSON_Print(o);
		printf("%s\n", s);
		free(s);
		cJSON_Delete(o);
		return;
	}
	/* the run's training time, resumes included: what its report and its history say too */
	dlk_duration_span(dlk_history_training_sec(&res->history), took, sizeof(took));
	if (ctx->log_json) {
		/* the result is a line of the log too: its numbers as fields, the matrix included */
		cJSON *f = result_json(spec, res, bundle);
		char msg[512];
		char brief[256];
		if (res->eval.n)
			dlk_eval_brief(&res->eval, brief, sizeof(brief));
		if (res->eval.n)
			snprintf(msg, sizeof(msg), "trained %d epochs in %s: %s, test loss %.4f; model bundle: %s",
			         res->epochs_done, took, brief, res->eval.loss, bundle);
		else
			snprintf(msg, sizeof(msg), "trained %d epochs in %s: final train loss %.4f; model bundle: %s",
			         res->epochs_done, took, res->train_loss, bundle);
		if (!ctx->quiet)
			dlk_log_json(ctx, "info", msg, f);
		cJSON_Delete(f);
		return;
	}
	if (res->eval.n)
		print_report(stdout, spec, &res->eval, ctx->quiet);
	else
		printf("no test set: final train loss %.4f\n", res->train_loss);
	printf("\nmodel bundle: %s\n", bundle);
	if (!ctx->quiet && spec->model.task == DLK_TASK_LM)
		fprintf(stderr, "trained %d epochs in %s (%.0f tokens/s%s)\n", res->epochs_done, took,
		        res->train_samples_per_sec * world * lm_context(spec), world > 1 ? " over all workers" : "");
	else if (!ctx->quiet)
		fprintf(stderr, "trained %d epochs in %s (%.0f samples/s%s)\n", res->epochs_done, took,
		        res->train_samples_per_sec * world, world > 1 ? " over all workers" : "");
}

void dlk_train_note(void *ctx, enum dlk_trainer_level level, const char *msg)
{
	if (level == DLK_TRAINER_WARN)
		dlk_warn(ctx, "%s", msg);
	else
		dlk_info(ctx, "%s", msg);
}

/* ---- the run here, shown ---- */

struct here_view {
	struct dlk_ctx *ctx;
	const struct dlk_train_cli *cli;
	struct dlk_train_report show;
};

static int on_placed(void *ud, int rank, int world, struct dlk_err *err)
{
	struct here_view *v = ud;

	(void)world;
	/* only rank 0 draws in place */
	if (rank != 0)
		v->ctx->tty_err = 0;
	return dlk_train_report_open(&v->show, v->ctx, rank == 0 ? v->cli->metrics : NULL, err);
}

static void on_data(void *ud, const char *phase, const char *what, unsigned long long done, unsigned long long total)
{
	struct here_view *v = ud;

	v->show.phase = phase;
	dlk_train_report_data(&v->show, what, done, total);
}

static void on_start(void *ud, const struct dlk_project *spec, const struct dlk_training *tr, size_t n_train,
                     size_t n_test, int world)
{
	dlk_train_report_start(&((struct here_view *)ud)->show, spec, tr, n_train, n_test, world);
}

static void on_event(void *ud, const struct dlk_train_event *ev)
{
	dlk_train_report_event(&((struct here_view *)ud)->show, ev);
}

static void on_result(void *ud, const struct dlk_project *spec, const struct dlk_train_result *res, const char *bundle,
                      int world)
{
	dlk_train_report_result(&((struct here_view *)ud)->show, spec, res, bundle, world);
}

static void on_clear(void *ud)
{
	dlk_train_report_clear(&((struct here_view *)ud)->show);
}

static void on_here_note(void *ud, enum dlk_trainer_level level, const char *msg)
{
	struct here_view *v = ud;

	dlk_train_note(v->ctx, level, msg);
}

/* data.dataset: the store is opened with the global options' cluster client (commands/train_data.c) */
static int on_data_open(void *ud, const struct dlk_project *spec, int worker, const char *project_dir,
                        struct dlk_data_opts *dopts, void **data, struct dlk_err *err)
{
	struct dlk_train_data *td = NULL;
	int rc = dlk_train_data_open(ud, spec, worker, project_dir, dopts, &td, err);

	*data = td;
	return rc;
}

static void on_data_loaded(void *ud, void *data, int rank)
{
	dlk_train_data_done(ud, data, rank);
}

static void on_data_close(void *ud, void *data)
{
	(void)ud;
	dlk_train_data_free(data);
}

int dlk_train_here(struct dlk_ctx *ctx, const struct dlk_train_cli *cli, const struct dlk_project *spec, int worker)
{
	struct here_view v = { ctx, cli, { 0 } };
	struct dlk_trainer_sink sink = { on_here_note, &v, on_placed, on_data, on_start, on_event, on_result, on_clear };
	struct dlk_trainer_here_opts o;
	struct dlk_err err = DLK_ERR_INIT;
	int rc;

	v.show.ctx = ctx;
	v.show.bar.ctx = ctx;
	memset(&o, 0, sizeof(o));
	dlk_train_trainer_opts(cli, ctx->file, &o.run);
	o.worker = worker;
	o.verbose = ctx->verbose;
	o.metrics_port = cli->metrics_port;
	o.report = cli->report;
	o.data = (struct dlk_trainer_data_hooks){ on_data_open, on_data_loaded, on_data_close, ctx };
	rc = dlk_trainer_here(&o, spec, &sink, &err);
	if (rc)
		dlk_report(ctx, &err);
	dlk_train_report_close(&v.show);
	return rc;
}
