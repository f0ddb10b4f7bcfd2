#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/nn/device.h"
#include "lib/nn/gpu.h"
#include "lib/jobs/podenv.h"

static const char *const names[] = { "auto", "cpu", "cuda" };

int dlk_device_parse(const char *s, enum dlk_device_kind *kind)
{
	for (int i = 0; i < 3; i++)
		if (s && !strcmp(s, names[i])) {
			*kind = (enum dlk_device_kind)i;
			return 0;
		}
	return -1;
}

const char *dlk_device_name(enum dlk_device_kind kind)
{
	return (unsigned)kind < 3 ? names[kind] : "unknown";
}

int dlk_device_wanted(enum dlk_device_kind def, enum dlk_device_kind *kind, struct dlk_err *err)
{
	const char *v = getenv(DLK_ENV_DEVICE);

	*kind = def;
	if (!v || !*v)
		return 0;
	if (dlk_device_parse(v, kind))
		return dlk_errf(err, DLK_EXIT_CONFIG, "DLK_DEVICE: expected auto, cpu or cuda, not '%.64s'", v);
	return 0;
}

int dlk_backend_select(enum dlk_device_kind want, int local_rank, int local_world, struct dlk_device_choice *out,
                       struct dlk_err *err)
{
	struct dlk_device_probe p;
	struct dlk_err e = DLK_ERR_INIT;

	memset(out, 0, sizeof(*out));
	out->device = -1;
	if (local_rank < 0)
		local_rank = 0;
	if (local_world < 1)
		local_world = 1;
	if (want != DLK_DEVICE_CPU) {
		if (dlk_backend_cuda_probe(NULL, &p, &e) == 0 && !p.usable) {
			dlk_errf(&e, DLK_EXIT_CONFIG, "the CUDA backend cannot run here: %s", p.why);
		} else if (!e.code) {
			int dev = local_rank % p.devices;
			out->be = dlk_backend_cuda(NULL, dev, &e);
			if (out->be) {
				out->device = dev;
				out->devices = p.devices;
				out->shared = local_world > p.devices;
				return 0;
			}
		}
		if (want == DLK_DEVICE_CUDA) {
			*err = e;
			if (!err->hint[0])
				dlk_err_hint(err, "'dlk version' shows what the CUDA backend finds here; DLK_DEVICE=cpu trains on the CPU");
			return -1;
		}
		snprintf(out->why, sizeof(out->why), "%s", e.msg);
	}
	out->be = dlk_backend_cpu();
	return 0;
}
