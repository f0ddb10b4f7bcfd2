/* project_load(): the example projects, every default, dependent defaults, core-schema typing,
 * the dump's round trip and digest, and the known-key list. */
#include "tests/unit/check.h"
#include "tests/unit/test_project.h"
#include "lib/project/layers.h"
#include "lib/util/hash.h"

#include <float.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* load(dump(s)) dumps to the same bytes */
static int round_trips(const struct dlk_project *s)
{
	char *d1 = project_dump_yaml(s), *d2 = NULL;
	struct dlk_err e = DLK_ERR_INIT;
	struct dlk_project *s2 = project_load_mem(d1, strlen(d1), "dump.yaml", NULL, 0, &e);
	int ok = 0;

	if (!s2)
		printf("# reload failed: %s\n", e.msg);
	else {
		d2 = project_dump_yaml(s2);
		ok = !strcmp(d1, d2);
		if (!ok)
			printf("# first dump:\n%s\n# second dump:\n%s\n", d1, d2);
	}
	free(d1);
	free(d2);
	project_free(s2);
	return ok;
}

static void test_examples(void)
{
	struct dlk_err e = DLK_ERR_INIT;
	struct dlk_project *s = project_load("tests/fuzz/spec/fashion-mlp.yaml", NULL, 0, &e);

	CHECK_MSG(s != NULL, "the Fashion-MNIST MLP loads: %s", e.msg);
	if (s) {
		CHECK_STR(s->name, "fashion-mlp");
		CHECK_STR(s->path, "tests/fuzz/spec/fashion-mlp.yaml");
		CHECK(s->data.format == DLK_DATA_IDX);
		CHECK_STR(s->data.train.images.url, "file:///usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
		CHECK_STR(s->data.test.labels.url, "file:///usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz");
		CHECK(s->data.train.images.sha256 == NULL);
		CHECK(s->data.n_classes == 10);
		CHECK_STR(s->data.classes[9], "Ankle boot");
		CHECK(s->model.input_rank == 1);
		CHECK(s->model.input[0] == 1 && s->model.input[1] == 1 && s->model.input[2] == 784);
		CHECK(s->model.n_layers == 4);
		CHECK(s->model.layers[0].kind == DLK_LAYER_DENSE && s->model.layers[0].units == 256);
		CHECK(s->model.layers[1].kind == DLK_LAYER_RELU);
		CHECK(s->model.layers[2].kind == DLK_LAYER_DROPOUT);
		CHECK_NEAR(s->model.layers[2].rate, 0.2, 1e-6);
		CHECK(s->model.layers[3].units == 10);
		CHECK(s->model.layers[3].line == 18 && s->model.layers[3].column == 7);
		CHECK(s->training.optimizer == DLK_OPT_ADAM);
		CHECK_STR(s->resources.memory, "2Gi");
		CHECK(round_trips(s));
		project_free(s);
	}

	s = project_load("tests/fuzz/spec/fashion-cnn.yaml", NULL, 0, &e);
	CHECK_MSG(s != NULL, "the Fashion-MNIST CNN loads: %s", e.msg);
	if (s) {
		const struct dlk_layer_spec *l = s->model.layers;
		CHECK_STR(s->image, "registry.example.com/team/dlk:0.1.0");
		CHECK_STR(s->namespace_, "ml");
		CHECK(s->n_labels == 2);
		CHECK_STR(s->labels[1].key, "app.kubernetes.io/part-of");
		CHECK_STR(s->labels[1].value, "fashion");
		/* pins are kept in lowercase */
		CHECK_STR(s->data.train.images.sha256, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
		CHECK_NEAR(s->data.mean, 0.2860, 1e-6);
		CHECK_NEAR(s->data.std, 0.3530, 1e-6);
		CHECK(s->data.max_bytes == 1073741824LL);
		CHECK(s->model.input_rank == 3 && s->model.input[0] == 1 && s->model.input[1] == 28);
		CHECK(s->model.n_layers == 11);
		CHECK(l[0].kind == DLK_LAYER_CONV2D && l[0].filters == 32 && l[0].kernel == 3 && l[0].stride == 1 &&
		      l[0].padding == 1);
		CHECK(l[2].kind == DLK_LAYER_MAXPOOL && l[2].size == 2 && l[2].stride == 2);
		CHECK(l[3].kind == DLK_LAYER_CONV2D && l[3].stride == 1 && l[3].padding == 1);
		CHECK(l[5].kind == DLK_LAYER_MAXPOOL && l[5].size == 2 && l[5].stride == 2);
		CHECK(l[6].kind == DLK_LAYER_FLATTEN);
		CHECK_NEAR(l[9].rate, 0.25, 1e-7);
		CHECK(s->training.epochs == 10 && s->training.batch_size == 64);
		CHECK(s->training.optimizer == DLK_OPT_SGD);
		CHECK_NEAR(s->training.lr, 0.05, 1e-12);
		CHECK_NEAR(s->training.momentum, 0.9, 1e-12);
		CHECK(s->training.nesterov == 1);
		CHECK_NEAR(s->training.weight_decay, 0.0005, 1e-12);
		CHECK(s->training.schedule == DLK_LR_COSINE && s->training.warmup_steps == 100);
		CHECK_NEAR(s->training.min_lr, 0.0001, 1e-12);
		CHECK_NEAR(s->training.grad_clip, 5, 0);
		CHECK(s->training.seed == 7);
		CHECK(s->training.checkpoint_every == 200 && s->training.checkpoint_keep == 2);
		CHECK(s->resources.workers == 4 && s->resources.gpus == 1);
		CHECK_STR(s->resources.gpu_product, "NVIDIA-H100-80GB-HBM3");
		CHECK_STR(s->resources.cpu, "4"); /* an unquoted number is a fine quantity */
		CHECK_STR(s->resources.shm_size, "2Gi");
		CHECK(s->resources.n_node_selector == 1);
		CHECK(s->resources.n_tolerations == 1);
		CHECK_STR(s->resources.tolerations[0].key, "nvidia.com/gpu");
		CHECK_STR(s->resources.tolerations[0].op, "Exists");
		CHECK(s->resources.tolerations[0].value == NULL);
		CHECK_STR(s->resources.tolerations[0].effect, "NoSchedule");
		CHECK_STR(s->resources.priority_class, "high");
		CHECK_STR(s->resources.queue, "team-a");
		CHECK(s->resources.backoff_limit_per_index == 2);
		CHECK_STR(s->storage.size, "10Gi");
		CHECK_STR(s->storage.storage_class, "fast");
		CHECK(s->storage.claim == NULL);
		CHECK_STR(s->schedule, "0 3 * * MON-FRI");
		CHECK(s->serving.replicas == 2);
		CHECK_NEAR(s->serving.min_accuracy, 0.85, 1e-12);
		CHECK(round_trips(s));
		project_free(s);
	}

	s = project_load("tests/fuzz/spec/csv-minimal.yaml", NULL, 0, &e);
	CHECK_MSG(s != NULL, "the csv project loads: %s", e.msg);
	if (s) {
		CHECK(s->data.format == DLK_DATA_CSV);
		CHECK_STR(s->data.train.source.url, "https://example.com/iris-train.csv");
		CHECK_STR(s->data.test.source.url, "pvc://datasets/iris/test.csv");
		CHECK(s->data.csv_header == 1 && s->data.csv_label_column == 4);
		CHECK(s->training.optimizer == DLK_OPT_ADAMW);
		CHECK(s->training.schedule == DLK_LR_STEP && s->training.step_size == 10);
		CHECK(round_trips(s));
		project_free(s);
	}
}

static void test_defaults(void)
{
	struct dlk_project *s = load(MINIMAL);

	CHECK_MSG(s != NULL, "the minimal project loads: %s", spec_test_err.msg);
	if (!s)
		return;
	CHECK_STR(s->image, "dlk:" DLK_VERSION);
	CHECK(s->namespace_ == NULL && s->labels == NULL && s->n_labels == 0);
	CHECK(s->data.format == DLK_DATA_IDX);
	CHECK(s->data.test.images.url == NULL && s->data.test.source.url == NULL);
	CHECK(s->data.csv_header == -1 && s->data.csv_label_column == -1);
	CHECK(s->data.scale == (float)(1.0 / 255.0));
	CHECK(s->data.mean == 0.0f && s->data.std == 1.0f);
	CHECK(s->data.classes == NULL && s->data.n_classes == 0);
	CHECK_STR(s->data.cache_dir, ".dlk/cache");
	CHECK(s->data.max_bytes == 8LL << 30);
	CHECK(s->model.loss == DLK_LOSS_SOFTMAX_CE);
	CHECK_STR(s->model.init, "torch");
	CHECK(s->training.epochs == 5 && s->training.batch_size == 128);
	CHECK(s->training.optimizer == DLK_OPT_ADAM);
	CHECK(s->training.lr == 1e-3);
	CHECK(s->training.momentum == 0 && s->training.nesterov == 0 && s->training.weight_decay == 0);
	CHECK(s->training.beta1 == 0.9 && s->training.beta2 == 0.999 && s->training.eps == 1e-8);
	CHECK(s->training.schedule == DLK_LR_CONSTANT && s->training.warmup_steps == 0);
	CHECK(s->training.step_size == 1 && s->training.gamma == 0.1 && s->training.min_lr == 0);
	CHECK(s->training.grad_clip == 0 && s->training.seed == 42 && s->training.threads == 0);
	CHECK(s->training.checkpoint_every == 500 && s->training.checkpoint_keep == 3);
	CHECK_STR(s->training.checkpoint_dir, ".dlk/checkpoints/demo");
	CHECK(s->training.eval_every_epoch == 1);
	CHECK(s->resources.workers == 1 && s->resources.gpus == 0 && s->resources.gpu_product == NULL);
	CHECK_STR(s->resources.cpu, "2");
	CHECK_STR(s->resources.memory, "4Gi");
	CHECK_STR(s->resources.shm_size, "1Gi");
	CHECK(s->resources.n_node_selector == 0 && s->resources.n_tolerations == 0);
	CHECK(s->resources.priority_class == NULL && s->resources.queue == NULL);
	CHECK(s->resources.backoff_limit_per_index == 3 && s->resources.master_port == 29500);
	CHECK(s->storage.claim == NULL && s->storage.size == NULL && s->storage.storage_class == NULL);
	CHECK_STR(s->storage.mount, "/checkpoints");
	CHECK(s->schedule == NULL);
	CHECK(s->serving.replicas == 1 && s->serving.port == 8080 && s->serving.gpus == 0);
	CHECK_STR(s->serving.cpu, "1");
	CHECK_STR(s->serving.memory, "1Gi");
	CHECK(s->serving.min_accuracy == 0);
	CHECK(round_trips(s));
	project_free(s);

	/* layer defaults */
	s = load("name: d\ndata: {train: {images: /a, labels: /b}}\n"
	         "model:\n  input: [3, 32, 32]\n  layers: [{conv2d: {filters: 4}}, maxpool, dropout, "
	         "{maxpool: {size: 3}}, {maxpool: {size: 3, stride: 1}}, flatten, {dense: {units: 10}}]\n");
	CHECK_MSG(s != NULL, "layer defaults: %s", spec_test_err.msg);
	if (s) {
		const struct dlk_layer_spec *l = s->model.layers;
		CHECK(l[0].kernel == 3 && l[0].stride == 1 && l[0].padding == 0);
		CHECK(l[1].size == 2 && l[1].stride == 2);
		CHECK(l[2].rate == 0.5f);
		CHECK(l[3].size == 3 && l[3].stride == 3); /* stride follows size */
		CHECK(l[4].size == 3 && l[4].stride == 1);
		CHECK(round_trips(s));
		project_free(s);
	}
}

static void test_dependent_defaults(void)
{
	struct dlk_project *s;

	s = load(MINIMAL "training: {optimizer: sgd}\n");
	CHECK(s && s->training.lr == 0.01 && s->training.weight_decay == 0);
	project_free(s);
	s = load(MINIMAL "training: {optimizer: {name: adamw}}\n");
	CHECK(s && s->training.lr == 1e-3 && s->training.weight_decay == 0.01);
	project_free(s);
	s = load(MINIMAL "training: {optimizer: {name: adamw, weight_decay: 0, lr: 0.5}}\n");
	CHECK(s && s->training.lr == 0.5 && s->training.weight_decay == 0);
	project_free(s);
	s = load("name: c\ndata: {format: csv, train: {source: /t.csv}}\nmodel: {input: [4], layers: [relu]}\n");
	CHECK(s && s->data.scale == 1.0f);
	project_free(s);
	s = load("name: c\ndata: {format: tar, train: {source: /t.tar}}\nmodel: {input: [4], layers: [relu]}\n");
	CHECK(s && s->data.scale == (float)(1.0 / 255.0));
	project_free(s);
	s = load("name: c\ndata: {format: csv, scale: 0.5, train: {source: /t.csv}}\nmodel: {input: [4], layers: [relu]}\n");
	CHECK(s && s->data.scale == 0.5f);
	project_free(s);
	s = load(MINIMAL "training: {checkpoint: {dir: /ckpt}}\n");
	CHECK(s && !strcmp(s->training.checkpoint_dir, "/ckpt"));
	project_free(s);
}

static void test_core_schema(void)
{
	struct dlk_project *s;
	const char *m;

	s = load(MINIMAL "training: {epochs: 0o17, batch_size: 0x20, threads: +3, seed: 18446744073709551615}\n");
	CHECK(s && s->training.epochs == 15 && s->training.batch_size == 32 && s->training.threads == 3);
	CHECK(s && s->training.seed == 18446744073709551615ULL);
	project_free(s);
	s = load(MINIMAL "training: {optimizer: {lr: 1e-3, beta1: .5, eps: 1}, grad_clip: 1.5E+1}\n");
	CHECK(s && s->training.lr == 1e-3 && s->training.beta1 == 0.5 && s->training.eps == 1 &&
	      s->training.grad_clip == 15);
	project_free(s);
	s = load(MINIMAL "training: {optimizer: {nesterov: True}, eval_every_epoch: FALSE}\n");
	CHECK(s && s->training.nesterov == 1 && s->training.eval_every_epoch == 0);
	project_free(s);
	/* null, ~ and an empty value are all "not given"; "null" in quotes is a string */
	s = load(MINIMAL "namespace: ~\nschedule: null\nresources: {queue: }\nstorage: {claim: \"null\"}\n");
	CHECK(s && !s->namespace_ && !s->schedule && !s->resources.queue && s->storage.claim &&
	      !strcmp(s->storage.claim, "null"));
	project_free(s);
	/* quantities take numbers as well as strings */
	s = load(MINIMAL "resources: {cpu: 0.5, memory: 1e9, gpu_product: 3}\n");
	CHECK(s && !strcmp(s->resources.cpu, "0.5") && !strcmp(s->resources.memory, "1e9") &&
	      !strcmp(s->resources.gpu_product, "3"));
	project_free(s);
	s = load(MINIMAL "data_: 1\n");
	CHECK(!s);
	/* "yes" is a string, not a boolean; a string where a number goes is an error */
	m = load_msg(MINIMAL "training: {optimizer: {nesterov: on}}\n");
	CHECK_CONTAINS(m, "expected true or false, got 'on'");
	m = load_msg(MINIMAL "training: {epochs: \"3\"}\n");
	CHECK_CONTAINS(m, "training.epochs: expected a positive integer, got the string \"3\"");
	m = load_msg(MINIMAL "training: {epochs: '3'}\n");
	CHECK_CONTAINS(m, "got the string \"3\"");
	m = load_msg(MINIMAL "training: {epochs: 3.0}\n");
	CHECK_CONTAINS(m, "expected a positive integer, got the number 3.0");
	m = load_msg(MINIMAL "training: {optimizer: {lr: \"0.1\"}}\n");
	CHECK_CONTAINS(m, "expected a number > 0, got the string \"0.1\"");
	m = load_msg(MINIMAL "training: {optimizer: {lr: .inf}}\n");
	CHECK_CONTAINS(m, "expected a number > 0, got the number .inf");
	m = load_msg(MINIMAL "training: {seed: -1}\n");
	CHECK_CONTAINS(m, "training.seed: expected a non-negative integer, got the integer -1");
	m = load_msg(MINIMAL "training: {seed: 18446744073709551616}\n");
	CHECK_CONTAINS(m, "training.seed: expected a non-negative integer");
	m = load_msg(MINIMAL "training: {epochs: 99999999999999999999}\n");
	CHECK_CONTAINS(m, "training.epochs: expected a positive integer, got the integer 99999999999999999999");
	m = load_msg("name: 123\ndata: {train: {images: /a, labels: /b}}\nmodel: {input: [4], layers: [relu]}\n");
	CHECK_STR(m, "dlk.yaml:1:7: name: expected a string, got the integer 123");
	m = load_msg("name: true\ndata: {train: {images: /a, labels: /b}}\nmodel: {input: [4], layers: [relu]}\n");
	CHECK_STR(m, "dlk.yaml:1:7: name: expected a string, got the boolean true");
	s = load("name: \"123\"\ndata: {train: {images: /a, labels: /b}}\nmodel: {input: [4], layers: [relu]}\n");
	CHECK(s && !strcmp(s->name, "123"));
	project_free(s);
	s = load("name: !!str 123\ndata: {train: {images: /a, labels: /b}}\nmodel: {input: [4], layers: [relu]}\n");
	CHECK(s && !strcmp(s->name, "123"));
	project_free(s);
	s = load(MINIMAL "training: {epochs: !!int \"7\"}\n");
	CHECK(s && s->training.epochs == 7);
	project_free(s);
	m = load_msg(MINIMAL "training: {epochs: !!int \"x\"}\n");
	CHECK_CONTAINS(m, "unsupported tag 'tag:yaml.org,2002:int' for 'x'");
	/* csv.header: auto, or a real boolean */
	s = load("name: c\ndata: {format: csv, csv: {header: false}, train: {source: /t.csv}}\n"
	         "model: {input: [4], layers: [relu]}\n");
	CHECK(s && s->data.csv_header == 0);
	project_free(s);
	m = load_msg("name: c\ndata: {format: csv, csv: {header: yes}, train: {source: /t.csv}}\n"
	             "model: {input: [4], layers: [relu]}\n");
	CHECK_CONTAINS(m, "data.csv.header: expected auto, true or false, got 'yes'");
	/* max_bytes: integers and both kinds of quantity */
	s = load(MINIMAL "  max_bytes_typo: 1\n");
	CHECK(!s);
	s = load("name: c\ndata: {max_bytes: 500M, train: {images: /a, labels: /b}}\nmodel: {input: [4], layers: [relu]}\n");
	CHECK(s && s->data.max_bytes == 500000000LL);
	project_free(s);
	s = load("name: c\ndata: {max_bytes: 1048576, train: {images: /a, labels: /b}}\nmodel: {input: [4], layers: [relu]}\n");
	CHECK(s && s->data.max_bytes == 1048576LL);
	project_free(s);
	m = load_msg("name: c\ndata: {max_bytes: 1.5, train: {images: /a, labels: /b}}\nmodel: {input: [4], layers: [relu]}\n");
	CHECK_CONTAINS(m, "data.max_bytes: expected a size in bytes (like 8Gi or 500M), got the number 1.5");
	m = load_msg("name: c\ndata: {max_bytes: 100m, train: {images: /a, labels: /b}}\nmodel: {input: [4], layers: [relu]}\n");
	CHECK_CONTAINS(m, "data.max_bytes: '100m' is not a whole number of bytes");
}

static void test_dump(void)
{
	/* strings that could break a hand-written document survive the round trip */
	struct dlk_project *s = load("name: q\n"
	                          "data:\n"
	                          "  train: {images: \"/d/it's \\\"x\\\" #1: a\\\\b\", labels: \"/d/\\u00fc\\N\"}\n"
	                          "  classes: [\"a\\\"b\", 'c\\d', \"\\u00fc\", \"\\N\", \"- x\", \"{y}\", \"#z\", null_, \"\\uFEFFbom\"]\n"
	                          "model: {input: [4], layers: [{dense: {units: 9}}]}\n");
	char hex[65], hex2[65], buf_hex[65];

	CHECK_MSG(s != NULL, "odd strings load: %s", spec_test_err.msg);
	if (!s)
		return;
	CHECK_STR(s->data.train.images.url, "/d/it's \"x\" #1: a\\b");
	CHECK_STR(s->data.classes[1], "c\\d");
	CHECK_STR(s->data.classes[3], "\xc2\x85");
	CHECK(round_trips(s));
	char *d = project_dump_yaml(s);
	CHECK_CONTAINS(d, "\\u0085");
	CHECK_CONTAINS(d, "\\ufeffbom");
	CHECK_CONTAINS(d, "\"/d/it's \\\"x\\\" #1: a\\\\b\"");
	/* deterministic, and the digest is the sha256 of the dump */
	char *d2 = project_dump_yaml(s);
	CHECK(!strcmp(d, d2));
	project_digest(s, hex);
	dlk_sha256_hex(d, strlen(d), buf_hex);
	CHECK_STR(hex, buf_hex);
	project_digest(s, hex2);
	CHECK_STR(hex, hex2);
	free(d);
	free(d2);
	project_free(s);

	/* digests differ when anything differs, and do not depend on formatting of the source */
	struct dlk_project *a = load(MINIMAL), *b = load(MINIMAL "training: {epochs: 6}\n"),
	                *c = load("{name: demo, data: {train: {images: /d/train-images.gz, labels: /d/train-labels.gz}},"
	                          " model: {input: [784], layers: [{dense: {units: 10}}]}, training: {epochs: 5}}");
	if (a && b && c) {
		char ha[65], hb[65], hc[65];
		project_digest(a, ha);
		project_digest(b, hb);
		project_digest(c, hc);
		CHECK(strcmp(ha, hb) != 0);
		CHECK_STR(ha, hc);
	} else {
		CHECK_MSG(0, "digest projects load");
	}
	project_free(a);
	project_free(b);
	project_free(c);

	/* negative zero dumps as 0, which reads back as the same number */
	const char *negzero[] = { "data.mean=-0.0" };
	s = load_sets(MINIMAL "training: {grad_clip: -0.0}\n", negzero, 1);
	CHECK_MSG(s != NULL, "-0.0 loads: %s", spec_test_err.msg);
	if (s) {
		CHECK(round_trips(s));
		project_free(s);
	}

	/* floats keep their exact value through the dump */
	const char *scale[] = { "data.scale=0.00392156862745098", "data.mean=0.1307", "data.std=0.3081" };
	s = load_sets(MINIMAL "training: {optimizer: {lr: 0.1234567890123456789, eps: 3.3e-12}}\n", scale, 3);
	if (s) {
		CHECK(round_trips(s));
		char *y = project_dump_yaml(s);
		struct dlk_project *r = project_load_mem(y, strlen(y), "y", NULL, 0, NULL);
		CHECK(r && r->training.lr == s->training.lr && r->training.eps == s->training.eps);
		free(y);
		project_free(r);
		project_free(s);
	} else {
		CHECK_MSG(0, "float project loads: %s", spec_test_err.msg);
	}
}

static void test_names_and_keys(void)
{
	const char *const *k = project_known_keys();
	size_t n = 0;
	int has_epochs = 0, has_units = 0, has_sha = 0, has_tol = 0, has_lr = 0, has_node_sel = 0, dup = 0;

	CHECK_STR(dlk_layer_name(DLK_LAYER_CONV2D), "conv2d");
	CHECK_STR(dlk_layer_name(DLK_LAYER_DROPOUT), "dropout");
	CHECK_STR(project_optimizer_name(DLK_OPT_ADAMW), "adamw");
	CHECK_STR(project_schedule_name(DLK_LR_COSINE), "cosine");
	CHECK_STR(project_format_name(DLK_DATA_TAR), "tar");
	for (; k[n]; n++) {
		has_epochs |= !strcmp(k[n], "training.epochs");
		has_units |= !strcmp(k[n], "model.layers[].dense.units");
		has_sha |= !strcmp(k[n], "data.train.images.sha256");
		has_tol |= !strcmp(k[n], "resources.tolerations[].effect");
		has_lr |= !strcmp(k[n], "training.optimizer.lr");
		has_node_sel |= !strcmp(k[n], "resources.node_selector");
		for (size_t j = 0; j < n; j++)
			dup |= !strcmp(k[j], k[n]);
	}
	CHECK(n > 80);
	CHECK(has_epochs && has_units && has_sha && has_tol && has_lr && has_node_sel);
	CHECK(!dup);
	CHECK(project_known_keys() == k);
}

int main(void)
{
	test_examples();
	test_defaults();
	test_dependent_defaults();
	test_core_schema();
	test_dump();
	test_names_and_keys();
	return CHECK_DONE();
}
