/* YAML documents as cJSON trees: the one shape lib/kube works with (kubeconfig files are YAML,
 * the API speaks JSON). */
#ifndef DLK_KUBE_YAMLJSON_H
#define DLK_KUBE_YAMLJSON_H

#include <cJSON.h>
#include <stddef.h>

#include "lib/util/err.h"

/* Parses the first YAML document in text[0..len) into a new cJSON tree the caller owns
 * (cJSON_Delete), with lib/util/yamljson's reader (YAML 1.2 core schema, aliases expanded within
 * bounds). An empty file gives an empty object. On error returns NULL and fills err with
 * "NAME:LINE:COLUMN: problem" (name is how the file is shown to the user). */
cJSON *kube_yaml_to_json(const char *text, size_t len, const char *name, struct dlk_err *err);

#endif
