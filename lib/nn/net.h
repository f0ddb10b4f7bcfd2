/* A feed-forward network built from the spec's layer list, running on one backend.
 *
 * Shapes are inferred (and checked) when the network is built, before any memory for
 * activations exists. All parameters live in ONE flat device array and all gradients in
 * another, in layer order (weight then bias), so that a communicator can all-reduce the
 * gradients in buckets and a checkpoint can save or broadcast the weights in one go. */
#ifndef DLK_NN_NET_H
#define DLK_NN_NET_H

#include <stddef.h>
#include <stdint.h>

#include "lib/nn/backend.h"
#include "lib/project/project.h"
#include "lib/util/err.h"

#define DLK_NET_MAX_LAYERS 256
#define DLK_NET_MAX_PARAMS (1ULL << 31)  /* floats; keeps every index in int32 range */

struct dlk_layer {
	struct dlk_layer_spec spec;
	int in[3], out[3];        /* C, H, W */
	size_t in_size, out_size; /* per sample */
	size_t w_off, n_w;        /* into the flat arrays; n_w = 0 for parameter-free layers */
	size_t b_off, n_b;
	size_t s_off, n_s;        /* state after the bias (batch norm's running statistics): saved and
	                             loaded with the parameters, never trained nor decayed (gradient 0) */
	int fan_in, fan_out;
	int act;                  /* activation fused into this dense/conv layer's forward */
	int fused;                /* activation layer whose forward the previous layer performs */
	int need_dx;              /* backward must produce the input gradient */
	int pool_layer;           /* conv: the max-pool layer whose forward and backward it performs, or 0 */
	int pooled;               /* activation or max-pool layer that a conv before it performs */
	int folded_bw;            /* activation layer whose backward the dense layer after it did this step */
	int bn_relu;              /* batchnorm: applies the ReLU after it (fused) and takes its derivative in
	                             its backward; that ReLU layer's backward passes the gradient on */
	int tied_by;              /* embedding: 1 + the index of the dense layer whose weight is its table
	                             (spec.tie); that layer's backward runs first and writes the table's
	                             gradient, this one's adds to it, and only then is it ready */
	int drop_active;          /* dropout: the last forward applied a mask ... */
	uint64_t drop_offset;     /* ... starting at this mask index */
	/* per-batch buffers (device), allocated by dlk_net_reserve() */
	float *y;                 /* output, [batch, out_size]; NULL where the layer aliases */
	float *col;               /* conv: im2col of the input, reused for its gradient; globalavgpool: 1/HW */
	float *gy;                /* graph: the gradient of the output, summed over its readers */
	int g_set;                /* graph: backward has put a gradient into gy this step */
	int32_t *argmax;          /* maxpool */
	const float *x_used, *y_used; /* what the last forward read and wrote */
	int seg;                  /* activation recomputation: 1 + the segment (struct dlk_segment) it is
	                             in, 0: none */
	int share;                /* 1 + the layer whose per-batch buffers (y, col, gy, argmax) this one
	                             uses, the same place in an earlier repetition of its block; 0: its own */
};

/* A repetition of a block whose inside is not kept for backward but computed again from the
 * block's input (dlk_net_set_recompute): layers first..last, only last's output read after it. */
struct dlk_segment {
	int first, last;
	int group;                /* the first segment with the same layers: its buffers are shared */
	int resident;             /* (of a group's first) the segment whose activations the buffers hold */
	uint64_t drop_counter;    /* the dropout counter when its training forward began */
};

