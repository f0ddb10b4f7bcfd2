/* The fuzz seed corpora in tests/fuzz/kube/ as regression tests: every seed is parsed; files
 * named good-* must be accepted, bad-* must be refused with a message, none may crash (run
 * under SANITIZE=1 too). */
#include "tests/unit/check.h"
#include "lib/kube/api.h"
#include "lib/kube/kubeconfig.h"
#include "lib/util/buf.h"

#include <dirent.h>
#include <stdlib.h>

#define SEEDS "tests/fuzz/kube"

struct lines_ctx {
	int ok, bad, bad_msgs;
};

static int on_line(const char *line, size_t len, void *ud)
{
	struct lines_ctx *l = ud;
	struct dlk_err err = DLK_ERR_INIT;
	const char *type;
	const cJSON *obj;
	cJSON *ev = kube_watch_event_parse(line, len, &type, &obj, &err);
	if (ev) {
		l->ok++;
		cJSON_Delete(ev);
	} else {
		l->bad++;
		l->bad_msgs += err.msg[0] != '\0';
	}
	return 0;
}

static int each(const char *sub, void (*fn)(const char *path, const char *name, int good))
{
	char dir[256];
	struct dirent **list;
	int n;

	snprintf(dir, sizeof(dir), "%s/%s", SEEDS, sub);
	n = scandir(dir, &list, NULL, alphasort);
	for (int i = 0; i < n; i++) {
		const char *name = list[i]->d_name;
		if (name[0] != '.') {
			char path[600];
			snprintf(path, sizeof(path), "%s/%s", dir, name);
			fn(path, name, !strncmp(name, "good-", 5));
		}
		free(list[i]);
	}
	free(list);
	return n;
}

static void kubeconfig_seed(const char *path, const char *name, int good)
{
	struct kube_config cfg = KUBE_CONFIG_INIT;
	struct kube_config_opts o = KUBE_CONFIG_OPTS_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	o.kubeconfig = path;
	int rc = kube_config_load(&o, &cfg, &err);
	if (good)
		CHECK_MSG(rc == 0 && cfg.server && cfg.namespace, "kubeconfig %s is accepted (%s)", name, err.msg);
	else
		CHECK_MSG(rc == -1 && err.msg[0] && err.code == DLK_EXIT_CONFIG && strstr(err.msg, name),
			  "kubeconfig %s is refused naming the file: %s", name, err.msg);
	kube_config_release(&cfg);
}

static void watch_seed(const char *path, const char *name, int good)
{
	struct dlk_buf b = DLK_BUF_INIT;
	char msg[256];
	struct lines_ctx l = { 0, 0, 0 };
	struct kube_lines ls = KUBE_LINES_INIT(on_line, &l);
	if (dlk_buf_read_file(&b, path, 1 << 20, msg, sizeof(msg)) < 0)
		return;
	/* feed in small uneven chunks, as a network would */
	for (size_t off = 0; off < b.len; off += 7)
		kube_lines_feed(&ls, b.data + off, b.len - off < 7 ? b.len - off : 7);
	kube_lines_finish(&ls);
	kube_lines_release(&ls);
	if (good)
		CHECK_MSG(l.ok > 0 && l.bad == 0, "watch stream %s: every line is an event (%d ok, %d bad)", name, l.ok, l.bad);
	else
		CHECK_MSG(l.ok == 0 && l.bad > 0 && l.bad_msgs == l.bad, "watch stream %s: every line refused with a message", name);
	dlk_buf_release(&b);
}

static void status_seed(const char *path, const char *name, int good)
{
	struct dlk_buf b = DLK_BUF_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	struct kube_what w = { "get", "jobs", "ml", "t" };
	char msg[256];
	if (dlk_buf_read_file(&b, path, 1 << 20, msg, sizeof(msg)) < 0)
		return;
	cJSON *st = cJSON_Parse(b.data);
	const cJSON *code = cJSON_GetObjectItemCaseSensitive(st, "code");
	long status = cJSON_IsNumber(code) ? (long)code->valuedouble : 500;
	int rc = kube_status_error(NULL, &w, status, b.data, &err);
	if (good) {
		const cJSON *reason = cJSON_GetObjectItemCaseSensitive(st, "reason");
		CHECK_MSG(rc == -1 && cJSON_IsString(reason) && strstr(err.msg, reason->valuestring) && err.hint[0],
			  "status %s: message carries the reason, with a hint: %s", name, err.msg);
	} else {
		CHECK_MSG(rc == -1 && strstr(err.msg, "get jobs 't' in namespace 'ml': HTTP "), "status %s: %s", name, err.msg);
	}
	cJSON_Delete(st);
	dlk_buf_release(&b);
}

int main(void)
{
	CHECK(each("kubeconfig", kubeconfig_seed) > 2);
	CHECK(each("watch", watch_seed) > 2);
	CHECK(each("status", status_seed) > 2);
	return CHECK_DONE();
}
