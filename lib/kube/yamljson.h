/* YAML documents as cJSON trees: the one shape lib/kube works with (kubeconfig files are YAML,
 * the API speaks JSON). */
#ifndef DLK_KUBE_YAMLJSON_H
#define DLK_KUBE_YAMLJSON_H

#include <cJSON.h>
#include <stddef.h>

#include "lib/util/err.h"

/* Parses the first YAML document in text[0..len) into a new cJSON tree the caller owns
 * (cJSON_Delete). Mappings become objects, sequences arrays; plain scalars true/false become
 * booleans, null/~/empty become null, everything else a string (kubeconfig has no numbers that
 * matter). An empty document gives an empty object. Aliases are expanded; the expanded tree is
 * bounded (nodes, depth) so a hostile file cannot blow up memory. On error returns NULL and fills
 * err with "NAME: line L, column C: problem" (name is how the file is shown to the user). */
cJSON *kube_yaml_to_json(const char *text, size_t len, const char *name, struct dlk_err *err);

#endif
