/* Model bundles: written atomically as a tar of model.json + weights.safetensors, read back to
 * the same network, and every kind of damage reported with the member and byte offset. */
#include "tests/unit/check.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/stat.h>

#include "lib/util/rng.h"
#include "lib/data/bpe.h"
#include "lib/train/bundle.h"
#include "lib/train/train.h"
#include "lib/util/buf.h"
#include "lib/util/hash.h"
#include "lib/util/mem.h"

static char dir[256];

static void write_tar(const char *path, const char *n1, const void *d1, size_t l1, const char *n2, const void *d2, size_t l2)
{
	struct archive *a = archive_write_new();
	archive_write_set_format_pax_restricted(a);
	archive_write_open_filename(a, path);
	const char *names[2] = { n1, n2 };
	const void *data[2] = { d1, d2 };
	size_t lens[2] = { l1, l2 };
	for (int i = 0; i < 2; i++) {
		if (!names[i])
			continue;
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, names[i]);
		archive_entry_set_size(e, (la_int64_t)lens[i]);
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_perm(e, 0644);
		archive_write_header(a, e);
		archive_write_data(a, data[i], lens[i]);
		archive_entry_free(e);
	}
	archive_write_close(a);
	archive_write_free(a);
}

/* members of a tar, read back with libarchive */
static int read_tar(const char *path, struct dlk_buf *json, struct dlk_buf *wts)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	int n = 0;
	archive_read_support_format_tar(a);
	if (archive_read_open_filename(a, path, 10240) != ARCHIVE_OK)
		return -1;
	while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
		struct dlk_buf *b = !strcmp(archive_entry_pathname(e), "model.json") ? json : wts;
		char tmp[8192];
		la_ssize_t r;
		while ((r = archive_read_data(a, tmp, sizeof(tmp))) > 0)
			dlk_buf_add(b, tmp, (size_t)r);
		n++;
	}
	archive_read_free(a);
	return n;
}

static struct dlk_err err;

