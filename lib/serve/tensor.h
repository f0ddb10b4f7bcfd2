/* Tensors as the serving protocols carry them: the KServe V2 datatypes, and what a served model
 * looks like from outside (its signature): one input of raw values, scaled on the way in exactly
 * as training scaled its data, and two outputs per row, the class probabilities and the logits.
 * The protocol codecs (v2.c, tfs.c) know models only through this signature, so they can be
 * fuzzed without a network. */
#ifndef DLK_SERVE_TENSOR_H
#define DLK_SERVE_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "lib/project/project.h"
#include "lib/util/buf.h"

enum dlk_dtype {
	DLK_DT_INVALID = 0,
	DLK_DT_BOOL,
	DLK_DT_UINT8,
	DLK_DT_UINT16,
	DLK_DT_UINT32,
	DLK_DT_UINT64,
	DLK_DT_INT8,
	DLK_DT_INT16,
	DLK_DT_INT32,
	DLK_DT_INT64,
	DLK_DT_FP16,
	DLK_DT_FP32,
	DLK_DT_FP64,
	DLK_DT_BYTES,
};

/* "FP32", ...; "INVALID" for anything else. */
const char *dlk_dtype_name(enum dlk_dtype t);
/* The datatype named by s (len bytes, case-sensitive as the protocol says), or DLK_DT_INVALID. */
enum dlk_dtype dlk_dtype_parse(const char *s, size_t len);
/* Bytes per element; 0 for BYTES (variable) and INVALID. */
size_t dlk_dtype_size(enum dlk_dtype t);
/* 1 for the numeric types a model input accepts: every integer type, FP16, FP32 and FP64. */
int dlk_dtype_numeric(enum dlk_dtype t);

#define DLK_SERVE_INPUT "input"
#define DLK_SERVE_OUT_PROBS "probabilities"
#define DLK_SERVE_OUT_LOGITS "logits"
#define DLK_SERVE_N_OUTPUTS 2
#define DLK_SERVE_MAX_RANK 8
/* A request's texts become at most this many token ids in all, on every route that takes texts:
 * each text is the model's in_size ids whatever its length, so a body of empty strings must not
 * turn into gigabytes */
#define DLK_SERVE_MAX_TEXT_IDS (1LL << 24)

/* The input contract: what a model's input takes. Raw values as the training data held them
 * (pixels 0..255 for idx and tar data), which the server scales as training did; or values
 * already scaled, the network's own input, what a PyTorch or Triton user sends (x / 255). The
 * server takes raw values unless a request declares its form (V2: parameters.input_form; TF
 * Serving: a top-level "input_form"). */
enum dlk_input_form { DLK_INPUT_RAW, DLK_INPUT_PREPROCESSED };
#define DLK_INPUT_FORM_PARAM "input_form"
/* "raw" / "preprocessed"; and back from len bytes, -1 for anything else */
const char *dlk_input_form_name(enum dlk_input_form form);
int dlk_input_form_parse(const char *s, size_t len);

struct dlk_tokenizer;

/* What clients see of a model. */
struct dlk_serve_sig {
	const char *name;          /* the model's name in URLs */
	int dims[3];               /* one sample: C, H, W */
	int rank;                  /* 1: a sample is [F] (F = C*H*W); 3: [C, H, W] */
	size_t in_size;            /* C*H*W */
	int n_classes;
	char *const *classes;      /* n_classes labels, or NULL */
	float scale, mean, std;    /* raw value v enters the network as (v * scale - mean) / std */
	float lut[256];            /* that, for the integers 0..255, as training's gather computes it */
	int pixels;                /* raw values are 8-bit pixels 0..255 (the scaling divides by 255, as
	                              idx and tar data are read): the contract dlk_serve_check_raw_*
	                              holds requests to; set by dlk_serve_sig_init_lut */
	const struct dlk_tokenizer *tokenizer; /* a text model's (the bundle's tokenizer.txt), or NULL:
	                              its raw input is text (V2 datatype BYTES, one string a row), which
	                              the server tokenizes as training did (dlk_text_encode_row) into the
	                              in_size ids the network takes; ids themselves are its preprocessed
	                              form */
	int channels;              /* per-channel normalisation (an image model trained with
	                              data.images.mean/std: the bundle's input_scaling.channel_mean and
	                              channel_std): dims[0], 0 when the model has none. Then channel c's
	                              raw value v enters as (v * scale - channel_mean[c]) / channel_std[c],
	                              and mean, std and lut are not used */
	float channel_mean[DLK_MAX_CHANNELS], channel_std[DLK_MAX_CHANNELS];
	float lut_c[DLK_MAX_CHANNELS][256]; /* that, for the integers 0..255 of each channel */
};

