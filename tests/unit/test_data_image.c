/* PNG and JPEG decoding against the pixels Pillow decodes (fixtures of tests/data/images, written by
 * tests/data/images/make.py), resizing, image folders, and the seeded augmentation. */
#include "tests/unit/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/data/dataset.h"
#include "lib/data/image.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"
#include "lib/util/parallel.h"
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

/* file decoded to `mode` (L or RGB) equals Pillow's pixels exactly */
static void against_pillow(const char *file, const char *mode)
{
	struct dlk_buf img = DLK_BUF_INIT, want = DLK_BUF_INIT;
	struct dlk_image im = DLK_IMAGE_INIT;
	char *path = xasprintf("tests/data/images/%s", file), *stem = xstrdup(file), *dot = strrchr(stem, '.');
	char *exp;
	int ch = !strcmp(mode, "L") ? 1 : 3;

	*dot = '_';
	exp = xasprintf("tests/data/images/%s.%s.u8", stem, mode);
	CHECK_MSG(slurp(path, &img) == 0 && slurp(exp, &want) == 0, "%s: fixtures readable", file);
	int r = dlk_image_decode(img.data, img.len, file, ch, &im, &err);
	CHECK_MSG(r == 0, "%s as %s decodes: %s", file, mode, err.msg);
	if (r == 0) {
		size_t n = (size_t)im.w * (size_t)im.h * (size_t)ch, diff = 0, first = n;
		CHECK_MSG(n == want.len, "%s: %dx%dx%d = %zu values, Pillow %zu", file, im.w, im.h, ch, n, want.len);
		for (size_t i = 0; n == want.len && i < n; i++)
			if (im.px[i] != (uint8_t)want.data[i]) {
				diff++;
				if (first == n)
					first = i;
			}
		CHECK_MSG(n == want.len && diff == 0, "%s as %s: %zu of %zu values differ from Pillow's (first at %zu)", file,
		          mode, diff, n, first);
	}
	dlk_image_release(&im);
	dlk_buf_release(&img);
	dlk_buf_release(&want);
	free(path);
	free(stem);
	free(exp);
}

static void test_decode(void)
{
	static const char *const files[] = { "fmnist_gray.png", "fmnist_gray.jpg", "noise_rgb.png", "noise_rgba.png",
		                             "noise_la.png", "noise_pal.png", "noise_rgb.jpg", "noise_rgb_420.jpg" };
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		against_pillow(files[i], "L");
		against_pillow(files[i], "RGB");
	}
	against_pillow("gray16.png", "L");
}

static void test_bad_input(void)
{
	struct dlk_buf img = DLK_BUF_INIT;
	struct dlk_image im = DLK_IMAGE_INIT;

	CHECK(dlk_image_decode("GIF89a", 6, "x.gif", 1, &im, &err) < 0);
	CHECK_STR(err.msg, "'x.gif': neither a PNG nor a JPEG (by its first bytes)");
	CHECK(err.code == DLK_EXIT_CONFIG);
	if (slurp("tests/data/images/noise_rgb.png", &img) == 0) {
		for (size_t cut = 8; cut + 12 < img.len; cut += 13) { /* up to IEND */
			dlk_err_clear(&err);
			CHECK_MSG(dlk_image_decode(img.data, cut, "t.png", 3, &im, &err) < 0 && strstr(err.msg, "'t.png': "),
			          "a PNG cut at %zu is refused: %s", cut, err.msg);
		}
	}
	if (slurp("tests/data/images/noise_rgb.jpg", &img) == 0) {
		for (size_t cut = 3; cut < img.len; cut += 97) {
			dlk_err_clear(&err);
			CHECK_MSG(dlk_image_decode(img.data, cut, "t.jpg", 3, &im, &err) < 0 &&
			          strstr(err.msg, "'t.jpg': a damaged JPEG"), "a JPEG cut at %zu is refused: %s", cut, err.msg);
		}
	}
	CHECK(im.px == NULL);
	dlk_buf_release(&img);
}

