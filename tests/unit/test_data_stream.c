/* data.images.decode: stream. Image folders and paired folders read from their files each time a
 * sample is gathered give the same floats as the same folders decoded once (training's
 * augmentation, per-channel normalisation, noise and paired targets included), sharded or not,
 * through the loader threads at any thread count; auto streams only above a quarter of the
 * memory; a file that changes after the data loaded fails the dataset with its name. */
#include "tests/unit/check.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/data/dataset.h"
#include "lib/data/image.h"
#include "lib/train/loader.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"
#include "lib/util/parallel.h"
#include "tests/unit/tmpdir.h"

static struct dlk_err err = DLK_ERR_INIT;

static void copy_file(const char *from, const char *dir, const char *name)
{
	struct dlk_buf b = DLK_BUF_INIT;
	char msg[256], *to = xasprintf("%s/%s", dir, name);
	FILE *f;

	if (dlk_buf_read_file(&b, from, 1 << 24, msg, sizeof(msg)) == 0 && (f = fopen(to, "wb"))) {
		fwrite(b.data, 1, b.len, f);
		fclose(f);
	}
	dlk_buf_release(&b);
	free(to);
}

static void write_file(const char *dir, const char *name, const char *text)
{
	char *p = xasprintf("%s/%s", dir, name);
	FILE *f = fopen(p, "wb");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
	free(p);
}

static int same(const float *a, const float *b, size_t n)
{
	return !memcmp(a, b, n * sizeof(float));
}

/* everything a run reads of a and b is the same, bit for bit */
static void compare(const char *what, const struct dlk_dataset *a, const struct dlk_dataset *b)
{
	size_t n = a->n, m = a->sample_size, k = a->target_size;
	size_t *idx = xmalloc(n * sizeof(*idx));
	float *xa = xcalloc(n * m, sizeof(float)), *xb = xcalloc(n * m, sizeof(float));
	float *ta = xcalloc(n * (k ? k : 1), sizeof(float)), *tb = xcalloc(n * (k ? k : 1), sizeof(float));

	CHECK_MSG(a->n == b->n && b->sample_size == m && b->target_size == k, "%s: the same samples", what);
	for (size_t i = 0; i < n; i++)
		idx[i] = n - 1 - i;
	for (int epoch = 0; epoch < 2; epoch++) {
		dlk_dataset_gather_train(a, idx, n, 11, epoch, xa);
		dlk_dataset_gather_train(b, idx, n, 11, epoch, xb);
		CHECK_MSG(same(xa, xb, n * m), "%s: training's samples, epoch %d", what, epoch);
	}
	dlk_dataset_gather_range(a, 0, n, xa);
	dlk_dataset_gather_range(b, 0, n, xb);
	CHECK_MSG(same(xa, xb, n * m), "%s: the samples by range", what);
	dlk_dataset_gather(b, idx, n, xb);
	dlk_dataset_gather(a, idx, n, xa);
	CHECK_MSG(same(xa, xb, n * m), "%s: the samples by index", what);
	CHECK_MSG(dlk_dataset_has_targets(a) == dlk_dataset_has_targets(b), "%s: targets or none alike", what);
	if (dlk_dataset_has_targets(a)) {
		dlk_dataset_targets(a, idx, 0, n, ta);
		dlk_dataset_targets(b, idx, 0, n, tb);
		CHECK_MSG(same(ta, tb, n * k), "%s: the targets", what);
	}
	/* by parts, as loader threads take them, with the targets beside */
	for (int parts = 1; parts <= 3; parts += 2) {
		memset(xb, 0, n * m * sizeof(float));
		for (int p = 0; p < parts; p++)
			dlk_dataset_gather_train_part(b, idx, n, 11, 1, xb, k ? tb : NULL, p, parts);
		dlk_dataset_gather_train(a, idx, n, 11, 1, xa);
		CHECK_MSG(same(xa, xb, n * m), "%s: gathered in %d part(s)", what, parts);
		if (k) {
			dlk_dataset_targets(a, idx, 0, n, ta);
			CHECK_MSG(same(ta, tb, n * k), "%s: targets gathered in %d part(s)", what, parts);
		}
	}
	/* the loader, at 1 and 3 threads, two batches in turn */
	for (int threads = 1; threads <= 3; threads += 2) {
		struct dlk_loader *l = dlk_loader_start(b, (int)n, threads);
		const float *x, *t;
		const int32_t *y;
		int ok = 1;
		for (int epoch = 0; epoch < 2; epoch++) {
			dlk_loader_post(l, idx, n, 11, epoch);
			dlk_loader_wait(l, &x, &y, &t);
			dlk_dataset_gather_train(a, idx, n, 11, epoch, xa);
			ok = ok && same(xa, x, n * m);
			for (size_t i = 0; i < n; i++)
				ok = ok && y[i] == a->y[idx[i]];
			if (k) {
				dlk_dataset_targets(a, idx, 0, n, ta);
				ok = ok && t && same(ta, t, n * k);
			}
		}
		/* a batch in flight when the loader stops is waited for */
		dlk_loader_post(l, idx, n, 11, 2);
		dlk_loader_stop(l);
		CHECK_MSG(ok, "%s: the loader at %d thread(s) gives the same batches", what, threads);
	}
	free(idx), free(xa), free(xb), free(ta), free(tb);
}