struct dlk_net {
	const struct dlk_backend *be;
	struct dlk_layer *layers;
	int n_layers;
	int input[3];
	size_t input_size;
	int n_classes;            /* the output's width: classes, or target values per sample */
	size_t n_params;
	float *params;            /* device, n_params */
	float *grads;             /* device, n_params */
	int graph;                /* some layer names its inputs: per-layer gradients, fused only where one reader */
	const float *x_in;        /* the last forward's input */
	int batch_cap;            /* activations are allocated for this many samples */
	float *gbuf[2];           /* gradient ping-pong; also conv's [f, batch*hw] staging */
	uint64_t dropout_seed;
	uint64_t dropout_counter; /* advances every training forward so masks differ per step */
	/* optional: backward calls it as soon as a layer's gradients grads[off, off + n) are queued,
	 * the last layer's first, so that a communicator can start reducing them while backward
	 * goes on (comm_grads_ready) */
	void (*grad_ready)(void *ctx, float *grads, size_t n_params, size_t off, size_t n);
	void *grad_ready_ctx;
	struct dlk_segment *segs; /* activation recomputation's segments (owned), n_segs of them */
	int n_segs;
	int fwd_training;         /* the last forward's training flag, for a recomputation */
	/* a graph's output gradients (layers' gy), when no buffers are shared for recomputation:
	 * buffers that layers whose gradients are never alive at once take in turn (gy_plan in
	 * net.c), n_gpool of them (owned) */
	float **gpool;
	int n_gpool;
};
#define DLK_NET_INIT { 0 }

/* Builds the network: infers every shape from model->input, checks it, lays out the flat
 * parameter arrays (allocated and zeroed on `be`). n_classes is what the data says (0 = take
 * the last layer's width). spec_file names the project file in messages. On error returns -1
 * with a message such as "model.layers[4] (dense, dlk.yaml:23): expects a flat input but gets
 * 64x7x7" plus a hint; code DLK_EXIT_CONFIG. */
int dlk_net_build(struct dlk_net *net, const struct dlk_model *model, const char *spec_file,
                  int n_classes, const struct dlk_backend *be, struct dlk_err *err);
/* Checks that a built net has an output for each of the data's n_classes classes: exactly that
 * many when exact, at least that many otherwise (a class can be absent from a split). On error
 * returns -1 with "model.layers[9] (dense, dlk.yaml:30): the model ends with 5 outputs but the
 * data has 10 classes" and a hint; code DLK_EXIT_CONFIG. */
int dlk_net_check_classes(const struct dlk_net *net, const struct dlk_model *model, const char *spec_file,
                          int n_classes, int exact, struct dlk_err *err);
/* An initialisation scheme (model.init), as a layer's init sees it (lib/nn/layer_ops.h). */
enum dlk_init_scheme { DLK_INIT_TORCH, DLK_INIT_XAVIER, DLK_INIT_GPT2 };
struct dlk_init {
	enum dlk_init_scheme scheme;
	float std;       /* gpt2: the weights' standard deviation, 0.02 */
	float resid_std; /* gpt2: that of a residual branch's last projection, std / sqrt(branches) */
	int residual;    /* this layer ends a residual branch: an `add` reads it (through dropout)
	                    after the stream it is added to */
};
/* Initialises parameters from `seed`: scheme "torch" (PyTorch's default, U(-1/sqrt(fan_in),
 * 1/sqrt(fan_in)) for weights and biases, each module's own where it has one: nn.Embedding's
 * N(0, 1), nn.MultiheadAttention's), "xavier" (Xavier-uniform weights, zero biases) or "gpt2"
 * (GPT-2's and nanoGPT's: every weight matrix, attention projection and embedding table
 * N(0, 0.02^2), biases 0, the last projection of each residual branch N(0, (0.02 / sqrt(R))^2)
 * with R the model's residual branches, 2 x n_layer in a GPT; norms 1 and 0). */
int dlk_net_init_params(struct dlk_net *net, const char *scheme, uint64_t seed, struct dlk_err *err);
/* The parameter ranges weight decay leaves alone, as pairs (offset, count) into ranges (room for
 * 6 x n_layers values), sorted and merged; returns how many pairs. Decayed: the tensors of two
 * or more dimensions (each kind's dlk_layer_ops.decay: matrices, kernels, embedding tables,
 * positions included), or with all_params every parameter; never a layer's state. */
