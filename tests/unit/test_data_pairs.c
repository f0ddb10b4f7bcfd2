/* Paired image folders through dlk_data_load (format images with data.<split>.targets): the
 * inputs as bytes, the targets as floats pixel / 255 in the model's output shape (the input's
 * when not given), a sharded load cutting targets with their inputs, and the errors. */
#include "tests/unit/check.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/data/dataset.h"
#include "lib/data/image.h"
#include "lib/project/project.h"
#include "lib/util/buf.h"
#include "lib/util/hash.h"
#include "lib/util/mem.h"
#include "tests/unit/tmpdir.h"

static struct dlk_err err = DLK_ERR_INIT;

static int slurp(const char *path, struct dlk_buf *b)
{
	char msg[256];
	dlk_buf_reset(b);
	if (dlk_buf_read_file(b, path, 1 << 24, msg, sizeof(msg)) < 0) {
		printf("# %s: %s\n", path, msg);
		return -1;
	}
	return 0;
}

static void copy_file(const char *from, const char *dir, const char *name)
{
	struct dlk_buf b = DLK_BUF_INIT;
	char *to = xasprintf("%s/%s", dir, name);
	FILE *f;
	if (slurp(from, &b) == 0 && (f = fopen(to, "wb"))) {
		fwrite(b.data, 1, b.len, f);
		fclose(f);
	}
	dlk_buf_release(&b);
	free(to);
}

/* the target file decoded to shape, as the floats the loader must give */
static int want_target(const char *file, const int shape[3], float *out)
{
	struct dlk_buf b = DLK_BUF_INIT;
	size_t n = (size_t)shape[0] * (size_t)shape[1] * (size_t)shape[2];
	uint8_t *px = xmalloc(n);
	int r = slurp(file, &b) == 0 && dlk_image_sample(b.data, b.len, file, shape, px, &err) == 0 ? 0 : -1;
	for (size_t i = 0; r == 0 && i < n; i++)
		out[i] = (float)px[i] / 255.0f;
	free(px);
	dlk_buf_release(&b);
	return r;
}

/* A dataset of the pairs (data.dataset), its manifest's paths below: set/train/in/..., the
 * files in the test's folders; a path that names another file gets a wrong digest */
static const char *ds_root;
static const char *const ds_paths[] = { "set/.hidden/x.png", "set/README", "set/train/in/a.png", "set/train/in/b.jpg",
	                                "set/train/tg/a.jpg", "set/train/tg/b.png" };
static int ds_resolved;

static int fake_list(void *ctx, const char *d, char ***paths, size_t *n, struct dlk_err *e)
{
	size_t k = sizeof(ds_paths) / sizeof(ds_paths[0]);
	(void)ctx, (void)e;
	CHECK_STR(d, ".");
	*paths = xcalloc(k + 1, sizeof(**paths));
	for (size_t i = 0; i < k; i++)
		(*paths)[i] = xstrdup(ds_paths[i]);
	*n = k;
	return 0;
}

static int fake_resolve(void *ctx, const char *path, char **local, char sha256[65], struct dlk_err *e)
{
	const char *corrupt = ctx;
	if (strncmp(path, "set/train/", 10))
		return dlk_errf(e, DLK_EXIT_CONFIG, "dataset has no file '%s'", path);
	*local = xasprintf("%s/%s%s", ds_root, !strncmp(path + 10, "in/", 3) ? "in/" : "tg/", path + 13);
	ds_resolved++;
	if (dlk_sha256_file(*local, sha256) < 0)
		return dlk_errf(e, DLK_EXIT_FAIL, "cannot hash '%s'", *local);
	if (corrupt && !strcmp(path, corrupt))
		sha256[0] = sha256[0] == '0' ? '1' : '0';
	return 0;
}

