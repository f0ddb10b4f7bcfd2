/* libFuzzer target: the ONNX exporter fed hostile bundles. The bytes are a bundle (tar,
 * model.json, safetensors) read through a memory file as `dlk export` reads it; a bundle that
 * reads is exported in both input forms, and what comes out must be a well-formed protobuf
 * message (every field's length inside the buffer), or the export must fail with a message.
 * Corpus: tests/fuzz/export_onnx/. */
#include "lib/export/onnx.h"
#include "lib/train/bundle.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* walks a protobuf message's fields; aborts (a finding) when one runs past the end */
static void walk(const unsigned char *p, const unsigned char *end)
{
	while (p < end) {
		uint64_t k = 0, n = 0;
		int s = 0;
		do {
			if (p >= end || s > 63)
				abort();
			k |= (uint64_t)(*p & 0x7f) << s;
			s += 7;
		} while (*p++ & 0x80);
		switch (k & 7) {
		case 0:
			while (p < end && (*p & 0x80))
				p++;
			if (p++ >= end)
				abort();
			break;
		case 5:
			if (end - p < 4)
				abort();
			p += 4;
			break;
		case 2:
			s = 0;
			do {
				if (p >= end || s > 63)
					abort();
				n |= (uint64_t)(*p & 0x7f) << s;
				s += 7;
			} while (*p++ & 0x80);
			if (n > (uint64_t)(end - p))
				abort();
			p += n;
			break;
		default:
			abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_bundle b = DLK_BUNDLE_INIT;
	char path[64];
	int fd = memfd_create("bundle", 0);

	if (fd < 0)
		return 0;
	if (write(fd, data, size) == (ssize_t)size) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		if (!dlk_bundle_read(path, &b, &err))
			for (int form = DLK_INPUT_RAW; form <= DLK_INPUT_PREPROCESSED; form++) {
				struct dlk_buf out = DLK_BUF_INIT, ext_out = DLK_BUF_INIT, ext_data = DLK_BUF_INIT;
				/* and with the weights as external data: the same verdict, a well-formed model */
				struct dlk_onnx_external ext = { .location = "m.onnx.data", .data = &ext_data, .always = form };
				int ok = !dlk_onnx_export(&b, (enum dlk_input_form)form, NULL, &out, &err);
				if (ok)
					walk((const unsigned char *)out.data, (const unsigned char *)out.data + out.len);
				else if (!err.msg[0])
					abort(); /* a failure must say why */
				if (ok != !dlk_onnx_export(&b, (enum dlk_input_form)form, &ext, &ext_out, &err))
					abort();
				if (ok)
					walk((const unsigned char *)ext_out.data, (const unsigned char *)ext_out.data + ext_out.len);
				if (ok && ext.used && ext_out.len + ext_data.len < out.len)
					abort(); /* weights went missing */
				dlk_buf_release(&out);
				dlk_buf_release(&ext_out);
				dlk_buf_release(&ext_data);
			}
		dlk_bundle_release(&b);
	}
	close(fd);
	return 0;
}
