/* PNG and JPEG decoding, resizing, and image folders read into samples. */
#include "lib/data/image.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdio.h>
/* jpeglib.h needs stdio.h's FILE first */
#include <jpeglib.h>
#include <png.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/util/buf.h"
#include "lib/util/machine.h"
#include "lib/util/mem.h"

void dlk_image_release(struct dlk_image *im)
{
	free(im->px);
	im->px = NULL;
	im->w = im->h = im->c = 0;
}

/* Pillow's ITU-R 601-2 luma in 16-bit fixed point, so that gray images match Pillow's convert("L") */
static uint8_t luma(const uint8_t *rgb)
{
	return (uint8_t)((rgb[0] * 19595u + rgb[1] * 38470u + rgb[2] * 7471u + 0x8000u) >> 16);
}

/* Converts n pixels of `from` channels (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA) to `to` (1 or 3). */
static void convert_pixels(const uint8_t *src, int from, uint8_t *dst, int to, size_t n)
{
	for (size_t i = 0; i < n; i++, src += from) {
		if (to == 1)
			*dst++ = from >= 3 ? luma(src) : src[0];
		else if (from >= 3) {
			*dst++ = src[0];
			*dst++ = src[1];
			*dst++ = src[2];
		} else {
			*dst++ = src[0];
			*dst++ = src[0];
			*dst++ = src[0];
		}
	}
}

static int check_size(const char *name, unsigned long w, unsigned long h, struct dlk_err *err)
{
	if (!w || !h)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': the image is empty (%lux%lu)", name, w, h);
	if (w > DLK_IMAGE_MAX_PIXELS || h > DLK_IMAGE_MAX_PIXELS || (unsigned long long)w * h > DLK_IMAGE_MAX_PIXELS)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': the image is %lux%lu, more than the %u pixels dlk decodes",
		                name, w, h, DLK_IMAGE_MAX_PIXELS);
	return 0;
}

static int decode_png(const void *buf, size_t len, const char *name, int channels, struct dlk_image *out,
                      struct dlk_err *err)
{
	png_image im;
	uint8_t *raw = NULL;
	int from;

	memset(&im, 0, sizeof(im));
	im.version = PNG_IMAGE_VERSION;
	if (!png_image_begin_read_from_memory(&im, buf, len))
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': not a readable PNG: %s", name, im.message);
	if (check_size(name, im.width, im.height, err) < 0) {
		png_image_free(&im);
		return -1;
	}
	/* Keep the alpha channel in what libpng gives back: asked for a format without alpha, it
	 * composites onto a background, which Pillow's convert() does not do. 8-bit output of 16-bit
	 * data is the sRGB encoding of the linear values, as Pillow's truncation of a 16-bit PNG is. */
	if (im.format & PNG_FORMAT_FLAG_LINEAR) {
		/* 16-bit samples: libpng takes them as linear light and would gamma-encode them into
		 * 8 bits; read them as they are (an alpha channel composited onto black, the one case
		 * libpng's linear reading changes the colour values) and round v / 257 */
		im.format = im.format & PNG_FORMAT_FLAG_COLOR ? PNG_FORMAT_LINEAR_RGB : PNG_FORMAT_LINEAR_Y;
		from = im.format & PNG_FORMAT_FLAG_COLOR ? 3 : 1;
	} else if (im.format & PNG_FORMAT_FLAG_COLOR) {
		im.format = PNG_FORMAT_RGBA;
		from = 4;
	} else {
		im.format = PNG_FORMAT_GA;
		from = 2;
	}
	raw = xmalloc(PNG_IMAGE_SIZE(im));
	if (!png_image_finish_read(&im, NULL, raw, 0, NULL)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': a damaged PNG: %s", name, im.message);
		png_image_free(&im);
		free(raw);
		return -1;
	}
	if (im.format & PNG_FORMAT_FLAG_LINEAR) {
		size_t n = (size_t)im.width * im.height * (size_t)from;
		const uint16_t *w = (const uint16_t *)(void *)raw;
		for (size_t i = 0; i < n; i++)
			raw[i] = (uint8_t)(((uint32_t)w[i] * 255u + 32895u) >> 16);
	}
	out->w = (int)im.width;
	out->h = (int)im.height;
	out->c = channels;
	out->px = xmalloc((size_t)out->w * (size_t)out->h * (size_t)channels);
	convert_pixels(raw, from, out->px, channels, (size_t)out->w * (size_t)out->h);
	free(raw);
	png_image_free(&im);
	return 0;
}

struct jpeg_fail {
	struct jpeg_error_mgr mgr;
	jmp_buf jump;
	char msg[JMSG_LENGTH_MAX];
};

static void jpeg_fail_exit(j_common_ptr cinfo)
{
	struct jpeg_fail *f = (struct jpeg_fail *)cinfo->err;
	f->mgr.format_message(cinfo, f->msg);
	longjmp(f->jump, 1);
}

