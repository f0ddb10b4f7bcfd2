/* The layers of the model a project describes (struct dlk_model in project.h), as far as they
 * need no engine: their kinds and names, the shape each makes of its input, and how a message
 * names one. The project loader checks a model with these; lib/nn builds one with them. */
#ifndef DLK_PROJECT_LAYERS_H
#define DLK_PROJECT_LAYERS_H

#include <stddef.h>

#include "lib/project/project.h"

/* The name a project file uses for each layer kind, in enum dlk_layer_kind order, NULL-terminated. */
extern const char *const dlk_layer_names[];
#define DLK_LAYER_KINDS 22

/* "dense", "conv2d", ...; "unknown" for a value outside the enum. */
const char *dlk_layer_name(enum dlk_layer_kind kind);
/* The kind a name stands for; -1 when it names none. */
int dlk_layer_kind_of(const char *name);

/* The output shape [C, H, W] layer ls makes of its input `in` (a flat input of n features is
 * [1, 1, n]); out may be in. Returns -1, leaving out alone, when the layer's window (conv2d's
 * kernel, maxpool's size) is larger than its input, padding included. The caller has checked
 * the layer's own sizes (a positive stride) and checks the result's. */
int dlk_layer_shape(const struct dlk_layer_spec *ls, const long long in[3], long long out[3]);

/* The output shape of a layer with two inputs (add, concat) from its inputs' shapes: -1 when
 * they do not fit together (add: the same shape; concat: the same height and width). */
int dlk_layer_shape2(const struct dlk_layer_spec *ls, const long long a[3], const long long b[3], long long out[3]);
/* How many inputs a kind reads: 2 for add and concat, else 1. */
int dlk_layer_arity(enum dlk_layer_kind kind);

/* Where layer i (of the flat list) was written, as a key path: "model.layers[4]", or for a layer
 * of a block "model.blocks.basic[2] (model.layers[3], repeat 2 of 4)". */
void dlk_layer_path(char *buf, size_t len, int i, const struct dlk_layer_spec *ls);

/* How a message names layer i: "model.layers[4] (dense, dlk.yaml:23)", or without the file
 * position when the layer has none ("model.layers[4] (dense)"). file NULL means "dlk.yaml". */
void dlk_layer_where(char *buf, size_t len, int i, const struct dlk_layer_spec *ls, const char *file);

#endif