static void test_resize(void)
{
	uint8_t px[4] = { 0, 100, 200, 40 };
	struct dlk_image in = { 2, 2, 1, px }, out = DLK_IMAGE_INIT;

	dlk_image_resize(&in, 2, 2, &out);
	CHECK(!memcmp(out.px, px, 4));
	dlk_image_release(&out);
	/* 2x2 -> 4x4, align_corners=False: the corners keep their values, (1,1) = 0.75/0.25 mixes */
	dlk_image_resize(&in, 4, 4, &out);
	CHECK(out.px[0] == 0 && out.px[3] == 100 && out.px[12] == 200 && out.px[15] == 40);
	CHECK_MSG(out.px[1] == 25, "x 0.25 of the way: %d", out.px[1]);
	CHECK_MSG(out.px[5] == (uint8_t)(0 * 0.5625 + 100 * 0.1875 + 200 * 0.1875 + 40 * 0.0625 + 0.5), "centre mix %d",
	          out.px[5]);
	dlk_image_release(&out);
	/* 4x1 -> 2x1: each output the mean of its two inputs */
	uint8_t row[4] = { 10, 20, 30, 41 };
	struct dlk_image r4 = { 4, 1, 1, row };
	dlk_image_resize(&r4, 2, 1, &out);
	CHECK_MSG(out.px[0] == 15 && out.px[1] == 36, "downscale %d %d", out.px[0], out.px[1]);
	dlk_image_release(&out);
}

static void copy_file(const char *from, const char *to)
{
	struct dlk_buf b = DLK_BUF_INIT;
	FILE *f;
	if (slurp(from, &b) == 0 && (f = fopen(to, "wb"))) {
		fwrite(b.data, 1, b.len, f);
		fclose(f);
	}
	dlk_buf_release(&b);
}

static void test_folder(void)
{
	char *dir = test_tmpdir("image"), *p;
	struct dlk_samples s = DLK_SAMPLES_INIT;
	char **found = NULL;
	int nf = 0, shape[3] = { 1, 28, 28 };

	if (!dir)
		return;
	/* classes sort by name: bag (0) before shirt (1); files by name within */
	p = xasprintf("%s/shirt", dir), mkdir(p, 0755), free(p);
	p = xasprintf("%s/bag", dir), mkdir(p, 0755), free(p);
	p = xasprintf("%s/shirt/b.png", dir), copy_file("tests/data/images/fmnist_gray.png", p), free(p);
	p = xasprintf("%s/shirt/a.jpg", dir), copy_file("tests/data/images/fmnist_gray.jpg", p), free(p);
	p = xasprintf("%s/bag/z.PNG", dir), copy_file("tests/data/images/noise_rgb.png", p), free(p);
	p = xasprintf("%s/bag/notes.txt", dir), copy_file("tests/data/images/make.py", p), free(p);
	CHECK_MSG(dlk_image_folder_load(dir, "imgs", shape, NULL, 0, 2, &s, &found, &nf, &err) == 0, "loads: %s", err.msg);
	CHECK(s.n == 3 && s.x8 && s.sample_size == 784);
	CHECK(nf == 2 && found && !strcmp(found[0], "bag") && !strcmp(found[1], "shirt"));
	CHECK(s.n == 3 && s.y[0] == 0 && s.y[1] == 1 && s.y[2] == 1 && s.max_label == 1);
	if (s.n == 3) {
		struct dlk_buf want = DLK_BUF_INIT;
		/* shirt/a.jpg is sample 1, shirt/b.png sample 2: Pillow's pixels, 28x28 as they are */
		CHECK(slurp("tests/data/images/fmnist_gray_png.L.u8", &want) == 0 && !memcmp(s.x8 + 2 * 784, want.data, 784));
		CHECK(slurp("tests/data/images/fmnist_gray_jpg.L.u8", &want) == 0 && !memcmp(s.x8 + 784, want.data, 784));
		dlk_buf_release(&want);
	}
	for (int i = 0; i < nf; i++)
		free(found[i]);
	free(found);
	dlk_samples_release(&s);

	/* data.classes numbers the classes */
	static const char *const classes[] = { "shirt", "bag" };
	CHECK(dlk_image_folder_load(dir, "imgs", shape, classes, 2, 1, &s, NULL, NULL, &err) == 0);
	CHECK(s.n == 3 && s.y[0] == 0 && s.y[1] == 0 && s.y[2] == 1);
	dlk_samples_release(&s);
	static const char *const only[] = { "shirt" };
	CHECK(dlk_image_folder_load(dir, "imgs", shape, only, 1, 1, &s, NULL, NULL, &err) < 0);
	CHECK_STR(err.msg, "'imgs/bag': a class folder that data.classes does not name");

	/* a damaged file is named with its class folder */
	p = xasprintf("%s/bag/broken.png", dir);
	FILE *f = fopen(p, "wb");
	if (f) {
		fputs("\x89PNG\r\n\x1a\nnope", f);
		fclose(f);
	}
	free(p);
	CHECK(dlk_image_folder_load(dir, "imgs", shape, NULL, 0, 2, &s, NULL, NULL, &err) < 0);
	CHECK_CONTAINS(err.msg, "'imgs/bag/broken.png': not a readable PNG");
	p = xasprintf("%s/empty", dir), mkdir(p, 0755), free(p);
	CHECK(dlk_image_folder_load(dir, "imgs", shape, NULL, 0, 2, &s, NULL, NULL, &err) < 0);
	CHECK_CONTAINS(err.msg, "'imgs/empty': a class folder without .png, .jpg or .jpeg files");
	p = xasprintf("%s/nothing", dir);
	CHECK(dlk_image_folder_load(p, "nothing", shape, NULL, 0, 2, &s, NULL, NULL, &err) < 0);
	CHECK_CONTAINS(err.msg, "cannot read the folder 'nothing'");
	free(p);
	test_tmpdir_remove(dir);
}