/* libjpeg's default prints warnings (a truncated file, say) to stderr; the library never prints,
 * and a corrupt-data warning is an error here: the pixels would not be what the file meant */
static void jpeg_fail_warn(j_common_ptr cinfo, int level)
{
	if (level < 0)
		jpeg_fail_exit(cinfo);
}

static int decode_jpeg(const void *buf, size_t len, const char *name, int channels, struct dlk_image *out,
                       struct dlk_err *err)
{
	struct jpeg_decompress_struct cinfo;
	struct jpeg_fail fail;
	uint8_t *volatile raw = NULL;
	volatile int from = 0;

	memset(&cinfo, 0, sizeof(cinfo));
	cinfo.err = jpeg_std_error(&fail.mgr);
	fail.mgr.error_exit = jpeg_fail_exit;
	fail.mgr.emit_message = jpeg_fail_warn;
	fail.msg[0] = 0;
	if (setjmp(fail.jump)) {
		jpeg_destroy_decompress(&cinfo);
		free(raw);
		dlk_image_release(out);
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': a damaged JPEG: %s", name, fail.msg);
	}
	jpeg_create_decompress(&cinfo);
	jpeg_mem_src(&cinfo, buf, (unsigned long)len);
	jpeg_read_header(&cinfo, TRUE);
	if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
		jpeg_destroy_decompress(&cinfo);
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': a CMYK JPEG; convert it to RGB or gray first", name);
	}
	if (check_size(name, cinfo.image_width, cinfo.image_height, err) < 0) {
		jpeg_destroy_decompress(&cinfo);
		return -1;
	}
	/* a gray JPEG is read gray; a colour one as RGB, converted to gray here as Pillow would */
	from = cinfo.num_components == 1 ? 1 : 3;
	cinfo.out_color_space = from == 1 ? JCS_GRAYSCALE : JCS_RGB;
	jpeg_start_decompress(&cinfo);
	size_t stride = (size_t)cinfo.output_width * (size_t)from;
	raw = xmalloc(stride * cinfo.output_height);
	while (cinfo.output_scanline < cinfo.output_height) {
		JSAMPROW row = raw + stride * cinfo.output_scanline;
		jpeg_read_scanlines(&cinfo, &row, 1);
	}
	jpeg_finish_decompress(&cinfo);
	out->w = (int)cinfo.output_width;
	out->h = (int)cinfo.output_height;
	out->c = channels;
	out->px = xmalloc((size_t)out->w * (size_t)out->h * (size_t)channels);
	convert_pixels(raw, from, out->px, channels, (size_t)out->w * (size_t)out->h);
	jpeg_destroy_decompress(&cinfo);
	free(raw);
	return 0;
}

int dlk_image_signature(const void *buf, size_t len)
{
	static const unsigned char png_sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
	const unsigned char *p = buf;

	if (len >= 8 && !memcmp(p, png_sig, 8))
		return DLK_IMAGE_PNG;
	if (len >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF)
		return DLK_IMAGE_JPEG;
	return 0;
}

int dlk_image_decode(const void *buf, size_t len, const char *name, int channels, struct dlk_image *out,
                     struct dlk_err *err)
{
	out->px = NULL;
	out->w = out->h = out->c = 0;
	if (channels != 1 && channels != 3)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': images are decoded to 1 or 3 channels, not %d", name, channels);
	switch (dlk_image_signature(buf, len)) {
	case DLK_IMAGE_PNG:
		return decode_png(buf, len, name, channels, out, err);
	case DLK_IMAGE_JPEG:
		return decode_jpeg(buf, len, name, channels, out, err);
	}
	return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': neither a PNG nor a JPEG (by its first bytes)", name);
}

void dlk_image_resize(const struct dlk_image *in, int w, int h, struct dlk_image *out)
{
	size_t c = (size_t)in->c;

	out->w = w;
	out->h = h;
	out->c = in->c;
	out->px = xmalloc((size_t)w * (size_t)h * c);
	if (w == in->w && h == in->h) {
		memcpy(out->px, in->px, (size_t)w * (size_t)h * c);
		return;
	}
	float sy = (float)in->h / (float)h, sx = (float)in->w / (float)w;
	for (int y = 0; y < h; y++) {
		float fy = ((float)y + 0.5f) * sy - 0.5f;
		if (fy < 0)
			fy = 0;
		int y0 = (int)fy, y1 = y0 + 1 < in->h ? y0 + 1 : y0;
		float ay = fy - (float)y0;
		for (int x = 0; x < w; x++) {
			float fx = ((float)x + 0.5f) * sx - 0.5f;
			if (fx < 0)
				fx = 0;
			int x0 = (int)fx, x1 = x0 + 1 < in->w ? x0 + 1 : x0;
			float ax = fx - (float)x0;
			for (size_t k = 0; k < c; k++) {
				const uint8_t *r0 = in->px + (size_t)y0 * (size_t)in->w * c, *r1 = in->px + (size_t)y1 * (size_t)in->w * c;
				float top = (float)r0[(size_t)x0 * c + k] * (1 - ax) + (float)r0[(size_t)x1 * c + k] * ax;
				float bot = (float)r1[(size_t)x0 * c + k] * (1 - ax) + (float)r1[(size_t)x1 * c + k] * ax;
				float v = top * (1 - ay) + bot * ay + 0.5f;
				out->px[((size_t)y * (size_t)w + (size_t)x) * c + k] = (uint8_t)(v > 255 ? 255 : v);
			}
		}
	}
}

