/* libFuzzer target for the parsers lib/kube feeds with outside bytes: a kubeconfig (YAML), a
 * watch stream (JSON lines, split at arbitrary points) and an API error body (Status). The seed
 * corpus is tests/fuzz/kube/ (tests/unit/test_kube_seeds.c also replays it as a unit test). */
#include "lib/kube/api.h"
#include "lib/kube/kubeconfig.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int count_line(const char *line, size_t len, void *ud)
{
	const char *type;
	const cJSON *obj;
	cJSON *ev = kube_watch_event_parse(line, len, &type, &obj, NULL);
	(*(size_t *)ud)++;
	cJSON_Delete(ev);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_err err = DLK_ERR_INIT;
	cJSON *j = kube_yaml_to_json((const char *)data, size, "fuzz", &err);
	cJSON_Delete(j);

	/* the whole loader, through a memory file so no disk is touched */
	int fd = memfd_create("kubeconfig", 0);
	if (fd >= 0) {
		if (write(fd, data, size) == (ssize_t)size) {
			char path[64];
			struct kube_config cfg = KUBE_CONFIG_INIT;
			struct kube_config_opts o = KUBE_CONFIG_OPTS_INIT;
			snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
			o.kubeconfig = path;
			kube_config_load(&o, &cfg, &err);
			kube_config_release(&cfg);
		}
		close(fd);
	}

	size_t n = 0, step = size ? (size_t)data[0] % 13 + 1 : 1;
	struct kube_lines ls = KUBE_LINES_INIT(count_line, &n);
	ls.max = 4096;
	for (size_t off = 0; off < size; off += step)
		kube_lines_feed(&ls, (const char *)data + off, size - off < step ? size - off : step);
	kube_lines_finish(&ls);
	kube_lines_release(&ls);

	char *body = malloc(size + 1);
	memcpy(body, data, size);
	body[size] = '\0';
	struct kube_what w = { "get", "jobs", "ns", "name" };
	kube_status_error(NULL, &w, 500, body, &err);
	free(body);
	return 0;
}