/* the same (seed, epoch, sample) gives the same crop and flip; the transform is a shift of the
 * padded image and a mirror, with padding at the raw value 0 */
static void test_augment(void)
{
	struct dlk_dataset ds = DLK_DATASET_INIT;
	size_t idx[3] = { 0, 1, 2 };
	float a[3 * 2 * 4 * 5], b[3 * 2 * 4 * 5];
	int differs = 0;

	ds.n = 3;
	ds.shape[0] = 2, ds.shape[1] = 4, ds.shape[2] = 5;
	ds.sample_size = 40;
	ds.storage = DLK_STORE_U8;
	ds.x8 = xmalloc(120);
	for (int i = 0; i < 120; i++)
		ds.x8[i] = (uint8_t)(i + 1);
	ds.per_channel = 1;
	for (int v = 0; v < 256; v++) {
		ds.lut_c[0][v] = (float)v;
		ds.lut_c[1][v] = (float)v + 1000;
	}
	ds.aug.flip = 1;
	ds.aug.pad = 2;
	ds.total = 3;

	dlk_dataset_gather_train(&ds, idx, 3, 42, 0, a);
	dlk_dataset_gather_train(&ds, idx, 3, 42, 0, b);
	CHECK(!memcmp(a, b, sizeof(a)));
	for (int e = 1; e < 6 && !differs; e++) {
		dlk_dataset_gather_train(&ds, idx, 3, 42, e, b);
		differs = memcmp(a, b, sizeof(a)) != 0;
	}
	CHECK_MSG(differs, "another epoch draws another transform");
	/* every output value is the draw's shifted, maybe mirrored, source value (or padding) */
	for (int e = 0; e < 8; e++) {
		int ok = 1;
		dlk_dataset_gather_train(&ds, idx, 3, 7, e, a);
		for (size_t i = 0; i < 3; i++) {
			int dy, dx, flip;
			dlk_augment_draw(&ds.aug, 7, e, i, &dy, &dx, &flip);
			ok = ok && dy >= -2 && dy <= 2 && dx >= -2 && dx <= 2;
			for (int c = 0; c < 2; c++)
				for (int y = 0; y < 4; y++)
					for (int x = 0; x < 5; x++) {
						int sy = y + dy, sx = (flip ? 4 - x : x) + dx;
						float want = sy < 0 || sy >= 4 || sx < 0 || sx >= 5 ? ds.lut_c[c][0]
						             : ds.lut_c[c][ds.x8[i * 40 + (size_t)c * 20 + (size_t)sy * 5 + (size_t)sx]];
						ok = ok && a[i * 40 + (size_t)c * 20 + (size_t)y * 5 + (size_t)x] == want;
					}
		}
		CHECK_MSG(ok, "epoch %d: the gathered values are the drawn transform", e);
	}
	/* without augmentation the training gather is the plain one, per-channel tables applied */
	ds.aug.flip = ds.aug.pad = 0;
	dlk_dataset_gather_train(&ds, idx, 3, 7, 3, a);
	dlk_dataset_gather(&ds, idx, 3, b);
	CHECK(!memcmp(a, b, sizeof(a)) && a[0] == 1 && a[20] == 1021);
	dlk_dataset_release(&ds);
}