void dlk_image_to_planar(const struct dlk_image *im, uint8_t *out)
{
	size_t n = (size_t)im->w * (size_t)im->h;
	for (int k = 0; k < im->c; k++)
		for (size_t i = 0; i < n; i++)
			out[(size_t)k * n + i] = im->px[i * (size_t)im->c + (size_t)k];
}

int dlk_image_sample(const void *buf, size_t len, const char *name, const int shape[3], uint8_t *out,
                     struct dlk_err *err)
{
	struct dlk_image im = DLK_IMAGE_INIT, sized = DLK_IMAGE_INIT;

	if (dlk_image_decode(buf, len, name, shape[0], &im, err) < 0)
		return -1;
	if (im.w == shape[2] && im.h == shape[1]) {
		dlk_image_to_planar(&im, out);
	} else {
		dlk_image_resize(&im, shape[2], shape[1], &sized);
		dlk_image_to_planar(&sized, out);
		dlk_image_release(&sized);
	}
	dlk_image_release(&im);
	return 0;
}

int dlk_image_is_image_name(const char *name)
{
	const char *dot = strrchr(name, '.');
	return dot && (!strcasecmp(dot, ".png") || !strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"));
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The entries of dir that pass keep() (hidden ones never), sorted; NULL-terminated, caller frees. */
static char **list_dir(const char *dir, const char *name, int want_dirs, size_t *n, struct dlk_err *err)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **v = NULL;
	size_t cap = 0;

	*n = 0;
	if (!d) {
		dlk_errf(err, errno == ENOENT ? DLK_EXIT_CONFIG : DLK_EXIT_FAIL, "cannot read the folder '%s': %s", name,
		         strerror(errno));
		return NULL;
	}
	while ((e = readdir(d))) {
		struct stat st;
		char *path;
		if (e->d_name[0] == '.')
			continue;
		path = xasprintf("%s/%s", dir, e->d_name);
		int ok = !stat(path, &st) && (want_dirs ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode) && dlk_image_is_image_name(e->d_name));
		free(path);
		if (!ok)
			continue;
		if (*n + 1 >= cap) {
			cap = cap ? cap * 2 : 16;
			v = xrealloc(v, cap * sizeof(*v));
		}
		v[(*n)++] = xstrdup(e->d_name);
	}
	closedir(d);
	if (!v)
		v = xcalloc(1, sizeof(*v));
	qsort(v, *n, sizeof(*v), cmp_str);
	v[*n] = NULL;
	return v;
}

/* The paths below folder dir ("." all of them; "./" in front of a folder below it): the range
 * [*lo, *hi) of the sorted paths (those that begin with "dir/" are next to each other, found by
 * a binary search: a tree of a million files and a thousand class folders is listed in
 * milliseconds), and how many bytes of each path are dir's (*skip) */
static void range_below(const struct dlk_image_paths *t, const char *dir, size_t *lo, size_t *hi, size_t *skip)
{
	while (dir[0] == '.' && dir[1] == '/')
		dir += 2;
	if (!strcmp(dir, ".")) {
		*lo = *skip = 0;
		*hi = t->n;
		return;
	}
	size_t dl = strlen(dir), a = 0, b = t->n;
	char *pre = xmalloc(dl + 2);
	memcpy(pre, dir, dl);
	memcpy(pre + dl, "/", 2);
	while (a < b) {
		size_t m = a + (b - a) / 2;
		if (strcmp(t->paths[m], pre) < 0)
			a = m + 1;
		else
			b = m;
	}
	*lo = a;
	while (a < t->n && !strncmp(t->paths[a], pre, dl + 1))
		a++;
	*hi = a;
	*skip = dl + 1;
	free(pre);
}