int main(void)
{
	char *dir = test_tmpdir("pairs");
	struct dlk_data spec;
	struct dlk_data_opts opts;
	struct dlk_dataset ds = DLK_DATASET_INIT;
	static float want[2][3 * 28 * 28];
	static float tt[2 * 3 * 28 * 28];
	int in_shape[3] = { 1, 28, 28 }, half[3] = { 3, 14, 14 };
	char *in, *tg;

	if (!dir)
		return 1;
	in = xasprintf("%s/in", dir), mkdir(in, 0755);
	tg = xasprintf("%s/tg", dir), mkdir(tg, 0755);
	copy_file("tests/data/images/fmnist_gray.png", in, "a.png");
	copy_file("tests/data/images/fmnist_gray.jpg", in, "b.jpg");
	copy_file("tests/data/images/fmnist_gray.jpg", tg, "a.jpg");
	copy_file("tests/data/images/noise_rgb.png", tg, "b.png");

	memset(&spec, 0, sizeof(spec));
	spec.format = DLK_DATA_IMAGES;
	spec.scale = 1.0f / 255, spec.std = 1;
	spec.train.source.url = in;
	spec.train.targets.url = tg;
	memset(&opts, 0, sizeof(opts));
	memcpy(opts.shape, in_shape, sizeof(opts.shape));

	/* no target shape: the input's */
	CHECK_MSG(dlk_data_load(&spec, "train", &opts, &ds, &err) == 0, "pairs load: %s", err.msg);
	/* the targets stay bytes (4 times less memory than floats), read as byte / 255 */
	CHECK(ds.n == 2 && ds.target_size == 784 && ds.t8 && !ds.t && ds.storage == DLK_STORE_U8 &&
	      dlk_dataset_has_targets(&ds));
	if (ds.n == 2 && ds.t8) {
		char *a = xasprintf("%s/a.jpg", tg), *b = xasprintf("%s/b.png", tg);
		dlk_dataset_targets(&ds, NULL, 0, 2, tt);
		CHECK(want_target(a, in_shape, want[0]) == 0 && want_target(b, in_shape, want[1]) == 0);
		CHECK_MSG(!memcmp(tt, want[0], 784 * sizeof(float)) && !memcmp(tt + 784, want[1], 784 * sizeof(float)),
		          "targets are the target images / 255, in name order");
		size_t rev[2] = { 1, 0 };
		dlk_dataset_targets(&ds, rev, 0, 2, tt);
		CHECK_MSG(!memcmp(tt, want[1], 784 * sizeof(float)), "targets by index");
		float mx = 0;
		for (size_t i = 0; i < 2 * 784; i++)
			mx = tt[i] > mx ? tt[i] : mx;
		CHECK(mx > 0.5f && mx <= 1.0f);
		free(a), free(b);
	}
	dlk_dataset_release(&ds);

	/* the model's output shape: RGB at half the size */
	memcpy(opts.target_shape, half, sizeof(opts.target_shape));
	CHECK_MSG(dlk_data_load(&spec, "train", &opts, &ds, &err) == 0, "pairs load: %s", err.msg);
	CHECK(ds.n == 2 && ds.target_size == 3 * 14 * 14 && ds.sample_size == 784);
	if (ds.n == 2 && ds.t8) {
		char *b = xasprintf("%s/b.png", tg);
		dlk_dataset_targets(&ds, NULL, 0, 2, tt);
		CHECK(want_target(b, half, want[1]) == 0 && !memcmp(tt + 588, want[1], 588 * sizeof(float)));
		free(b);
	}
	dlk_dataset_release(&ds);

	/* sharded: rank 1 of 2 gets the second pair, its target with it */
	opts.shard_rank = 1, opts.shard_world = 2;
	CHECK_MSG(dlk_data_load(&spec, "train", &opts, &ds, &err) == 0, "sharded load: %s", err.msg);
	CHECK(ds.n == 1 && ds.base == 1 && ds.total == 2 && ds.target_size == 588 && ds.t8);
	if (ds.n == 1 && ds.t8) {
		dlk_dataset_targets(&ds, NULL, 0, 1, tt);
		CHECK(!memcmp(tt, want[1], 588 * sizeof(float)));
	}
	dlk_dataset_release(&ds);
	opts.shard_rank = opts.shard_world = 0;

	/* errors name the folder or the file */
	copy_file("tests/data/images/fmnist_gray.png", in, "c.png");
	CHECK(dlk_data_load(&spec, "train", &opts, &ds, &err) < 0 && err.code == DLK_EXIT_CONFIG);
	CHECK_CONTAINS(err.msg, "/in/c.png': no target of the same name in '");
	spec.train.targets.url = "https://example.org/targets";
	CHECK(dlk_data_load(&spec, "train", &opts, &ds, &err) < 0);
	CHECK_STR(err.msg, "'https://example.org/targets': paired images are read from folders, not a URL");
	CHECK_CONTAINS(err.hint, "tar shards of KEY.png + KEY.target.png members, which a URL can name");
	char *none = xasprintf("%s/none", dir);
	spec.train.targets.url = none;
	CHECK(dlk_data_load(&spec, "train", &opts, &ds, &err) < 0);
	CHECK_CONTAINS(err.msg, "/none': not a folder");
	spec.train.targets.url = tg;

	/* folders inside a dataset: listed from its manifest, each file resolved and checked against
	 * the digest it lists, the same samples as the folders on disk; a sharded worker resolves its
	 * part only */
	ds_root = dir;
	opts.resolve = fake_resolve;
	opts.list = fake_list;
	spec.train.source.url = "set/train/in";
	spec.train.targets.url = "set/train/tg";
	CHECK_MSG(dlk_data_load(&spec, "train", &opts, &ds, &err) == 0, "pairs from a dataset: %s", err.msg);
	CHECK_MSG(ds.n == 2 && ds.target_size == 588 && ds.t8 && ds_resolved == 4, "n %zu target %zu resolved %d", ds.n,
	          ds.target_size, ds_resolved);
	if (ds.n == 2 && ds.t8) {
		char *a = xasprintf("%s/a.jpg", tg), *b = xasprintf("%s/b.png", tg);
		dlk_dataset_targets(&ds, NULL, 0, 2, tt);
		CHECK(want_target(a, half, want[0]) == 0 && want_target(b, half, want[1]) == 0);
		CHECK_MSG(!memcmp(tt, want[0], 588 * sizeof(float)) && !memcmp(tt + 588, want[1], 588 * sizeof(float)),
		          "the dataset's pairs are the folders' pairs");
		free(a), free(b);
	}
	dlk_dataset_release(&ds);
	ds_resolved = 0;
	opts.shard_rank = 1, opts.shard_world = 2;
	CHECK_MSG(dlk_data_load(&spec, "train", &opts, &ds, &err) == 0, "sharded pairs from a dataset: %s", err.msg);
	CHECK(ds.n == 1 && ds.base == 1 && ds.total == 2 && ds_resolved == 2);
	dlk_dataset_release(&ds);
	opts.shard_rank = opts.shard_world = 0;
	opts.resolve_ctx = (void *)"set/train/tg/b.png";
	CHECK(dlk_data_load(&spec, "train", &opts, &ds, &err) < 0 && err.code == DLK_EXIT_CONFIG);
	CHECK_CONTAINS(err.msg, "'set/train/tg/b.png' (");
	CHECK_CONTAINS(err.msg, "not to the ");
	opts.resolve_ctx = NULL;
	spec.train.targets.url = "set/train/clean";
	CHECK(dlk_data_load(&spec, "train", &opts, &ds, &err) < 0 && err.code == DLK_EXIT_CONFIG);
	CHECK_STR(err.msg, "'set/train/clean': the dataset has no folder of that name");
	CHECK_CONTAINS(err.hint, "'source' and 'targets' are folders inside it");
	/* without targets, a class folder of the dataset: its sub-folders are the classes */
	spec.train.targets.url = NULL;
	spec.train.source.url = "set/train";
	CHECK_MSG(dlk_data_load(&spec, "train", &opts, &ds, &err) == 0, "class folders from a dataset: %s", err.msg);
	CHECK(ds.n == 4 && ds.n_class_names == 2 && ds.class_names && !strcmp(ds.class_names[0], "in") &&
	      !strcmp(ds.class_names[1], "tg"));
	dlk_dataset_release(&ds);
	spec.train.source.url = ".";
	CHECK(dlk_data_load(&spec, "train", &opts, &ds, &err) < 0);
	CHECK_CONTAINS(err.msg, "'./set': a class folder without .png, .jpg or .jpeg files");

	free(none);
	free(in);
	free(tg);
	test_tmpdir_remove(dir);
	return CHECK_DONE();
}