/* data.images.noise: training draws new noise every epoch from (seed, epoch, sample), the same at
 * any thread count; evaluation draws the same noise every time, whatever the seed, the noise that
 * dlk_dataset_noisy_pixels gives as pixel / 255; the values stay pixels rounded within 0..255 */
static void test_noise(void)
{
	enum { N = 64, C = 1, H = 16, W = 16, S = C * H * W };
	struct dlk_dataset ds = DLK_DATASET_INIT;
	size_t idx[N];
	float *a = xmalloc(sizeof(float) * N * S), *b = xmalloc(sizeof(float) * N * S);
	float *p = xmalloc(sizeof(float) * N * S);
	double sum = 0, sq = 0;
	int ok = 1, n_mid = 0;

	ds.n = N;
	ds.shape[0] = C, ds.shape[1] = H, ds.shape[2] = W;
	ds.sample_size = S;
	ds.storage = DLK_STORE_U8;
	ds.x8 = xmalloc(N * S);
	for (int i = 0; i < N * S; i++)
		ds.x8[i] = (uint8_t)(i % 7 == 0 ? 0 : i % 7 == 1 ? 255 : 128);
	for (int v = 0; v < 256; v++)
		ds.lut[v] = (float)v;
	ds.aug.noise = 20.0f;
	ds.total = N;
	for (size_t i = 0; i < N; i++)
		idx[i] = i;

	dlk_parallel_set_threads(4);
	dlk_dataset_gather_train(&ds, idx, N, 42, 0, a);
	dlk_parallel_set_threads(1);
	dlk_dataset_gather_train(&ds, idx, N, 42, 0, b);
	CHECK_MSG(!memcmp(a, b, sizeof(float) * N * S), "training noise: the same bits on 1 thread and on the pool");
	dlk_dataset_gather_train(&ds, idx, N, 42, 1, b);
	CHECK_MSG(memcmp(a, b, sizeof(float) * N * S), "another epoch draws other noise");
	for (size_t k = 0; k < (size_t)N * S; k++) {
		ok = ok && a[k] >= 0 && a[k] <= 255 && a[k] == rintf(a[k]);
		if (ds.x8[k] == 128) {
			double d = a[k] - 128.0;
			sum += d, sq += d * d, n_mid++;
		}
	}
	CHECK_MSG(ok, "noisy values are whole pixel values within 0..255");
	sum /= n_mid, sq = sqrt(sq / n_mid - sum * sum);
	CHECK_MSG(fabs(sum) < 1.0 && fabs(sq - 20.0) < 1.0, "mid-grey pixels: mean shift %.3f, spread %.3f (want 0, 20)",
	          sum, sq);
	/* outside training: one noise per sample, the same every time and for every seed */
	dlk_dataset_gather(&ds, idx, N, a);
	dlk_dataset_gather_range(&ds, 0, N, b);
	CHECK_MSG(!memcmp(a, b, sizeof(float) * N * S), "evaluation noise: the same by index and by range");
	dlk_dataset_gather_train(&ds, idx, N, 42, 0, b);
	CHECK_MSG(memcmp(a, b, sizeof(float) * N * S), "evaluation noise is not training's");
	dlk_dataset_noisy_pixels(&ds, 0, N, p);
	ok = 1;
	for (size_t k = 0; k < (size_t)N * S; k++)
		ok = ok && p[k] == a[k] / 255.0f;
	CHECK_MSG(ok, "dlk_dataset_noisy_pixels gives the evaluation inputs / 255");
	/* the targets are the clean images, read from the inputs' own bytes */
	CHECK(!dlk_dataset_has_targets(&ds));
	ds.t_from_x8 = 1;
	ds.target_size = S;
	CHECK(dlk_dataset_has_targets(&ds));
	dlk_dataset_targets(&ds, NULL, 0, N, p);
	ok = 1;
	for (size_t k = 0; k < (size_t)N * S; k++)
		ok = ok && p[k] == (float)ds.x8[k] / 255.0f;
	CHECK_MSG(ok, "the targets are the clean pixels / 255");
	ds.aug.noise = 0;
	dlk_dataset_gather(&ds, idx, N, b);
	CHECK_MSG(b[0] == 0 && b[1] == 255 && b[2] == 128, "without noise the pixels as they are");
	free(a), free(b), free(p);
	dlk_dataset_release(&ds);
}