static char **paths_list(void *ctx, const char *dir, const char *name, int want_dirs, size_t *n, struct dlk_err *err)
{
	const struct dlk_image_paths *t = ctx;
	size_t lo, hi, skip;

	(void)name;
	(void)err;
	range_below(t, dir, &lo, &hi, &skip);
	char **v = xcalloc(hi - lo + 1, sizeof(*v));
	*n = 0;
	/* in byte order, the paths below one sub-folder are next to each other */
	for (size_t i = lo; i < hi; i++) {
		const char *rest = t->paths[i] + skip, *slash;
		if (rest[0] == '.') /* hidden entries are skipped, as in a folder */
			continue;
		slash = strchr(rest, '/');
		if (want_dirs != (slash != NULL))
			continue;
		if (slash) {
			size_t len = (size_t)(slash - rest);
			if (*n && strlen(v[*n - 1]) == len && !memcmp(v[*n - 1], rest, len))
				continue;
			v[(*n)++] = xstrndup(rest, len);
		} else if (dlk_image_is_image_name(rest)) {
			v[(*n)++] = xstrdup(rest);
		}
	}
	qsort(v, *n, sizeof(*v), cmp_str);
	return v;
}

struct dlk_image_tree dlk_image_paths_tree(const struct dlk_image_paths *p)
{
	return (struct dlk_image_tree){ paths_list, (void *)p };
}

int dlk_image_paths_has_dir(const struct dlk_image_paths *p, const char *dir)
{
	size_t lo, hi, skip;
	range_below(p, dir, &lo, &hi, &skip);
	return hi > lo;
}

static char **list_in(const struct dlk_image_tree *tree, const char *dir, const char *name, int want_dirs, size_t *n,
                      struct dlk_err *err)
{
	return tree ? tree->list(tree->ctx, dir, name, want_dirs, n, err) : list_dir(dir, name, want_dirs, n, err);
}

