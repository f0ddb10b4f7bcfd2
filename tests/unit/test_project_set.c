/* --set KEY.PATH=VALUE overrides: applied to the YAML tree before validation. */
#include "tests/unit/check.h"
#include "tests/unit/test_project.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

int main(void)
{
	struct dlk_project *s;
	const char *m;

	{
		const char *sets[] = { "resources.workers=4", "training.optimizer.lr=0.01",
		                       "model.layers.0.dense.units=64", "resources.node_selector.zone=a",
		                       "training.eval_every_epoch=false", "name=other", "training.seed=0x10" };
		s = load_sets(MINIMAL "resources:\n  node_selector: {disk: ssd}\n", sets, N(sets));
		CHECK(s != NULL);
		if (s) {
			CHECK(s->resources.workers == 4);
			CHECK_NEAR(s->training.lr, 0.01, 1e-12);
			CHECK(s->model.layers[0].units == 64);
			CHECK(s->resources.n_node_selector == 2);
			CHECK_STR(s->resources.node_selector[1].key, "zone");
			CHECK_STR(s->resources.node_selector[1].value, "a");
			CHECK(s->training.eval_every_epoch == 0);
			CHECK_STR(s->name, "other");
			CHECK(s->training.seed == 16);
			/* checkpoint dir follows the overridden name: sets come before defaults */
			CHECK_STR(s->training.checkpoint_dir, ".dlk/checkpoints/other");
			project_free(s);
		}
	}

	/* creating mappings that do not exist yet, and a null mapping ("training:") */
	{
		const char *sets[] = { "storage.claim=ckpt", "training.checkpoint.every=10", "labels.team=vision",
		                       "labels.app\\.kubernetes\\.io/name=dlk" };
		s = load_sets(MINIMAL "training:\n", sets, N(sets));
		CHECK(s != NULL);
		if (s) {
			CHECK_STR(s->storage.claim, "ckpt");
			CHECK(s->training.checkpoint_every == 10);
			CHECK(s->n_labels == 2);
			CHECK_STR(s->labels[1].key, "app.kubernetes.io/name");
			project_free(s);
		}
	}

	/* appending a list item (index == length), flow values, replacing a whole subtree */
	{
		const char *sets[] = { "model.layers.1=relu", "model.layers.2={dense: {units: 3}}",
		                       "model.input=[2, 4, 4]", "model.layers.0=flatten",
		                       "resources.tolerations=[{key: gpu, operator: Exists}]" };
		s = load_sets(MINIMAL, sets, N(sets));
		CHECK(s != NULL);
		if (s) {
			CHECK(s->model.n_layers == 3);
			CHECK(s->model.layers[0].kind == DLK_LAYER_FLATTEN);
			CHECK(s->model.layers[1].kind == DLK_LAYER_RELU);
			CHECK(s->model.layers[2].units == 3);
			CHECK(s->model.input_rank == 3 && s->model.input[0] == 2);
			CHECK(s->resources.n_tolerations == 1);
			CHECK_STR(s->resources.tolerations[0].op, "Exists");
			project_free(s);
		}
	}

	/* short forms open up to their long forms */
	{
		const char *sets[] = { "data.train.images.sha256=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		                       "training.optimizer.lr=0.5", "model.layers.1.maxpool.size=3",
		                       "model.layers.2.dropout.rate=0.3" };
		s = load_sets("name: demo\n"
		              "data: {train: {images: /d/i.gz, labels: /d/l.gz}}\n"
		              "model: {input: [1, 8, 8], layers: [relu, maxpool, dropout, flatten, {dense: {units: 2}}]}\n"
		              "training: {optimizer: sgd}\n",
		              sets, N(sets));
		CHECK_MSG(s != NULL, "short forms: %s", spec_test_err.msg);
		if (s) {
			CHECK_STR(s->data.train.images.url, "/d/i.gz");
			CHECK_STR(s->data.train.images.sha256, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
			CHECK(s->training.optimizer == DLK_OPT_SGD && s->training.lr == 0.5);
			CHECK(s->model.layers[1].kind == DLK_LAYER_MAXPOOL && s->model.layers[1].size == 3 &&
			      s->model.layers[1].stride == 3);
			CHECK_NEAR(s->model.layers[2].rate, 0.3, 1e-7);
			project_free(s);
		}
		const char *bad[] = { "model.layers.0.maxpool.size=3", "data.train.images.sha=1" };
		m = load_msg_sets("name: demo\ndata: {train: {images: /d/i.gz, labels: /d/l.gz}}\n"
		                  "model: {input: [1, 8, 8], layers: [relu]}\n", bad, 2);
		CHECK_STR(m, "--set model.layers.0.maxpool.size=3: cannot set 'maxpool' inside a single value\n"
		             "--set data.train.images.sha=1: unknown key 'sha' (did you mean 'sha256'?)");
	}

	/* the value is typed like a YAML scalar */
	{
		const char *sets[] = { "resources.cpu=500m", "serving.min_accuracy=0.9", "namespace=\"ml\"" };
		s = load_sets(MINIMAL, sets, N(sets));
		CHECK(s != NULL);
		if (s) {
			CHECK_STR(s->resources.cpu, "500m");
			CHECK_NEAR(s->serving.min_accuracy, 0.9, 1e-12);
			CHECK_STR(s->namespace_, "ml");
			project_free(s);
		}
		const char *q[] = { "training.epochs=\"3\"" };
		m = load_msg_sets(MINIMAL, q, 1);
		CHECK_STR(m, "--set training.epochs=\"3\": expected a positive integer, got the string \"3\"");
		const char *y[] = { "training.eval_every_epoch=yes" };
		m = load_msg_sets(MINIMAL, y, 1);
		CHECK_STR(m, "--set training.eval_every_epoch=yes: expected true or false, got 'yes'");
		/* a password given on the command line is not repeated in the error either */
		const char *pw[] = { "data.train.images=https://ann:s3cret@data.example/a" };
		m = load_msg_sets(MINIMAL, pw, 1);
		CHECK_CONTAINS(m, "--set data.train.images=https://***@data.example/a: 'https://***@data.example/a' carries credentials");
		CHECK(m && !strstr(m, "s3cret"));
		/* an empty value is null: the key counts as absent (and a required one as missing) */
		const char *e[] = { "resources.queue=", "name=" };
		m = load_msg_sets(MINIMAL "resources: {queue: q}\n", e, 2);
		CHECK_STR(m, "dlk.yaml:1:1: name: 'name' is required but has no value");
	}

	/* errors name the --set they come from */
	{
		const char *a[] = { "training.epoch=3" };
		m = load_msg_sets(MINIMAL, a, 1);
		CHECK_STR(m, "--set training.epoch=3: unknown key 'epoch' (did you mean 'epochs'?)");
		CHECK(spec_test_err.code == DLK_EXIT_CONFIG);
		const char *b[] = { "training.epochs=lots" };
		m = load_msg_sets(MINIMAL, b, 1);
		CHECK_STR(m, "--set training.epochs=lots: expected a positive integer, got 'lots'");
		const char *c[] = { "model.layers.5.dense.units=3" };
		m = load_msg_sets(MINIMAL, c, 1);
		CHECK_STR(m, "--set model.layers.5.dense.units=3: index 5 is out of range (the list has 1 items)");
		const char *d[] = { "name.first=x" };
		m = load_msg_sets(MINIMAL, d, 1);
		CHECK_STR(m, "--set name.first=x: cannot set 'first' inside a single value");
		const char *e[] = { "model.layers.first=x" };
		m = load_msg_sets(MINIMAL, e, 1);
		CHECK_STR(m, "--set model.layers.first=x: 'first' is not an index into the list (it has 1 items)");
		const char *f[] = { "model.layers.0={dense: {unit: 3}}" };
		m = load_msg_sets(MINIMAL, f, 1);
		CHECK_STR(m, "--set model.layers.0={dense: {unit: 3}}: model.layers[0].dense.unit: unknown key 'unit' (did you mean 'units'?)\n"
		             "--set model.layers.0={dense: {unit: 3}}: model.layers[0].dense.units: missing required key 'units'");
		const char *g[] = { "model.layers.0={conv2d: {filters: 4}}" };
		m = load_msg_sets(MINIMAL, g, 1);
		CHECK_STR(m, "--set model.layers.0={conv2d: {filters: 4}}: conv2d needs a 3-D input [C, H, W], but its input is flat");
		/* a set problem and a file problem are both reported */
		const char *h[] = { "resources.gpus=99" };
		m = load_msg_sets(MINIMAL "training: {epochs: 0}\n", h, 1);
		CHECK_STR(m, "dlk.yaml:10:20: training.epochs: expected a positive integer, got the integer 0\n"
		             "--set resources.gpus=99: expected an integer from 0 to 16, got the integer 99");
	}

	/* malformed --set arguments are usage errors */
	{
		const char *a[] = { "training.epochs" };
		m = load_msg_sets(MINIMAL, a, 1);
		CHECK_STR(m, "--set training.epochs: expected KEY.PATH=VALUE (like training.epochs=3)");
		CHECK(spec_test_err.code == DLK_EXIT_USAGE);
		const char *b[] = { "=3" };
		m = load_msg_sets(MINIMAL, b, 1);
		CHECK_STR(m, "--set =3: expected KEY.PATH=VALUE (like training.epochs=3)");
		CHECK(spec_test_err.code == DLK_EXIT_USAGE);
		const char *c[] = { "training..epochs=3", "a.=1" };
		m = load_msg_sets(MINIMAL, c, 2);
		CHECK_STR(m, "--set training..epochs=3: has an empty key in 'training..epochs'\n"
		             "--set a.=1: has an empty key in 'a.'");
		CHECK(spec_test_err.code == DLK_EXIT_USAGE);
		const char *d[] = { "model.input=[1, 2" };
		m = load_msg_sets(MINIMAL, d, 1);
		CHECK_CONTAINS(m, "--set model.input=[1, 2: the value is not valid YAML: did not find expected ',' or ']'");
		CHECK(spec_test_err.code == DLK_EXIT_USAGE);
		const char *e[] = { "name=\xff\xfe" };
		m = load_msg_sets(MINIMAL, e, 1);
		CHECK_CONTAINS(m, "is not valid UTF-8");
		CHECK(spec_test_err.code == DLK_EXIT_USAGE);
		const char *f[] = { "model.input=[*a]" };
		m = load_msg_sets(MINIMAL, f, 1);
		CHECK_CONTAINS(m, "--set model.input=[*a]: the value is not valid YAML: alias '*a' is not supported");
	}

	/* on an empty file, --set alone can build a project */
	{
		const char *sets[] = { "name=from-sets", "data.train.images=/a", "data.train.labels=/b",
		                       "model.input=[4]", "model.layers=[{dense: {units: 2}}]" };
		s = load_sets("", sets, N(sets));
		CHECK(s != NULL);
		if (s) {
			CHECK_STR(s->name, "from-sets");
			CHECK_STR(s->data.train.images.url, "/a");
			project_free(s);
		}
	}
	return CHECK_DONE();
}
