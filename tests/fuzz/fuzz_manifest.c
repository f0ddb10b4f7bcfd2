/* libFuzzer target: dataset manifests (lib/store/manifest.c) and dataset references. Whatever
 * the parser accepts must format back to the same bytes (the text is canonical), and its id
 * must be the sha256 of those bytes; read as image folders (a folder inside a dataset,
 * lib/data/image.c's tree of paths), every file listed is one of the manifest's.
 * Corpus: tests/fuzz/manifest/. */
#include "lib/data/image.h"
#include "lib/store/manifest.h"
#include "lib/util/hash.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void listed_in(const struct dlk_manifest *m, char *const *paths, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const char *p = paths[i];
		while (p[0] == '.' && p[1] == '/')
			p += 2;
		if (!dlk_manifest_find(m, p))
			abort();
	}
}

/* the manifest's paths as image folders: the whole of it as class folders, and its first two
 * top folders as paired folders */
static void as_folders(const struct dlk_manifest *m)
{
	struct dlk_err err = DLK_ERR_INIT;
	char **paths = malloc((m->n + 1) * sizeof(*paths));
	const int shape[3] = { 1, 4, 4 };
	struct dlk_image_files *f = NULL;
	int32_t *labels = NULL;
	char **found = NULL;
	int n_found = 0;

	for (size_t i = 0; i < m->n; i++)
		paths[i] = m->e[i].path;
	struct dlk_image_paths view = { paths, m->n };
	struct dlk_image_tree tree = dlk_image_paths_tree(&view);
	if (!dlk_image_paths_has_dir(&view, ".") != !m->n)
		abort();
	if (!dlk_image_folder_list(&tree, ".", "fuzz", shape, NULL, 0, &f, &labels, &found, &n_found, &err)) {
		listed_in(m, f->paths, f->n);
		for (size_t i = 0; i < f->n; i++)
			if (labels[i] < 0 || labels[i] >= n_found)
				abort();
		for (int i = 0; i < n_found; i++)
			free(found[i]);
		free(found);
		free(labels);
		dlk_image_files_free(f);
		f = NULL;
	}
	if (m->n >= 2) {
		char *a = strndup(m->e[0].path, strcspn(m->e[0].path, "/")),
		     *b = strndup(m->e[m->n - 1].path, strcspn(m->e[m->n - 1].path, "/"));
		if (!dlk_image_pairs_list(&tree, a, "a", b, "b", shape, shape, &f, &err)) {
			listed_in(m, f->paths, f->n);
			listed_in(m, f->tpaths, f->n);
			dlk_image_files_free(f);
		}
		free(a);
		free(b);
	}
	free(paths);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_manifest m = DLK_MANIFEST_INIT;
	struct dlk_dataset_ref ref;
	char why[160], *s;

	if (!dlk_manifest_parse((const char *)data, size, "fuzz", &m, &err)) {
		size_t len;
		char *text = dlk_manifest_format(&m, &len), hex[65];
		if (len != size || memcmp(text, data, size))
			abort(); /* accepted a form that is not canonical */
		dlk_sha256_hex(data, size, hex);
		if (strcmp(hex, m.id))
			abort();
		for (size_t i = 0; i < m.n; i++)
			if (dlk_manifest_find(&m, m.e[i].path) != &m.e[i])
				abort();
		free(text);
		as_folders(&m);
	}
	dlk_manifest_release(&m);
	/* the same bytes as a reference and as a path */
	s = malloc(size + 1);
	memcpy(s, data, size);
	s[size] = '\0';
	dlk_dataset_ref_parse(s, size & 1, &ref, why, sizeof(why));
	dlk_manifest_check_path(s, strlen(s), why, sizeof(why));
	free(s);
	return 0;
}
