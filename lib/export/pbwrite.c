#include "lib/export/pbwrite.h"

#include <string.h>

enum { WIRE_VARINT = 0, WIRE_LEN = 2, WIRE_I32 = 5 };

void dlk_pb_varint(struct dlk_buf *b, uint64_t v)
{
	unsigned char t[10];
	size_t n = 0;

	do {
		t[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	dlk_buf_add(b, t, n);
}

static void key(struct dlk_buf *b, int f, int wire)
{
	dlk_pb_varint(b, ((uint64_t)(unsigned)f << 3) | (unsigned)wire);
}

void dlk_pb_int(struct dlk_buf *b, int f, int64_t v)
{
	key(b, f, WIRE_VARINT);
	dlk_pb_varint(b, (uint64_t)v);
}

static void add_u32le(struct dlk_buf *b, uint32_t u)
{
	unsigned char t[4] = { (unsigned char)u, (unsigned char)(u >> 8), (unsigned char)(u >> 16),
	                       (unsigned char)(u >> 24) };

	dlk_buf_add(b, t, 4);
}

void dlk_pb_float(struct dlk_buf *b, int f, float v)
{
	uint32_t u;

	memcpy(&u, &v, 4);
	key(b, f, WIRE_I32);
	add_u32le(b, u);
}

void dlk_pb_bytes(struct dlk_buf *b, int f, const void *data, size_t len)
{
	key(b, f, WIRE_LEN);
	dlk_pb_varint(b, len);
	dlk_buf_add(b, data, len);
}

void dlk_pb_str(struct dlk_buf *b, int f, const char *s)
{
	dlk_pb_bytes(b, f, s, strlen(s));
}

void dlk_pb_msg(struct dlk_buf *b, int f, const struct dlk_buf *msg)
{
	dlk_pb_bytes(b, f, msg->data, msg->len);
}

void dlk_pb_raw_floats(struct dlk_buf *b, const float *v, size_t n)
{
	dlk_buf_grow(b, 4 * n);
	for (size_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &v[i], 4);
		add_u32le(b, u);
	}
}