/* paired folders: inputs and targets matched by name, each decoded to its own shape */
static void test_pairs(void)
{
	char *dir = test_tmpdir("pairs"), *p, *in, *tg;
	struct dlk_samples s = DLK_SAMPLES_INIT;
	uint8_t *t = NULL;
	int ish[3] = { 1, 28, 28 }, tsh[3] = { 3, 14, 14 };

	if (!dir)
		return;
	in = xasprintf("%s/in", dir), mkdir(in, 0755);
	tg = xasprintf("%s/tg", dir), mkdir(tg, 0755);
	p = xasprintf("%s/b.png", in), copy_file("tests/data/images/fmnist_gray.png", p), free(p);
	p = xasprintf("%s/a.jpg", in), copy_file("tests/data/images/fmnist_gray.jpg", p), free(p);
	p = xasprintf("%s/b.jpg", tg), copy_file("tests/data/images/noise_rgb.jpg", p), free(p);
	p = xasprintf("%s/a.png", tg), copy_file("tests/data/images/fmnist_gray.png", p), free(p);
	CHECK_MSG(dlk_image_pairs_load(in, "in", tg, "tg", ish, tsh, 2, &s, &t, &err) == 0, "pairs load: %s", err.msg);
	CHECK(s.n == 2 && s.sample_size == 784 && t != NULL && s.y[0] == 0 && s.y[1] == 0);
	if (s.n == 2 && t) {
		struct dlk_buf want = DLK_BUF_INIT;
		uint8_t planar[3 * 14 * 14];
		/* pair 0 is a: its input a.jpg, its target a.png resized and made RGB */
		CHECK(slurp("tests/data/images/fmnist_gray_jpg.L.u8", &want) == 0 && !memcmp(s.x8, want.data, 784));
		if (slurp("tests/data/images/fmnist_gray.png", &want) == 0) {
			int sh[3] = { 3, 14, 14 };
			CHECK(dlk_image_sample(want.data, want.len, "a.png", sh, planar, &err) == 0 && !memcmp(t, planar, sizeof(planar)));
		}
		dlk_buf_release(&want);
	}
	dlk_samples_release(&s);
	free(t);
	p = xasprintf("%s/c.png", in), copy_file("tests/data/images/fmnist_gray.png", p), free(p);
	CHECK(dlk_image_pairs_load(in, "in", tg, "tg", ish, tsh, 2, &s, &t, &err) < 0 && t == NULL);
	CHECK_STR(err.msg, "'in/c.png': no target of the same name in 'tg'");
	p = xasprintf("%s/c.jpg", tg), copy_file("tests/data/images/noise_rgb.jpg", p), free(p);
	p = xasprintf("%s/a.jpeg", tg), copy_file("tests/data/images/noise_rgb.jpg", p), free(p);
	CHECK(dlk_image_pairs_load(in, "in", tg, "tg", ish, tsh, 2, &s, &t, &err) < 0);
	CHECK_STR(err.msg, "'tg/a.jpeg' and 'tg/a.png': two files of one name");
	free(in);
	free(tg);
	test_tmpdir_remove(dir);
}

int main(void)
{
	test_pairs();
	test_decode();
	test_bad_input();
	test_resize();
	test_folder();
	test_augment();
	test_noise();
	return CHECK_DONE();
}