static void free_list(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static char **dup_list(char **v, size_t n)
{
	char **d = xcalloc(n ? n : 1, sizeof(*d));
	for (size_t i = 0; i < n; i++)
		d[i] = xstrdup(v[i]);
	return d;
}

static struct dlk_image_files *files_new(const int shape[3], const int tshape[3])
{
	struct dlk_image_files *f = xcalloc(1, sizeof(*f));

	memcpy(f->shape, shape, sizeof(f->shape));
	f->sample_size = (size_t)shape[0] * (size_t)shape[1] * (size_t)shape[2];
	if (tshape) {
		memcpy(f->tshape, tshape, sizeof(f->tshape));
		f->tsample_size = (size_t)tshape[0] * (size_t)tshape[1] * (size_t)tshape[2];
	}
	pthread_mutex_init(&f->mu, NULL);
	return f;
}

static void free_strs(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

void dlk_image_files_free(struct dlk_image_files *f)
{
	if (!f)
		return;
	free_strs(f->paths, f->n);
	free_strs(f->names, f->n);
	free_strs(f->tpaths, f->n);
	free_strs(f->tnames, f->n);
	free_strs(f->shards, (size_t)f->n_shards);
	free(f->shard);
	free(f->offset);
	free(f->length);
	free(f->toffset);
	free(f->tlength);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

struct dlk_image_files *dlk_image_files_members(const int shape[3], const int tshape[3])
{
	return files_new(shape, tshape);
}

void dlk_image_files_add_member(struct dlk_image_files *f, const char *shard, const struct dlk_member *in,
                                const struct dlk_member *target)
{
	int paired = f->tsample_size > 0;

	if (!f->n_shards || strcmp(f->shards[f->n_shards - 1], shard)) {
		f->shards = xrealloc(f->shards, (size_t)(f->n_shards + 1) * sizeof(*f->shards));
		f->shards[f->n_shards++] = xstrdup(shard);
	}
	/* grown by doubling: n a power of two means full */
	if (!(f->n & (f->n - 1))) {
		size_t cap = f->n ? 2 * f->n : 1;
		f->names = xrealloc(f->names, cap * sizeof(*f->names));
		f->shard = xrealloc(f->shard, cap * sizeof(*f->shard));
		f->offset = xrealloc(f->offset, cap * sizeof(*f->offset));
		f->length = xrealloc(f->length, cap * sizeof(*f->length));
		if (paired) {
			f->tnames = xrealloc(f->tnames, cap * sizeof(*f->tnames));
			f->toffset = xrealloc(f->toffset, cap * sizeof(*f->toffset));
			f->tlength = xrealloc(f->tlength, cap * sizeof(*f->tlength));
		}
	}
	f->names[f->n] = xstrdup(in->name);
	f->shard[f->n] = f->n_shards - 1;
	f->offset[f->n] = in->offset;
	f->length[f->n] = in->length;
	if (paired) {
		f->tnames[f->n] = xstrdup(target->name);
		f->toffset[f->n] = target->offset;
		f->tlength[f->n] = target->length;
	}
	f->n++;
}

void dlk_image_files_join(struct dlk_image_files *a, struct dlk_image_files *b)
{
	for (size_t i = 0; i < b->n; i++) {
		struct dlk_member in = { b->offset[i], b->length[i], b->names[i] }, t = { 0, 0, NULL };
		if (b->tnames)
			t = (struct dlk_member){ b->toffset[i], b->tlength[i], b->tnames[i] };
		dlk_image_files_add_member(a, b->shards[b->shard[i]], &in, b->tnames ? &t : NULL);
	}
	dlk_image_files_free(b);
}

/* keeps v[from, to) of n, freeing the others */
static void cut_strs(char **v, size_t n, size_t from, size_t to)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		if (i < from || i >= to)
			free(v[i]);
	memmove(v, v + from, (to - from) * sizeof(*v));
}

void dlk_image_files_cut(struct dlk_image_files *f, size_t from, size_t to)
{
	if (f->offset) {
		memmove(f->shard, f->shard + from, (to - from) * sizeof(*f->shard));
		memmove(f->offset, f->offset + from, (to - from) * sizeof(*f->offset));
		memmove(f->length, f->length + from, (to - from) * sizeof(*f->length));
	}
	if (f->toffset) {
		memmove(f->toffset, f->toffset + from, (to - from) * sizeof(*f->toffset));
		memmove(f->tlength, f->tlength + from, (to - from) * sizeof(*f->tlength));
	}
	cut_strs(f->paths, f->n, from, to);
	cut_strs(f->names, f->n, from, to);
	cut_strs(f->tpaths, f->n, from, to);
	cut_strs(f->tnames, f->n, from, to);
	f->n = to - from;
}

/* length bytes at offset of the file at path into b */
static int read_member(const char *path, unsigned long long offset, unsigned long long length, struct dlk_buf *b,
                       char *msg, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t got = 0;

	if (fd < 0) {
		snprintf(msg, len, "%s", strerror(errno));
		return -1;
	}
	if (length > (256u << 20)) {
		snprintf(msg, len, "a member of %llu bytes, more than 256 MiB", length);
		close(fd);
		return -1;
	}
	dlk_buf_grow(b, (size_t)length);
	while (got < length) {
		ssize_t r = pread(fd, b->data + got, (size_t)length - got, (off_t)(offset + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			snprintf(msg, len, r < 0 ? "%s" : "the archive ends before the member does (changed since the run started?)",
			         strerror(errno));
			close(fd);
			return -1;
		}
		got += (size_t)r;
	}
	b->len = got;
	b->data[got] = '\0';
	close(fd);
	return 0;
}

int dlk_image_files_read(const struct dlk_image_files *f, size_t i, int target, uint8_t *out, struct dlk_buf *b,
                         struct dlk_err *err)
{
	const char *name = target ? f->tnames[i] : f->names[i];
	char msg[256];

	dlk_buf_reset(b);
	if (f->offset) {
		if (read_member(f->shards[f->shard[i]], target ? f->toffset[i] : f->offset[i],
		                target ? f->tlength[i] : f->length[i], b, msg, sizeof(msg)) < 0)
			return dlk_errf(err, DLK_EXIT_CONFIG, "cannot read '%s': %s", name, msg);
	} else if (dlk_buf_read_file(b, target ? f->tpaths[i] : f->paths[i], 256u << 20, msg, sizeof(msg)) < 0) {
		return dlk_errf(err, DLK_EXIT_CONFIG, "cannot read '%s': %s", name, msg);
	}
	return dlk_image_sample(b->data, b->len, name, target ? f->tshape : f->shape, out, err);
}

void dlk_image_files_sample(struct dlk_image_files *f, size_t i, int target, uint8_t *out, struct dlk_buf *b)
{
	struct dlk_err e = DLK_ERR_INIT;

	if (!dlk_image_files_read(f, i, target, out, b, &e))
		return;
	memset(out, 0, target ? f->tsample_size : f->sample_size);
	pthread_mutex_lock(&f->mu);
	/* the first failing sample in sample order, whichever thread met it first */
	if (!f->failed || i < f->failed_at) {
		f->failed = 1;
		f->failed_at = i;
		f->err = e;
	}
	pthread_mutex_unlock(&f->mu);
}

int dlk_image_files_failed(struct dlk_image_files *f, struct dlk_err *err)
{
	int failed;

	pthread_mutex_lock(&f->mu);
	failed = f->failed;
	if (failed && err)
		*err = f->err;
	pthread_mutex_unlock(&f->mu);
	return failed ? -1 : 0;
}

struct folder_job {
	const struct dlk_image_files *f;
	uint8_t *x8, *t8;     /* t8 when the files are paired; x8 NULL: only their first bytes checked */
	struct dlk_err *errs; /* one per part */
	size_t *bad;          /* per part: the first failing file, or n */
};

struct folder_worker {
	struct folder_job *j;
	int first, step, nparts;
	pthread_t tid;
};

static void folder_part(struct folder_job *j, int part, int nparts);

/* parts first, first + step, ... of nparts */
static void *folder_worker(void *arg)
{
	struct folder_worker *w = arg;
	for (int p = w->first; p < w->nparts; p += w->step)
		folder_part(w->j, p, w->nparts);
	return NULL;
}

/* file i (or its target) is a PNG or a JPEG by its first bytes */
static int check_head(const struct dlk_image_files *f, size_t i, int target, struct dlk_err *err)
{
	const char *name = target ? f->tnames[i] : f->names[i];
	unsigned char head[8];
	ssize_t got;
	int fd = open(target ? f->tpaths[i] : f->paths[i], O_RDONLY | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return dlk_errf(err, DLK_EXIT_CONFIG, "cannot read '%s': %s", name, strerror(errno));
	do
		got = read(fd, head, sizeof(head));
	while (got < 0 && errno == EINTR);
	close(fd);
	if (got < 0)
		return dlk_errf(err, DLK_EXIT_CONFIG, "cannot read '%s': %s", name, strerror(errno));
	if (!dlk_image_signature(head, (size_t)got))
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': neither a PNG nor a JPEG (by its first bytes)", name);
	return 0;
}

static void folder_part(struct folder_job *j, int part, int nparts)
{
	const struct dlk_image_files *f = j->f;
	size_t lo = f->n * (size_t)part / (size_t)nparts, hi = f->n * (size_t)(part + 1) / (size_t)nparts;
	struct dlk_buf b = DLK_BUF_INIT;

	j->bad[part] = f->n;
	for (size_t k = lo; k < hi; k++) {
		/* paired: each part decodes its inputs' targets too */
		for (int side = 0; side <= (f->tnames != NULL); side++) {
			if (!j->x8) {
				if (check_head(f, k, side, &j->errs[part]) < 0) {
					j->bad[part] = k;
					goto done;
				}
				continue;
			}
			uint8_t *dst = side ? j->t8 + k * f->tsample_size : j->x8 + k * f->sample_size;
			if (dlk_image_files_read(f, k, side, dst, &b, &j->errs[part]) < 0) {
				j->bad[part] = k;
				goto done;
			}
		}
	}
done:
	dlk_buf_release(&b);
}

/* Decodes every file of j (its x8, and t8 when paired) on threads of their own, not the compute
 * pool's: the pool is sized for training later (and is one thread while the data loads), decoding
 * wants every core now. The first failing file's error (in file order) is returned. */
static int run_job(struct folder_job *j, int threads, struct dlk_err *err)
{
	size_t n = j->f->n;
	int nparts, ret = 0;

	if (threads <= 0)
		threads = dlk_machine_cores() > 32 ? 32 : dlk_machine_cores();
	nparts = (size_t)threads * 4 < n ? threads * 4 : (int)n;
	if (threads > nparts)
		threads = nparts;
	if (nparts < 1)
		return 0;
	j->errs = xcalloc((size_t)nparts, sizeof(*j->errs));
	j->bad = xcalloc((size_t)nparts, sizeof(*j->bad));
	struct folder_worker *w = xcalloc((size_t)threads, sizeof(*w));
	int started = 1;
	for (int t = 0; t < threads; t++)
		w[t] = (struct folder_worker){ j, t, threads, nparts, 0 };
	/* the caller is worker 0, and does the parts of a thread that could not start */
	for (int t = 1; t < threads; t++, started++)
		if (pthread_create(&w[t].tid, NULL, folder_worker, &w[t]))
			break;
	folder_worker(&w[0]);
	for (int t = started; t < threads; t++)
		folder_worker(&w[t]);
	for (int t = 1; t < started; t++)
		pthread_join(w[t].tid, NULL);
	free(w);
	for (int p = 0; p < nparts && !ret; p++)
		if (j->bad[p] < n) {
			*err = j->errs[p];
			ret = -1;
		}
	free(j->errs);
	free(j->bad);
	j->errs = NULL;
	j->bad = NULL;
	return ret;
}

int dlk_image_files_check(const struct dlk_image_files *f, int threads, struct dlk_err *err)
{
	struct folder_job j = { .f = f };

	if (f->offset) /* tar members: checked as their shards were indexed */
		return 0;
	return run_job(&j, threads, err);
}

int dlk_image_files_decode(const struct dlk_image_files *f, int threads, uint8_t **x8, uint8_t **t8,
                           struct dlk_err *err)
{
	struct folder_job j = { .f = f };

	*x8 = NULL;
	if (t8)
		*t8 = NULL;
	j.x8 = xmalloc(f->n ? f->n * f->sample_size : 1);
	if (f->tnames)
		j.t8 = xmalloc(f->n ? f->n * f->tsample_size : 1);
	if (run_job(&j, threads, err) < 0) {
		free(j.x8);
		free(j.t8);
		return -1;
	}
	*x8 = j.x8;
	if (t8)
		*t8 = j.t8;
	else
		free(j.t8);
	return 0;
}

int dlk_image_folder_list(const struct dlk_image_tree *tree, const char *dir, const char *name, const int shape[3],
                          const char *const *classes, int n_classes, struct dlk_image_files **files,
                          int32_t **labels_out, char ***found, int *n_found, struct dlk_err *err)
{
	char **dirs = NULL, **paths = NULL, **names = NULL;
	size_t nd = 0, cap = 0, n = 0;
	int32_t *labels = NULL;
	int ret = -1;

	*files = NULL;
	*labels_out = NULL;
	if (shape[0] != 1 && shape[0] != 3)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': images feed a model input of 1 or 3 channels, not %d", name,
		                shape[0]);
	if (shape[1] < 1 || shape[2] < 1)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': images need a model input [C, H, W]", name);
	if (!(dirs = list_in(tree, dir, name, 1, &nd, err)))
		return -1;
	if (!nd) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': no class folders in it", name);
		dlk_err_hint(err, "an image folder holds one folder per class (train/cat/1.png, train/dog/2.jpg, ...)");
		goto out;
	}
	for (size_t d = 0; d < nd; d++) {
		int label = (int)d;
		size_t nf;
		char *sub = xasprintf("%s/%s", dir, dirs[d]);
		char **fl;
		if (classes) {
			for (label = 0; label < n_classes && strcmp(classes[label], dirs[d]); label++)
				;
			if (label == n_classes) {
				dlk_errf(err, DLK_EXIT_CONFIG, "'%s/%s': a class folder that data.classes does not name", name,
				         dirs[d]);
				dlk_err_hint(err, "add '%s' to data.classes or move the folder away", dirs[d]);
				free(sub);
				goto out;
			}
		} else if (nd > DLK_MAX_CLASSES) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': %zu class folders, more than %d", name, nd, DLK_MAX_CLASSES);
			free(sub);
			goto out;
		}
		fl = list_in(tree, sub, name, 0, &nf, err);
		if (!fl) {
			free(sub);
			goto out;
		}
		if (!nf) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s/%s': a class folder without .png, .jpg or .jpeg files", name,
			         dirs[d]);
			free_list(fl);
			free(sub);
			goto out;
		}
		for (size_t k = 0; k < nf; k++) {
			if (n + 1 >= cap) {
				cap = cap ? cap * 2 : 1024;
				paths = xrealloc(paths, cap * sizeof(*paths));
				names = xrealloc(names, cap * sizeof(*names));
				labels = xrealloc(labels, cap * sizeof(*labels));
			}
			paths[n] = xasprintf("%s/%s", sub, fl[k]);
			names[n] = xasprintf("%s/%s/%s", name, dirs[d], fl[k]);
			labels[n] = label;
			n++;
		}
		free_list(fl);
		free(sub);
	}
	/* with data.classes, samples go in label order whatever the folders' names sort to */
	if (classes) {
		size_t *order = xmalloc(n * sizeof(*order)), k = 0;
		char **p2 = xmalloc(n * sizeof(*p2)), **n2 = xmalloc(n * sizeof(*n2));
		int32_t *l2 = xmalloc(n * sizeof(*l2));
		for (int c = 0; c < n_classes; c++)
			for (size_t i = 0; i < n; i++)
				if (labels[i] == c)
					order[k++] = i;
		for (size_t i = 0; i < n; i++) {
			p2[i] = paths[order[i]];
			n2[i] = names[order[i]];
			l2[i] = labels[order[i]];
		}
		free(paths), free(names), free(labels), free(order);
		paths = p2, names = n2, labels = l2;
	}
	*files = files_new(shape, NULL);
	(*files)->n = n;
	(*files)->paths = paths;
	(*files)->names = names;
	paths = names = NULL;
	*labels_out = labels;
	labels = NULL;
	if (found) {
		*found = dup_list(dirs, nd);
		*n_found = (int)nd;
	}
	ret = 0;