/* the split loaded with decode once and with decode stream, compared */
static void once_and_stream(const char *what, struct dlk_data *spec, const struct dlk_data_opts *opts)
{
	struct dlk_dataset a = DLK_DATASET_INIT, b = DLK_DATASET_INIT;

	spec->images.decode = DLK_DECODE_ONCE;
	CHECK_MSG(dlk_data_load(spec, "train", opts, &a, &err) == 0, "%s: loads once: %s", what, err.msg);
	spec->images.decode = DLK_DECODE_STREAM;
	CHECK_MSG(dlk_data_load(spec, "train", opts, &b, &err) == 0, "%s: loads to stream: %s", what, err.msg);
	CHECK_MSG(a.storage == DLK_STORE_U8 && b.storage == DLK_STORE_FILES && !b.x8 && !b.t8 && dlk_dataset_streams(&b) &&
	              !dlk_dataset_streams(&a),
	          "%s: kept bytes, and files", what);
	CHECK(a.base == b.base && a.total == b.total && a.n_classes == b.n_classes);
	if (a.n && a.n == b.n)
		compare(what, &a, &b);
	CHECK_MSG(dlk_dataset_failed(&b, &err) == 0, "%s: nothing failed", what);
	dlk_dataset_release(&a);
	dlk_dataset_release(&b);
}

/* once_and_stream() of two shards by one process, and sharded: rank 1 of 2 takes a file, rank 1
 * of 3 samples of both */
static void shards_by_rank(const char *what, struct dlk_data *spec, struct dlk_data_opts *opts)
{
	char *w;
	once_and_stream(what, spec, opts);
	opts->shard_rank = 1, opts->shard_world = 2;
	once_and_stream(w = xasprintf("%s, rank 1 of 2 (a file each)", what), spec, opts);
	free(w);
	opts->shard_rank = 1, opts->shard_world = 3;
	once_and_stream(w = xasprintf("%s, rank 1 of 3 (samples of both)", what), spec, opts);
	free(w);
	opts->shard_rank = opts->shard_world = 0;
}

