/* A protobuf wire-format writer, just what writing an ONNX model needs: varints, 32-bit floats,
 * length-delimited strings, bytes and embedded messages (an embedded message is written into
 * a buffer of its own, then appended with its length). Field numbers and wire types follow
 * https://protobuf.dev/programming-guides/encoding/. Appending never fails (dlk_buf aborts when
 * memory runs out, as everywhere in dlk). */
#ifndef DLK_EXPORT_PBWRITE_H
#define DLK_EXPORT_PBWRITE_H

#include <stddef.h>
#include <stdint.h>

#include "lib/util/buf.h"

void dlk_pb_varint(struct dlk_buf *b, uint64_t v);
/* field `f` as a varint: int32/int64/enum (a negative value takes ten bytes, as protobuf says) */
void dlk_pb_int(struct dlk_buf *b, int f, int64_t v);
/* field `f` as fixed32 holding a float's IEEE bits, little-endian */
void dlk_pb_float(struct dlk_buf *b, int f, float v);
/* field `f`, length-delimited: bytes, a NUL-terminated string, an embedded message */
void dlk_pb_bytes(struct dlk_buf *b, int f, const void *data, size_t len);
void dlk_pb_str(struct dlk_buf *b, int f, const char *s);
void dlk_pb_msg(struct dlk_buf *b, int f, const struct dlk_buf *msg);
/* n floats as little-endian bytes (an ONNX tensor's raw_data), appended without a key */
void dlk_pb_raw_floats(struct dlk_buf *b, const float *v, size_t n);

#endif