int dlk_net_no_decay_ranges(const struct dlk_net *net, int all_params, size_t *ranges);
/* Activation recomputation (training.recompute), as torch.utils.checkpoint around each block:
 * with on, each repetition of a model.blocks block (the layers of one `block:` use's repeat)
 * keeps only its output; the activations inside it go to buffers that every repetition of that
 * block shares, and backward runs the block's forward again from its input (with the same
 * dropout masks) just before its own backward, so gradients are bit for bit those without.
 * The last repetition run forward is not run again. A block is left whole where a layer after it
 * reads a layer inside it, or a layer inside it keeps state (batch norm), or the net is a chain
 * (no named inputs). Call before dlk_net_reserve (it drops the buffers already reserved); off
 * undoes it. Returns how many repetitions are recomputed. Works the same on every backend. */
int dlk_net_set_recompute(struct dlk_net *net, int on);
/* Allocates activations and workspaces for batches of up to `batch` samples (no-op when
 * already large enough). Returns -1 when the device is out of memory. */
int dlk_net_reserve(struct dlk_net *net, int batch, struct dlk_err *err);
/* The bytes dlk_net_reserve() allocates for batches of `batch` samples on the net's backend
 * (activations, im2col buffers, the two gradient buffers; shared ones once), as a double so that a hostile
 * architecture cannot overflow it; and the largest batch dlk_net_reserve() accepts (its buffers
 * index with 32 bits), at least 0. What a server needs for serving.max_memory. */
double dlk_net_batch_bytes(const struct dlk_net *net, int batch);
int dlk_net_batch_limit(const struct dlk_net *net);
/* Runs the network on x (device, [batch, input_size], batch <= batch_cap) and returns the
 * logits (device, [batch, n_classes], valid until the next forward). training turns dropout on. */
const float *dlk_net_forward(struct dlk_net *net, const float *x, int batch, int training);
/* After a training forward: mean softmax cross-entropy against labels (device) and every
 * gradient into net->grads (overwritten, not accumulated). Returns the loss. */
float dlk_net_backward(struct dlk_net *net, const int32_t *labels, int batch);
/* The backward of any loss (lib/nn/loss.h): write d(loss)/d(output) [batch, n_classes] into
 * dlk_net_out_grad() (device), then dlk_net_backward_grad() takes it through every layer into
 * net->grads (overwritten). dlk_net_output() is what the last forward returned. */
float *dlk_net_out_grad(struct dlk_net *net);
const float *dlk_net_output(const struct dlk_net *net);
void dlk_net_backward_grad(struct dlk_net *net, int batch);
/* Frees everything the net owns; leaves it DLK_NET_INIT. */
void dlk_net_release(struct dlk_net *net);

/* A table of the layers with their output shapes and parameter counts, and the total, e.g.
 *   #  layer     output    params
 *   0  conv2d    32x28x28  320
 *   ...
 *   total parameters: 421642
 * Caller frees. */
char *dlk_net_summary(const struct dlk_net *net);

/* The model's FLOPs per sample in a forward pass, counted as PaLM (appendix B) and llm.c count
 * them: the matrix products only, 2 per multiply-add (dense: 2 x weights x positions; conv2d: 2
 * x weights x output pixels; conv transpose: 2 x weights x input pixels; attention: its
 * projections as dense, plus 4 T^2 D for the scores and their weighted sum, causal or not);
 * element-wise layers, norms, pooling and embedding lookups count 0. A training step costs
 * DLK_TRAIN_FLOPS_FACTOR times the forward (backward: twice the forward). */
#define DLK_TRAIN_FLOPS_FACTOR 3.0
double dlk_net_flops_per_sample(const struct dlk_net *net);

/* Human-readable "64x7x7" of a shape (static buffer per call site is the caller's). */
void dlk_shape_str(const int s[3], char *buf, size_t len);

#endif
