#include "lib/kube/yamljson.h"
#include "lib/util/yamljson.h"

cJSON *kube_yaml_to_json(const char *text, size_t len, const char *name, struct dlk_err *err)
{
	/* one YAML reader for the whole project (core schema, alias and size bounds): a kubeconfig
	 * is its first document; a file with none is an empty configuration */
	cJSON *docs = yamljson_parse(text, len, name, NULL, err), *first;

	if (!docs)
		return NULL;
	first = cJSON_DetachItemFromArray(docs, 0);
	cJSON_Delete(docs);
	return first ? first : cJSON_CreateObject();
}