/* Fills lut, lut_c and pixels from scale, mean and std (channel_mean, channel_std). */
void dlk_serve_sig_init_lut(struct dlk_serve_sig *sig);
/* A copy of sig whose conversions take values as already scaled (scale 1, mean 0, std 1, no
 * per-channel values): what a request declared "preprocessed" is converted with. */
void dlk_serve_sig_preprocessed(const struct dlk_serve_sig *sig, struct dlk_serve_sig *out);
/* The contract as JSON members (no braces), for the protocols' metadata:
 *   "input_form":"raw","raw_range":[0,255],"scale":S,"mean":M,"std":D,
 *   "input_forms":["raw","preprocessed"],"form_parameter":"input_form"
 * with "channel_mean":[...],"channel_std":[...] after "std" for per-channel normalisation (the
 * values of mean and std are then not used), and for a text model (sig->tokenizer):
 *   "input_form":"raw","raw":"text","tokenizer":"bpe","vocab_size":V,"pad_id":P,"sequence_length":T,
 *   "preprocessed":"token_ids","input_forms":[...],"form_parameter":"input_form" */
void dlk_serve_contract_json(const struct dlk_serve_sig *sig, struct dlk_buf *out);
/* Whether n values of a request that did not declare its form fit a raw-pixel input (sig->pixels;
 * always 0 otherwise). Pixels are whole numbers 0..255; a floating-point tensor whose values all
 * lie within [0, 1] and are not all whole is what a client that scaled them itself sends (x / 255),
 * and a negative value that is not whole is a normalised one ((x - mean) / std). Either is
 * refused: -1 with a message for the client (a 400) naming the contract and the parameter that
 * declares the form. Integer tensors, and values that are not finite (the conversion names them),
 * pass. */
int dlk_serve_check_raw_binary(const struct dlk_serve_sig *sig, enum dlk_dtype t, const unsigned char *src,
                               size_t n, char *msg, size_t msg_len);
int dlk_serve_check_raw_doubles(const struct dlk_serve_sig *sig, enum dlk_dtype t, const double *src, size_t n,
                                char *msg, size_t msg_len);

/* Names of the outputs in their default order (probabilities, logits); NULL past the end. */
const char *dlk_serve_output_name(int i);
/* Index of the output named s (len bytes), or -1. */
int dlk_serve_output_find(const char *s, size_t len);

/* Whether a request's input shape (batch dimension first) fits the model: [N, C, H, W] as the
 * model declares it or the flat [N, C*H*W]. Returns the number of rows N, or -1 with a message
 * naming the expected shapes ("input 'input': shape [1,784,2] does not fit the model's
 * [-1,1,28,28] (or [-1,784])"). */
long long dlk_serve_rows_of(const struct dlk_serve_sig *sig, const long long *shape, int rank, char *msg,
                            size_t msg_len);
/* "[-1,1,28,28]" (batch dimension -1) of the model's declared input; "[-1,784]" with flat = 1. */
void dlk_serve_shape_str(const struct dlk_serve_sig *sig, int flat, char *buf, size_t len);

/* Converts n elements of type t, little-endian as the binary tensor extension sends them, into
 * network inputs (scaled). src starts at a row's first value (with per-channel normalisation,
 * element i is of channel (i % in_size) / (in_size / channels)). Returns 0, or -1 with the index of the first element that is not a
 * finite number in *bad (an FP16/FP32/FP64 NaN or infinity). t must be dlk_dtype_numeric(). */
int dlk_serve_convert_binary(const struct dlk_serve_sig *sig, enum dlk_dtype t, const unsigned char *src,
                             size_t n, float *dst, size_t *bad);
/* The same from JSON numbers: each must be finite and, for an integer type, an integer within
 * the type's range. */
int dlk_serve_convert_doubles(const struct dlk_serve_sig *sig, enum dlk_dtype t, const double *src, size_t n,
                              float *dst, size_t *bad);

/* Numerically stable softmax of each of `rows` rows of k logits. */
void dlk_serve_softmax(const float *logits, int rows, int k, float *probs);
/* The first of rows rows of k logits that holds a value that is not finite, or -1. Weights that
 * pass the warm-up can still overflow on a real input: such a row is a failed forward pass (an
 * HTTP answer 500, a stream record to the dead-letter topic), never an answer. */
long dlk_serve_nonfinite_row(const float *logits, size_t rows, size_t k);

#endif