static void expect_error(const char *what, const char *path, const char *needle)
{
	struct dlk_bundle b;
	err = (struct dlk_err)DLK_ERR_INIT;
	int rc = dlk_bundle_read(path, &b, &err);
	CHECK_MSG(rc == -1, "%s is refused", what);
	CHECK_CONTAINS(err.msg, needle);
	CHECK(b.weights == NULL && b.meta == NULL);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "%s/dlk-bundle-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir))
		return 1;
	char *path = xasprintf("%s/m.dlk", dir), *bad = xasprintf("%s/bad.dlk", dir);

	/* a small CNN, so conv tensors have 4-d shapes */
	struct dlk_layer_spec layers[] = {
		{ .kind = DLK_LAYER_CONV2D, .filters = 3, .kernel = 3, .stride = 1, .padding = 1 }, { .kind = DLK_LAYER_RELU },
		{ .kind = DLK_LAYER_MAXPOOL, .size = 2, .stride = 2 }, { .kind = DLK_LAYER_FLATTEN },
		{ .kind = DLK_LAYER_DROPOUT, .rate = 0.25f }, { .kind = DLK_LAYER_DENSE, .units = 4 },
	};
	struct dlk_model model = { .input = { 2, 6, 6 }, .input_rank = 3, .layers = layers, .n_layers = 6, .init = "torch" };
	struct dlk_dataset ds = DLK_DATASET_INIT;
	ds.n = 64;
	ds.shape[0] = 2;
	ds.shape[1] = ds.shape[2] = 6;
	ds.sample_size = 72;
	ds.n_classes = 4;
	ds.x = xmalloc(sizeof(float) * 64 * 72);
	ds.y = xmalloc(sizeof(int32_t) * 64);
	struct dlk_rng r;
	dlk_rng_seed(&r, 3);
	for (int i = 0; i < 64 * 72; i++)
		ds.x[i] = dlk_rng_uniform(&r);
	for (int i = 0; i < 64; i++)
		ds.y[i] = i % 4;
	dlk_dataset_add_source(&ds, "file:///data/train.csv",
	                       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	struct dlk_training tr = { .epochs = 1, .batch_size = 16, .optimizer = DLK_OPT_ADAM, .lr = 1e-3, .beta1 = 0.9,
	                           .beta2 = 0.999, .eps = 1e-8, .step_size = 1, .seed = 5, .threads = 1 };
	struct dlk_train_opts o = DLK_TRAIN_OPTS_INIT;
	o.model = &model;
	o.training = &tr;
	o.train = &ds;
	o.test = &ds;
	struct dlk_train_result res;
	CHECK(dlk_train_run(&o, &res, &err) == 0);
	char *classes[] = { "a", "b", "c", "d" };
	struct dlk_bundle_info info = { .name = "demo", .model = &model, .training = &tr, .net = &res.net,
	                                .classes = classes, .eval = &res.eval, .train_loss = res.train_loss,
	                                .train = &ds, .project_digest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	                                .seed = 18446744073709551615ULL, .started_at = res.started_at,
	                                .finished_at = res.finished_at, .history = &res.history };
	setenv("DLK_IMAGE", "registry.example/dlk:0.1.0", 1);
	err = (struct dlk_err)DLK_ERR_INIT;
	CHECK_MSG(dlk_bundle_write(path, &info, &err) == 0, "writes the bundle (%s)", err.msg);
	struct stat sb;
	CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0644);

	/* the archive is a plain tar with the two members */
	struct dlk_buf json = DLK_BUF_INIT, wts = DLK_BUF_INIT;
	CHECK(read_tar(path, &json, &wts) == 2);
	cJSON *j = cJSON_Parse(json.data);
	CHECK(j != NULL);
	cJSON *prov = cJSON_GetObjectItem(j, "provenance");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(prov, "build")), "cpu");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(prov, "dlk_version")), DLK_VERSION);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(prov, "seed")), "18446744073709551615");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(prov, "image")), "registry.example/dlk:0.1.0");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(prov, "started_at")), res.started_at);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(prov, "spec_sha256")), info.project_digest);
	cJSON *d0 = cJSON_GetArrayItem(cJSON_GetObjectItem(prov, "data"), 0);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(d0, "url")), "file:///data/train.csv");
	cJSON *met = cJSON_GetObjectItem(j, "metrics");
	CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItem(met, "test_accuracy")), res.eval.accuracy, 1e-12);
	CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(met, "confusion_matrix")) == 4);
	CHECK(cJSON_GetArraySize(cJSON_GetArrayItem(cJSON_GetObjectItem(met, "confusion_matrix"), 0)) == 4);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "classes"), 2)), "c");
	/* the run's history: one epoch of 4 steps, evaluated, read back by its own reader */
	struct dlk_history hist = DLK_HISTORY_INIT;
	CHECK(dlk_history_from_json(cJSON_GetObjectItem(j, "history"), "model.json", &hist, &err) == 0);
	CHECK(hist.n_epochs == 1 && hist.steps == 4 && hist.n_step_loss == 4 && hist.n_events == 1);
	CHECK(hist.epochs[0].have_test && hist.epochs[0].test_accuracy == res.eval.accuracy);
	CHECK(hist.epochs[0].train_loss == cJSON_GetNumberValue(cJSON_GetObjectItem(met, "train_loss")));
	dlk_history_release(&hist);
	char sha[65];
	dlk_sha256_hex(wts.data, wts.len, sha);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "weights"), "sha256")), sha);
	cJSON_Delete(j);

	/* safetensors: LE header length, 8-aligned JSON header, PyTorch names and shapes */
	uint64_t hl = 0;
	for (int i = 0; i < 8; i++)
		hl |= (uint64_t)(unsigned char)wts.data[i] << (8 * i);
	CHECK(hl % 8 == 0 && 8 + hl + 4 * res.net.n_params == wts.len);
	cJSON *h = cJSON_ParseWithLength(wts.data + 8, hl);
	cJSON *w0 = cJSON_GetObjectItem(h, "layers.0.weight"), *b5 = cJSON_GetObjectItem(h, "layers.5.bias");
	CHECK(w0 && b5 && cJSON_GetObjectItem(h, "__metadata__"));
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(w0, "dtype")), "F32");
	cJSON *s0 = cJSON_GetObjectItem(w0, "shape");
	CHECK(cJSON_GetArraySize(s0) == 4 && cJSON_GetArrayItem(s0, 0)->valuedouble == 3 &&
	      cJSON_GetArrayItem(s0, 1)->valuedouble == 2 && cJSON_GetArrayItem(s0, 3)->valuedouble == 3);
	cJSON *s5 = cJSON_GetObjectItem(cJSON_GetObjectItem(h, "layers.5.weight"), "shape");
	CHECK(cJSON_GetArraySize(s5) == 2 && cJSON_GetArrayItem(s5, 0)->valuedouble == 4 &&
	      cJSON_GetArrayItem(s5, 1)->valuedouble == 27);
	CHECK(cJSON_GetObjectItem(h, "layers.1.weight") == NULL);
	cJSON_Delete(h);

	/* read back: the same architecture, the same weights, the same predictions */
	struct dlk_bundle b;
	err = (struct dlk_err)DLK_ERR_INIT;
	CHECK_MSG(dlk_bundle_read(path, &b, &err) == 0, "reads the bundle back (%s)", err.msg);
	CHECK(b.n_weights == res.net.n_params && !memcmp(b.weights, res.net.params, 4 * b.n_weights));
	CHECK(b.model.n_layers == 6 && b.model.layers[4].rate == 0.25f && b.model.layers[0].padding == 1);
	CHECK(b.n_classes == 4 && !strcmp(b.classes[3], "d") && !strcmp(b.build, "cpu"));
	CHECK(b.tokenizer == NULL); /* a bundle without text data has none */
	struct dlk_net net;
	CHECK(dlk_bundle_net(&b, dlk_backend_cpu(), &net, &err) == 0);
	/* the batch the run evaluated with: a GEMM of another height may round differently */
	struct dlk_eval ev;
	CHECK(dlk_evaluate(&net, &ds, tr.batch_size, &ev, &err) == 0);
	CHECK(ev.accuracy == res.eval.accuracy && ev.loss == res.eval.loss);
	dlk_eval_release(&ev);
	dlk_net_release(&net);
	dlk_bundle_release(&b);

	/* no temporary file is left behind */
	char *ls = xasprintf("ls %s | wc -l", dir);
	FILE *p = popen(ls, "r");
	int files = 0;
	CHECK(fscanf(p, "%d", &files) == 1 && files == 1);
	pclose(p);
	free(ls);

	/* damage: truncation anywhere, a flipped weight byte, broken safetensors headers */
	struct dlk_buf whole = DLK_BUF_INIT;
	char emsg[256];
	CHECK(dlk_buf_read_file(&whole, path, 0, emsg, sizeof(emsg)) == 0);
	size_t cuts[] = { 0, 100, 700, 1536, whole.len / 2, whole.len - 2000 };
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		FILE *f = fopen(bad, "wb");
		fwrite(whole.data, 1, cuts[i], f);
		fclose(f);
		struct dlk_bundle bb;
		err = (struct dlk_err)DLK_ERR_INIT;
		CHECK_MSG(dlk_bundle_read(bad, &bb, &err) == -1 && err.msg[0], "truncated at %zu: %s", cuts[i], err.msg);
	}
	write_tar(bad, "model.json", json.data, json.len, NULL, NULL, 0);
	expect_error("a bundle without weights", bad, "'weights.safetensors' is missing");

	wts.data[wts.len - 3] ^= 0x40;
	write_tar(bad, "model.json", json.data, json.len, "weights.safetensors", wts.data, wts.len);
	expect_error("a flipped weight bit", bad, "weights.safetensors has sha256");
	CHECK_CONTAINS(err.hint, "corrupted");
	wts.data[wts.len - 3] ^= 0x40;

	/* a safetensors file whose digest matches but whose contents lie: rewrite model.json's sha */
	struct {
		const char *what, *from, *to, *needle;
	} lies[] = {
		{ "a wrong shape", "\"shape\":[4,27]", "\"shape\":[27,4]", "does not have the shape [4, 27]" },
		{ "a wrong dtype", "\"dtype\":\"F32\"", "\"dtype\":\"F16\"", "has dtype F16, not F32" },
		{ "an unknown tensor", "layers.5.bias", "layers.9.bias", "tensor 'layers.9.bias' is not a parameter" },
	};
	for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
		struct dlk_buf w2 = DLK_BUF_INIT, j2 = DLK_BUF_INIT;
		dlk_buf_add(&w2, wts.data, wts.len);
		char *at = memmem(w2.data, 8 + hl, lies[i].from, strlen(lies[i].from));
		CHECK(at != NULL && strlen(lies[i].from) == strlen(lies[i].to));
		if (!at)
			continue;
		memcpy(at, lies[i].to, strlen(lies[i].to));
		char s2[65];
		dlk_sha256_hex(w2.data, w2.len, s2);
		dlk_buf_add(&j2, json.data, json.len);
		char *sp = strstr(j2.data, sha);
		memcpy(sp, s2, 64);
		write_tar(bad, "model.json", j2.data, j2.len, "weights.safetensors", w2.data, w2.len);
		expect_error(lies[i].what, bad, lies[i].needle);
		dlk_buf_release(&w2);
		dlk_buf_release(&j2);
	}
	{
		/* a header length pointing past the end */
		struct dlk_buf w2 = DLK_BUF_INIT, j2 = DLK_BUF_INIT;
		dlk_buf_add(&w2, wts.data, wts.len);
		w2.data[5] = 0x7f;
		char s2[65];
		dlk_sha256_hex(w2.data, w2.len, s2);
		dlk_buf_add(&j2, json.data, json.len);
		memcpy(strstr(j2.data, sha), s2, 64);
		write_tar(bad, "model.json", j2.data, j2.len, "weights.safetensors", w2.data, w2.len);
		expect_error("a huge header length", bad, "runs past the end");
		dlk_buf_release(&w2);
		dlk_buf_release(&j2);
	}
	{
		/* a layer this dlk does not know: the kinds it knows, and why that may be */
		struct dlk_buf j2 = DLK_BUF_INIT;
		dlk_buf_add(&j2, json.data, json.len);
		char *k = strstr(j2.data, "\"dropout\"");
		CHECK(k != NULL);
		if (k) {
			memcpy(k, "\"lstm_xy\"", 9);
			write_tar(bad, "model.json", j2.data, j2.len, "weights.safetensors", wts.data, wts.len);
			expect_error("an unknown layer kind", bad, "has an unknown kind (this dlk knows: dense, conv2d, maxpool");
			CHECK_CONTAINS(err.hint, "newer dlk");
		}
		dlk_buf_release(&j2);
	}
	{
		/* per-channel normalisation (input_scaling.channel_mean / channel_std): one value a channel
		 * of the 2-channel input, or one for both, the list not given from mean / std; lists of
		 * another length, values not finite and a std of 0 are refused naming the field */
		static const struct {
			const char *scaling, *needle;
			float m0, m1, s0, s1;
		} cases[] = {
			{ "{\"scale\":0.5,\"mean\":0.25,\"std\":2,\"channel_mean\":[0.1,0.2],\"channel_std\":[3,4]}", NULL, 0.1f, 0.2f, 3, 4 },
			{ "{\"scale\":0.5,\"mean\":0.25,\"std\":2,\"channel_mean\":[0.1]}", NULL, 0.1f, 0.1f, 2, 2 },
			{ "{\"scale\":0.5,\"mean\":0.25,\"std\":2,\"channel_std\":[3,5]}", NULL, 0.25f, 0.25f, 3, 5 },
			{ "{\"scale\":0.5,\"mean\":0.25,\"std\":2,\"channel_mean\":[0.1,0.2,0.3]}",
			  "input_scaling.channel_mean must list 1 or 2 numbers", 0, 0, 0, 0 },
			{ "{\"scale\":0.5,\"mean\":0.25,\"std\":2,\"channel_std\":[1,0]}", "input_scaling.channel_std[1] is not a finite number other than 0", 0, 0, 0, 0 },
			{ "{\"scale\":0.5,\"mean\":0.25,\"std\":2,\"channel_mean\":\"0.1\"}", "input_scaling.channel_mean must list", 0, 0, 0, 0 },
			{ "{\"scale\":0.5,\"mean\":0.25,\"std\":2,\"channel_mean\":[null,1]}", "input_scaling.channel_mean[0] is not a finite number", 0, 0, 0, 0 },
		};
		for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
			cJSON *j = cJSON_ParseWithLength(json.data, json.len);
			cJSON_DeleteItemFromObject(j, "input_scaling");
			cJSON_AddItemToObject(j, "input_scaling", cJSON_Parse(cases[c].scaling));
			char *txt = cJSON_PrintUnformatted(j);
			write_tar(bad, "model.json", txt, strlen(txt), "weights.safetensors", wts.data, wts.len);
			if (cases[c].needle) {
				expect_error(cases[c].scaling, bad, cases[c].needle);
			} else {
				struct dlk_bundle cb = DLK_BUNDLE_INIT;
				err = (struct dlk_err)DLK_ERR_INIT;
				CHECK_MSG(dlk_bundle_read(bad, &cb, &err) == 0, "%s is read (%s)", cases[c].scaling, err.msg);
				CHECK_MSG(cb.n_channel_scaling == 2 && cb.channel_mean[0] == cases[c].m0 &&
				          cb.channel_mean[1] == cases[c].m1 && cb.channel_std[0] == cases[c].s0 &&
				          cb.channel_std[1] == cases[c].s1 && cb.mean == 0.25f,
				          "%s: each channel's mean and std", cases[c].scaling);
				dlk_bundle_release(&cb);
			}
			free(txt);
			cJSON_Delete(j);
		}
	}
	const char *future = "{\"format\": \"dlk-model\", \"format_version\": 9}";
	write_tar(bad, "model.json", future, strlen(future), "weights.safetensors", wts.data, wts.len);
	expect_error("a future format", bad, "format_version 9");
	write_tar(bad, "model.json", "{oops", 5, "weights.safetensors", wts.data, wts.len);
	expect_error("broken JSON", bad, "model.json is not valid JSON");
	write_tar(bad, "README", "hi", 2, NULL, NULL, 0);
	expect_error("an unrelated tar", bad, "'model.json' is missing");
	FILE *f = fopen(bad, "wb");
	fputs("this is not a tar archive at all, just text\n", f);
	fclose(f);
	expect_error("not an archive", bad, bad);
	expect_error("a missing file", "/nonexistent/x.dlk", "cannot open bundle '/nonexistent/x.dlk'");

	/* class names that do not match the outputs are refused before anything is written */
	info.n_class_names = 3;
	err = (struct dlk_err)DLK_ERR_INIT;
	CHECK(dlk_bundle_write(bad, &info, &err) == -1);
	CHECK_STR(err.msg, "data.classes names 3 classes but the model has 4 outputs");
	info.n_class_names = 4;

	/* a text model's tokenizer travels in the bundle and reads back the same */
	struct dlk_tokenizer *tok = dlk_bpe_train("aaabdaaabac aaab", 16, 300, &err);
	struct dlk_buf t1 = DLK_BUF_INIT, t2 = DLK_BUF_INIT;
	info.tokenizer = tok;
	err = (struct dlk_err)DLK_ERR_INIT;
	CHECK_MSG(dlk_bundle_write(bad, &info, &err) == 0, "writes a bundle with a tokenizer (%s)", err.msg);
	CHECK_MSG(dlk_bundle_read(bad, &b, &err) == 0, "reads it (%s)", err.msg);
	CHECK(b.tokenizer != NULL);
	if (b.tokenizer) {
		dlk_tokenizer_save(tok, &t1);
		dlk_tokenizer_save(b.tokenizer, &t2);
		CHECK(t1.len == t2.len && !memcmp(t1.data, t2.data, t1.len) && b.tokenizer->n_merges == 3);
	}
	dlk_bundle_release(&b);
	dlk_buf_release(&t1);
	dlk_buf_release(&t2);
	dlk_tokenizer_free(tok);
	info.tokenizer = NULL;

	/* writing into a missing directory fails cleanly */
	err = (struct dlk_err)DLK_ERR_INIT;
	CHECK(dlk_bundle_write("/nonexistent/dir/m.dlk", &info, &err) == -1);
	CHECK_CONTAINS(err.msg, "cannot create");

	dlk_buf_release(&whole);
	dlk_buf_release(&json);
	dlk_buf_release(&wts);
	dlk_train_result_release(&res);
	dlk_dataset_release(&ds);
	unlink(path);
	unlink(bad);
	rmdir(dir);
	free(path);
	free(bad);
	return CHECK_DONE();
}