out:
	free_strs(paths, n);
	free_strs(names, n);
	free(labels);
	free_list(dirs);
	return ret;
}

int dlk_image_folder_load(const char *dir, const char *name, const int shape[3], const char *const *classes,
                          int n_classes, int threads, struct dlk_samples *out, char ***found, int *n_found,
                          struct dlk_err *err)
{
	struct dlk_image_files *f;
	int32_t *labels;
	uint8_t *x8;
	char **fd = NULL;
	int nfd = 0;

	if (dlk_image_folder_list(NULL, dir, name, shape, classes, n_classes, &f, &labels, found ? &fd : NULL, &nfd, err) <
	    0)
		return -1;
	if (dlk_image_files_decode(f, threads, &x8, NULL, err) < 0) {
		dlk_image_files_free(f);
		free(labels);
		free_strs(fd, (size_t)nfd);
		return -1;
	}
	out->n = f->n;
	memcpy(out->shape, shape, sizeof(out->shape));
	out->sample_size = f->sample_size;
	out->x8 = x8;
	out->y = labels;
	out->max_label = -1;
	for (size_t i = 0; i < out->n; i++)
		if (out->y[i] > out->max_label)
			out->max_label = out->y[i];
	if (found) {
		*found = fd;
		*n_found = nfd;
	}
	dlk_image_files_free(f);
	return 0;
}