int main(void)
{
	char *dir = test_tmpdir("stream");
	struct dlk_data spec;
	struct dlk_data_opts opts;
	struct dlk_dataset ds = DLK_DATASET_INIT;
	int gray[3] = { 1, 28, 28 }, rgb[3] = { 3, 20, 20 };
	char *folder, *in, *tg, *sub;

	if (!dir)
		return 1;
	dlk_parallel_set_threads(2);
	folder = xasprintf("%s/folder", dir), mkdir(folder, 0755);
	static const char *const files[][2] = {
		{ "a-bag/1.png", "fmnist_gray.png" }, { "a-bag/2.jpg", "fmnist_gray.jpg" },
		{ "a-bag/3.png", "noise_rgb.png" },   { "b-shirt/1.jpg", "noise_rgb.jpg" },
		{ "b-shirt/2.png", "noise_pal.png" }, { "b-shirt/3.png", "noise_rgba.png" },
		{ "b-shirt/4.jpg", "noise_rgb_420.jpg" },
	};
	sub = xasprintf("%s/a-bag", folder), mkdir(sub, 0755), free(sub);
	sub = xasprintf("%s/b-shirt", folder), mkdir(sub, 0755), free(sub);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char *from = xasprintf("tests/data/images/%s", files[i][1]);
		copy_file(from, folder, files[i][0]);
		free(from);
	}
	in = xasprintf("%s/in", dir), mkdir(in, 0755);
	tg = xasprintf("%s/tg", dir), mkdir(tg, 0755);
	copy_file("tests/data/images/fmnist_gray.png", in, "a.png");
	copy_file("tests/data/images/fmnist_gray.jpg", in, "b.jpg");
	copy_file("tests/data/images/noise_rgb.png", in, "c.png");
	copy_file("tests/data/images/fmnist_gray.jpg", tg, "a.jpg");
	copy_file("tests/data/images/noise_rgb.png", tg, "b.png");
	copy_file("tests/data/images/noise_rgb_420.jpg", tg, "c.jpg");

	memset(&spec, 0, sizeof(spec));
	spec.format = DLK_DATA_IMAGES;
	spec.scale = 1.0f / 255, spec.mean = 0.25f, spec.std = 0.5f;
	spec.train.source.url = folder;
	memset(&opts, 0, sizeof(opts));
	memcpy(opts.shape, gray, sizeof(opts.shape));

	once_and_stream("a folder", &spec, &opts);
	spec.images.flip = 1, spec.images.crop_padding = 3;
	once_and_stream("flips and crops", &spec, &opts);
	memcpy(opts.shape, rgb, sizeof(opts.shape));
	spec.images.mean = (struct dlk_channel_values){ 3, { 0.2f, 0.3f, 0.4f } };
	spec.images.std = (struct dlk_channel_values){ 3, { 0.5f, 0.6f, 0.7f } };
	once_and_stream("RGB, resized, per-channel values", &spec, &opts);
	opts.shard_rank = 1, opts.shard_world = 3;
	once_and_stream("rank 1 of 3", &spec, &opts);
	spec.images.decode = DLK_DECODE_STREAM;
	CHECK(dlk_data_load(&spec, "train", &opts, &ds, &err) == 0 && ds.sharded && ds.base == 2 && ds.n == 2 && ds.total == 7);
	dlk_dataset_release(&ds);
	opts.shard_rank = opts.shard_world = 0;
	memset(&spec.images, 0, sizeof(spec.images));
	memcpy(opts.shape, gray, sizeof(opts.shape));

	/* a folder on a claim the pod mounts (pvc://CLAIM/PATH under opts.pvc_root) */
	{
		char *root = xasprintf("%s/pvc", dir), *mount = xasprintf("%s/claim-a", root);
		mkdir(root, 0755);
		CHECK(symlink(dir, mount) == 0);
		opts.pvc_root = root;
		spec.train.source.url = "pvc://claim-a/folder";
		once_and_stream("a folder on a claim", &spec, &opts);
		spec.images.decode = DLK_DECODE_AUTO;
		spec.train.source.url = "pvc://claim-a/none";
		CHECK(dlk_data_load(&spec, "train", &opts, &ds, &err) < 0);
		CHECK_CONTAINS(err.msg, "pvc://claim-a/none");
		spec.train.source.url = folder;
		opts.pvc_root = NULL;
		free(root), free(mount);
	}

	/* a denoiser's folder: noise on the inputs, the clean images as targets */
	spec.images.noise = 30;
	opts.task = DLK_TASK_IMAGE;
	once_and_stream("noise", &spec, &opts);
	spec.images.noise = 0;

	/* paired folders: the targets are read from their files too */
	spec.train.source.url = in;
	spec.train.targets.url = tg;
	memcpy(opts.target_shape, rgb, sizeof(opts.target_shape));
	once_and_stream("paired folders", &spec, &opts);
	opts.shard_rank = 0, opts.shard_world = 2;
	once_and_stream("paired folders, rank 0 of 2", &spec, &opts);
	opts.shard_rank = opts.shard_world = 0;
	opts.pvc_root = xasprintf("%s/pvc", dir);
	spec.train.source.url = "pvc://claim-a/in";
	spec.train.targets.url = "pvc://claim-a/tg";
	once_and_stream("paired folders on a claim", &spec, &opts);
	free((char *)opts.pvc_root);
	opts.pvc_root = NULL;
	spec.train.source.url = in;
	spec.train.targets.url = tg;

	/* paired WebDataset shards (KEY.png + KEY.target.png): the same pairs as the folders, the
	 * same bits read member by member or decoded once; a label or metadata member between is
	 * ignored */
	{
		char *mk = xasprintf("cd '%s' && mkdir -p pw && cd pw && cp ../in/a.png a.png && cp ../tg/a.jpg a.target.jpg && "
		                     "cp ../in/b.jpg b.jpg && printf 3 >b.cls && cp ../tg/b.png b.target.png && "
		                     "cp ../in/c.png c.png && echo '{}' >c.json && cp ../tg/c.jpg c.target.jpg && "
		                     "tar -cf ../p1.tar a.png a.target.jpg b.jpg b.cls b.target.png && "
		                     "tar --format=pax -cf ../p2.tar c.png c.json c.target.jpg && gzip -c ../p2.tar >../p2.tar.gz && "
		                     "tar -cf ../p-notarget.tar a.png a.target.jpg b.jpg && "
		                     "tar -cf ../p-noinput.tar a.target.jpg && "
		                     "tar -cf ../p-two.tar a.png a.target.jpg b.target.png && "
		                     "head -c 784 /dev/zero >d.u8 && tar -cf ../p-raw.tar a.png a.target.jpg d.u8",
		                     dir);
		CHECK(system(mk) == 0);
		free(mk);
		struct dlk_source ps[2] = { { 0 }, { 0 } };
		struct dlk_dataset fa = DLK_DATASET_INIT, sa = DLK_DATASET_INIT;
		ps[0].url = xasprintf("%s/p1.tar", dir);
		ps[1].url = xasprintf("%s/p2.tar", dir);
		spec.images.decode = DLK_DECODE_ONCE;
		CHECK(dlk_data_load(&spec, "train", &opts, &fa, &err) == 0);
		spec.train.source.url = spec.train.targets.url = NULL;
		spec.train.shards = ps;
		spec.train.n_shards = 2;
		for (int d = 0; d < 2; d++) {
			spec.images.decode = d ? DLK_DECODE_STREAM : DLK_DECODE_ONCE;
			CHECK_MSG(dlk_data_load(&spec, "train", &opts, &sa, &err) == 0 && sa.n == 3 && sa.target_size == 1200 &&
			              dlk_dataset_has_targets(&sa) && sa.y[1] == 0,
			          "paired shards load (%s): %s", d ? "stream" : "once", err.msg);
			if (sa.n == 3)
				compare(d ? "paired shards streamed and paired folders" : "paired shards and paired folders", &fa, &sa);
			dlk_dataset_release(&sa);
		}
		dlk_dataset_release(&fa);
		shards_by_rank("paired shards", &spec, &opts);
		/* compressed: decoded once, the targets too */
		free((char *)ps[1].url);
		ps[1].url = xasprintf("%s/p2.tar.gz", dir);
		spec.images.decode = DLK_DECODE_AUTO;
		CHECK_MSG(dlk_data_load(&spec, "train", &opts, &sa, &err) == 0 && sa.n == 3 && sa.storage == DLK_STORE_U8 &&
		              sa.t8 && sa.target_size == 1200,
		          "a compressed paired shard: decoded once (%s)", err.msg);
		dlk_dataset_release(&sa);
		/* what a paired shard must hold, named */
		static const char *const bad[][2] = {
			{ "p-notarget.tar", "sample 'b' has no target image: member 'b.target.png' or 'b.target.jpg' is missing" },
			{ "p-noinput.tar", "sample 'a' has no input image: member 'a.png' or 'a.jpg' is missing" },
			{ "p-two.tar", "sample 'b' has no input image" },
			{ "p-raw.tar", "member 'd.u8': paired images are PNG or JPEG files" },
		};
		spec.train.n_shards = 1;
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			for (int d = 0; d < 2; d++) {
				free((char *)ps[0].url);
				ps[0].url = xasprintf("%s/%s", dir, bad[i][0]);
				spec.images.decode = d ? DLK_DECODE_STREAM : DLK_DECODE_ONCE;
				CHECK_MSG(dlk_data_load(&spec, "train", &opts, &sa, &err) < 0 && err.code == DLK_EXIT_CONFIG,
				          "%s refused (%d)", bad[i][0], d);
				CHECK_CONTAINS(err.msg, bad[i][1]);
				dlk_dataset_release(&sa);
			}
		/* a folder of inputs with no targets */
		spec.train.shards = NULL;
		spec.train.n_shards = 0;
		spec.train.source.url = in;
		CHECK(dlk_data_load(&spec, "train", &opts, &sa, &err) < 0 && err.code == DLK_EXIT_CONFIG);
		CHECK_CONTAINS(err.msg, "model.task image reads paired images, and this folder has no 'targets' beside it");
		dlk_dataset_release(&sa);
		free((char *)ps[0].url), free((char *)ps[1].url);
		spec.train.targets.url = tg;
	}

	/* auto: decoded once, unless the decoded split passes a quarter of the memory. The pairs
	 * decode to 3 x (784 + 1200) bytes = 5952 */
	spec.images.decode = DLK_DECODE_AUTO;
	opts.memory = 4 * 5952;
	CHECK(dlk_data_load(&spec, "train", &opts, &ds, &err) == 0 && ds.storage == DLK_STORE_U8);
	dlk_dataset_release(&ds);
	opts.memory = 4 * 5952 - 1;
	CHECK(dlk_data_load(&spec, "train", &opts, &ds, &err) == 0 && ds.storage == DLK_STORE_FILES);
	dlk_dataset_release(&ds);
	opts.memory = 0;
	CHECK_MSG(dlk_data_load(&spec, "train", &opts, &ds, &err) == 0 && ds.storage == DLK_STORE_U8,
	          "this machine's memory holds a few images");
	dlk_dataset_release(&ds);

	/* a file that changes after the data loaded: zeros, and the first failing one in sample
	 * order named, whichever thread met it */
	spec.images.decode = DLK_DECODE_STREAM;
	CHECK(dlk_data_load(&spec, "train", &opts, &ds, &err) == 0);
	if (ds.n == 3) {
		float x[3 * 784], t[3 * 1200];
		size_t idx[3] = { 2, 1, 0 };
		write_file(in, "c.png", "\x89PNG\r\n\x1a\ndamaged");
		char *p = xasprintf("%s/b.png", tg);
		unlink(p);
		free(p);
		dlk_dataset_gather_range(&ds, 0, 1, x);
		CHECK(dlk_dataset_failed(&ds, &err) == 0);
		memset(x, 0xff, sizeof(x));
		dlk_dataset_gather_range(&ds, 0, 3, x);
		int zeros = 1;
		for (size_t i = 2 * 784; i < 3 * 784; i++)
			zeros = zeros && x[i] == ds.lut[0];
		CHECK_MSG(zeros, "a failed sample is raw zeros");
		CHECK(dlk_dataset_failed(&ds, &err) < 0 && err.code == DLK_EXIT_CONFIG);
		CHECK_CONTAINS(err.msg, "/in/c.png': not a readable PNG");
		dlk_dataset_targets(&ds, idx, 0, 3, t);
		CHECK(dlk_dataset_failed(&ds, &err) < 0);
		CHECK_CONTAINS(err.msg, "cannot read '");
		CHECK_CONTAINS(err.msg, "/tg/b.png'");
	}
	dlk_dataset_release(&ds);

	/* WebDataset shards: uncompressed ones are read member by member (pax headers, long names,
	 * metadata members between), compressed ones and raw payloads are decoded once */
	spec.train.targets.url = NULL;
	opts.task = DLK_TASK_CLASSIFICATION;
	char *cmd = xasprintf("cd '%s' && mkdir -p w && cd w && cp ../folder/a-bag/1.png k1.png && cp ../folder/a-bag/2.jpg "
	                      "k2.jpg && cp ../folder/b-shirt/1.jpg %0120d.jpg && cp ../folder/b-shirt/2.png k4.png && "
	                      "cp ../folder/b-shirt/3.png k5.png && for k in k1 k2 k4; do printf 0 >$k.cls; done && "
	                      "printf 1 >%0120d.cls && printf 1 >k5.cls && echo '{}' >k2.json && "
	                      "tar --format=pax -cf ../s1.tar k1.png k1.cls k2.jpg k2.json k2.cls %0120d.jpg %0120d.cls && "
	                      "tar --format=gnu -cf ../s2.tar k4.png k4.cls k5.cls k5.png && gzip -c ../s2.tar >../s2.tar.gz && "
	                      "head -c 784 /dev/zero >k6.u8 && printf 0 >k6.cls && tar -cf ../s3.tar k6.u8 k6.cls",
	                      dir, 7, 7, 7, 7);
	CHECK(system(cmd) == 0);
	free(cmd);
	struct dlk_source shards[2] = { { 0 }, { 0 } };
	shards[0].url = xasprintf("%s/s1.tar", dir);
	shards[1].url = xasprintf("%s/s2.tar", dir);
	spec.train.shards = shards;
	spec.train.n_shards = 2;
	spec.train.source.url = NULL;
	memcpy(opts.shape, rgb, sizeof(opts.shape));
	spec.images.flip = 1;
	shards_by_rank("two tar shards", &spec, &opts);
	spec.images.decode = DLK_DECODE_STREAM;
	CHECK(dlk_data_load(&spec, "train", &opts, &ds, &err) == 0 && ds.n == 5 && ds.storage == DLK_STORE_FILES);
	if (ds.n == 5) {
		CHECK(ds.y[0] == 0 && ds.y[2] == 1 && ds.y[4] == 1);
		CHECK_CONTAINS(ds.files->names[3], "/s2.tar: k4.png");
	}
	dlk_dataset_release(&ds);
	/* compressed: streamed from its tar, unpacked once into the cache (stream), the same samples;
	 * decoded once (auto) */
	free((char *)shards[1].url);
	shards[1].url = xasprintf("%s/s2.tar.gz", dir);
	char *cache = xasprintf("%s/cache", dir), *unpacked = NULL;
	opts.cache_dir = cache;
	CHECK_MSG(dlk_data_load(&spec, "train", &opts, &ds, &err) == 0 && ds.n == 5 && ds.storage == DLK_STORE_FILES,
	          "a compressed shard streamed (%s)", err.msg);
	if (ds.n == 5) {
		CHECK(ds.y[0] == 0 && ds.y[2] == 1 && ds.y[4] == 1);
		CHECK_CONTAINS(ds.files->names[3], "/s2.tar.gz: k4.png");
		unpacked = xstrdup(ds.files->shards[ds.files->shard[3]]);
		CHECK_CONTAINS(unpacked, "/cache/unpacked-");
	}
	dlk_dataset_release(&ds);
	if (unpacked) {
		struct dlk_buf a = DLK_BUF_INIT, b = DLK_BUF_INIT;
		char *plain = xasprintf("%s/s2.tar", dir), msg[128];
		CHECK(!dlk_buf_read_file(&a, unpacked, 1 << 24, msg, sizeof(msg)) &&
		      !dlk_buf_read_file(&b, plain, 1 << 24, msg, sizeof(msg)) && a.len == b.len &&
		      !memcmp(a.data, b.data, a.len));
		dlk_buf_release(&a);
		dlk_buf_release(&b);
		free(plain);
		free(unpacked);
	}
	opts.cache_dir = NULL;
	free(cache);
	spec.images.decode = DLK_DECODE_AUTO;
	opts.memory = 1;
	CHECK_MSG(dlk_data_load(&spec, "train", &opts, &ds, &err) == 0 && ds.n == 5 && ds.storage == DLK_STORE_U8,
	          "a compressed shard among them: all decoded once (%s)", err.msg);
	dlk_dataset_release(&ds);
	/* raw bytes are not images to stream */
	free((char *)shards[1].url);
	shards[1].url = xasprintf("%s/s3.tar", dir);
	memcpy(opts.shape, gray, sizeof(opts.shape));
	CHECK_MSG(dlk_data_load(&spec, "train", &opts, &ds, &err) == 0 && ds.n == 4 && ds.storage == DLK_STORE_U8,
	          "a shard of .u8 payloads among them: all decoded once (%s)", err.msg);
	dlk_dataset_release(&ds);
	/* a member that is no image: named when the shard is indexed, before any batch, as decoding
	 * once names it */
	{
		char *mk = xasprintf("cd '%s/w' && printf 'not an image' >bad.png && printf 0 >bad.cls && "
		                     "tar -cf ../s-bad.tar k1.png k1.cls bad.png bad.cls", dir);
		CHECK(system(mk) == 0);
		free(mk);
		char *keep = (char *)shards[0].url;
		shards[0].url = xasprintf("%s/s-bad.tar", dir);
		for (int d = 0; d < 2; d++) {
			spec.images.decode = d ? DLK_DECODE_STREAM : DLK_DECODE_ONCE;
			CHECK_MSG(dlk_data_load(&spec, "train", &opts, &ds, &err) < 0 && err.code == DLK_EXIT_CONFIG,
			          "a shard with a member that is no image is refused when it loads (%s)", d ? "stream" : "once");
			CHECK_CONTAINS(err.msg, "/s-bad.tar: bad.png': neither a PNG nor a JPEG (by its first bytes)");
			dlk_dataset_release(&ds);
		}
		free((char *)shards[0].url);
		shards[0].url = keep;
		spec.images.decode = DLK_DECODE_STREAM;
	}
	/* a streamed shard truncated after the run started: the member named */
	spec.images.decode = DLK_DECODE_STREAM;
	spec.train.n_shards = 1;
	CHECK(dlk_data_load(&spec, "train", &opts, &ds, &err) == 0 && ds.n == 3);
	if (ds.n == 3) {
		float x[3 * 784];
		char *p = xasprintf("%s/s1.tar", dir);
		CHECK(truncate(p, 1024) == 0);
		free(p);
		dlk_dataset_gather_range(&ds, 0, 3, x);
		CHECK(dlk_dataset_failed(&ds, &err) < 0);
		CHECK_CONTAINS(err.msg, "/s1.tar: k1.png': ");
	}
	dlk_dataset_release(&ds);
	free((char *)shards[0].url);
	free((char *)shards[1].url);

	dlk_parallel_shutdown();
	free(folder), free(in), free(tg);
	test_tmpdir_remove(dir);
	return CHECK_DONE();
}