/* the stem of a file name: up to its last dot */
static size_t stem_len(const char *name)
{
	const char *dot = strrchr(name, '.');
	return dot ? (size_t)(dot - name) : strlen(name);
}

static int same_stem(const char *a, const char *b)
{
	size_t la = stem_len(a), lb = stem_len(b);
	return la == lb && !memcmp(a, b, la);
}

int dlk_image_pairs_list(const struct dlk_image_tree *tree, const char *input_dir, const char *input_name,
                         const char *target_dir, const char *target_name, const int in_shape[3],
                         const int target_shape[3], struct dlk_image_files **files, struct dlk_err *err)
{
	struct dlk_image_files *f = NULL;
	char **in = NULL, **tg = NULL;
	size_t ni = 0, nt = 0, a = 0, b = 0;
	int ret = -1;

	*files = NULL;
	for (int k = 0; k < 2; k++) {
		const int *sh = k ? target_shape : in_shape;
		if ((sh[0] != 1 && sh[0] != 3) || sh[1] < 1 || sh[2] < 1)
			return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': images are decoded to [C, H, W] with C 1 or 3, not %dx%dx%d",
			                k ? target_name : input_name, sh[0], sh[1], sh[2]);
	}
	if (!(in = list_in(tree, input_dir, input_name, 0, &ni, err)) ||
	    !(tg = list_in(tree, target_dir, target_name, 0, &nt, err)))
		goto out;
	if (!ni) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': no .png, .jpg or .jpeg files", input_name);
		goto out;
	}
	f = files_new(in_shape, target_shape);
	f->paths = xcalloc(ni, sizeof(*f->paths));
	f->names = xcalloc(ni, sizeof(*f->names));
	f->tpaths = xcalloc(ni, sizeof(*f->tpaths));
	f->tnames = xcalloc(ni, sizeof(*f->tnames));
	/* both lists are sorted by name, so by stem within a stem's files: walk them together */
	while (a < ni || b < nt) {
		int c = a == ni ? 1 : b == nt ? -1 : 0;
		if (!c) {
			/* stems with their dot, the order the names sort in */
			size_t la = stem_len(in[a]), lb = stem_len(tg[b]);
			c = memcmp(in[a], tg[b], (la < lb ? la : lb) + 1);
		}
		if ((a + 1 < ni && same_stem(in[a], in[a + 1])) || (b + 1 < nt && same_stem(tg[b], tg[b + 1]))) {
			int in_side = a + 1 < ni && same_stem(in[a], in[a + 1]);
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s/%s' and '%s/%s': two files of one name", in_side ? input_name : target_name,
			         in_side ? in[a] : tg[b], in_side ? input_name : target_name, in_side ? in[a + 1] : tg[b + 1]);
			goto out;
		}
		if (c) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s/%s': no %s of the same name in '%s'", c < 0 ? input_name : target_name,
			         c < 0 ? in[a] : tg[b], c < 0 ? "target" : "input", c < 0 ? target_name : input_name);
			dlk_err_hint(err, "paired folders hold the same names: inputs/0001.png goes with targets/0001.png");
			goto out;
		}
		f->paths[f->n] = xasprintf("%s/%s", input_dir, in[a]);
		f->names[f->n] = xasprintf("%s/%s", input_name, in[a]);
		f->tpaths[f->n] = xasprintf("%s/%s", target_dir, tg[b]);
		f->tnames[f->n] = xasprintf("%s/%s", target_name, tg[b]);
		f->n++;
		a++;
		b++;
	}
	*files = f;
	f = NULL;
	ret = 0;
out:
	dlk_image_files_free(f);
	free_list(in);
	free_list(tg);
	return ret;
}

int dlk_image_pairs_load(const char *input_dir, const char *input_name, const char *target_dir,
                         const char *target_name, const int in_shape[3], const int target_shape[3], int threads,
                         struct dlk_samples *out, uint8_t **targets, struct dlk_err *err)
{
	struct dlk_image_files *f;
	uint8_t *x8, *t8;

	*targets = NULL;
	if (dlk_image_pairs_list(NULL, input_dir, input_name, target_dir, target_name, in_shape, target_shape, &f, err) < 0)
		return -1;
	if (dlk_image_files_decode(f, threads, &x8, &t8, err) < 0) {
		dlk_image_files_free(f);
		return -1;
	}
	out->n = f->n;
	memcpy(out->shape, in_shape, sizeof(out->shape));
	out->sample_size = f->sample_size;
	out->x8 = x8;
	out->y = xcalloc(f->n ? f->n : 1, sizeof(*out->y));
	out->max_label = 0;
	*targets = t8;
	dlk_image_files_free(f);
	return 0;
}
