/* Every error form of project_load(): exact file:line:column, key path and wording. */
#include "tests/unit/check.h"
#include "tests/unit/test_project.h"

static int count_lines(const char *s)
{
	int n = *s ? 1 : 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

int main(void)
{
	const char *m;

	/* unknown key, with a suggestion from the keys valid at that level */
	m = load_msg(MINIMAL "training:\n  epoch: 3\n");
	CHECK_STR(m, "dlk.yaml:11:3: training.epoch: unknown key 'epoch' (did you mean 'epochs'?)");
	CHECK(spec_test_err.code == DLK_EXIT_CONFIG);
	m = load_msg(MINIMAL "trainig:\n  epochs: 3\n");
	CHECK_STR(m, "dlk.yaml:10:1: trainig: unknown key 'trainig' (did you mean 'training'?)");
	m = load_msg(MINIMAL "epochs: 3\n");
	CHECK_STR(m, "dlk.yaml:10:1: epochs: unknown key 'epochs' (did you mean 'training.epochs'?)");
	m = load_msg(MINIMAL "training: {lr: 0.1}\n");
	CHECK_STR(m, "dlk.yaml:10:12: training.lr: unknown key 'lr' (did you mean 'training.optimizer.lr'?)");
	m = load_msg(MINIMAL "zzzzzz: 1\n");
	/* no near match: the keys valid there, once per mapping */
	CHECK_STR(m, "dlk.yaml:10:1: zzzzzz: unknown key 'zzzzzz' (keys here are: name, image, namespace, labels, data, model, training, resources, storage, schedule, trigger, serving, logging, program)");
	m = load_msg(MINIMAL "zzzzzz: 1\nyyyyyy: 2\n");
	CHECK_STR(m, "dlk.yaml:10:1: zzzzzz: unknown key 'zzzzzz' (keys here are: name, image, namespace, labels, data, model, training, resources, storage, schedule, trigger, serving, logging, program)\n"
	             "dlk.yaml:11:1: yyyyyy: unknown key 'yyyyyy'");

	/* a scalar of the wrong kind */
	m = load_msg(MINIMAL "training:\n  epochs: 2\n  batch_size: lots\n");
	CHECK_STR(m, "dlk.yaml:12:15: training.batch_size: expected a positive integer, got 'lots'");
	m = load_msg(MINIMAL "training: {epochs: 0}\n");
	CHECK_STR(m, "dlk.yaml:10:20: training.epochs: expected a positive integer, got the integer 0");
	m = load_msg(MINIMAL "resources: {workers: 2000}\n");
	CHECK_STR(m, "dlk.yaml:10:22: resources.workers: expected an integer from 1 to 1024, got the integer 2000");
	m = load_msg(MINIMAL "training: {epochs: 2.5}\n");
	CHECK_STR(m, "dlk.yaml:10:20: training.epochs: expected a positive integer, got the number 2.5");

	/* unknown layer */
	m = load_msg("name: demo\n"
	             "data:\n"
	             "  train: {images: /a, labels: /b}\n"
	             "model:\n"
	             "  input: [784]\n"
	             "  layers:\n"
	             "    - dense: {units: 64}\n"
	             "    - relu\n"
	             "    - dropout: {rate: 0.1}\n"
	             "    - dens: {units: 10}\n");
	CHECK_STR(m, "dlk.yaml:10:7: model.layers[3]: unknown layer 'dens' (did you mean 'dense'?)");
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}}\n"
	             "model: {input: [4], layers: [relu, rleu, {dense: {units: 2}}]}\n");
	CHECK_STR(m, "dlk.yaml:3:36: model.layers[1]: unknown layer 'rleu' (did you mean 'relu'?)");
	/* no near match: the kinds there are */
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}}\n"
	             "model: {input: [4], layers: [relu, lstm, {dense: {units: 2}}]}\n");
	CHECK_STR(m, "dlk.yaml:3:36: model.layers[1]: unknown layer 'lstm' (layers are: dense, conv2d, maxpool, flatten, "
	             "relu, tanh, sigmoid, dropout, add, concat, globalavgpool, layernorm, gelu, softmax, embedding, upsample, attention, batchnorm, avgpool, convtranspose2d, reshape, meanpool)");
	/* an enumerated value with no near match names its values too */
	m = load_msg(MINIMAL "training: {optimizer: {name: lbfgs}}\n");
	CHECK_CONTAINS(m, "unknown value 'lbfgs' (expected sgd, adam or adamw)");
	/* shapes the project alone decides fail the load (so --dry-run and a submit refuse them), as
	 * the engine would after the data had loaded */
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}}\n"
	             "model: {input: [1, 28, 28], layers: [{dense: {units: 64}}, relu, {dense: {units: 10}}]}\n");
	/* dense works over the last axis (nn.Linear): one channel of rows is a sequence, so the image's
	 * 28 rows stay 28 rows, and the message names the dense that took them for one */
	CHECK_STR(m, "dlk.yaml:3:38: model.layers[0]: dense runs over each of the 28 rows of its 1x28x28 input (a "
	          "sequence), so the model ends with a 1x28x10 output, not one value per class (add 'flatten' before it)");
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}}\n"
	             "model: {input: [1, 28, 28], layers: [{conv2d: {filters: 4}}, {dense: {units: 10}}]}\n");
	CHECK_STR(m, "dlk.yaml:3:62: model.layers[1]: dense expects a flat input or a sequence [1, T, D] but gets 4x26x26 "
	          "(add 'flatten' before it)");
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}}\n"
	             "model: {input: [1, 8, 8], layers: [{conv2d: {filters: 4}}, relu]}\n");
	CHECK_STR(m, "dlk.yaml:3:60: model.layers[1]: the model ends with a 4x6x6 output, not one value per class (end it "
	             "with 'flatten' and a dense layer of 10 units)");
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}}\n"
	             "model: {input: [4], layers: [{dense: {units: 1}}]}\n");
	CHECK_STR(m, "dlk.yaml:3:30: model.layers[0]: the model ends with 1 output; softmax cross-entropy needs at least "
	             "2 classes");
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}}\n"
	             "model: {input: [4], layers: [dense]}\n");
	CHECK_STR(m, "dlk.yaml:3:30: model.layers[0]: dense needs 'units' (like '- dense: {units: ...}')");
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}}\n"
	             "model: {input: [4], layers: [{dense: {units: 2}, relu: null}]}\n");
	CHECK_STR(m, "dlk.yaml:3:30: model.layers[0]: expected one layer per list item (like '- dense: {units: 10}'), got 2 keys");
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}}\n"
	             "model: {input: [4], layers: [{dense: {units: 2, unit: 3}}]}\n");
	CHECK_STR(m, "dlk.yaml:3:49: model.layers[0].dense.unit: unknown key 'unit' (did you mean 'units'?)");

	/* sha256 pins */
	m = load_msg("name: demo\n"
	             "data:\n"
	             "  train:\n"
	             "    images: {url: /a, sha256: 12ab}\n"
	             "    labels: /b\n"
	             "model: {input: [4], layers: [{dense: {units: 2}}]}\n");
	CHECK_STR(m, "dlk.yaml:4:31: data.train.images.sha256: expected 64 hex digits, got '12ab'");

	/* missing required keys: reported at the parent mapping */
	m = load_msg("data:\n  train: {images: /a, labels: /b}\nmodel: {input: [4], layers: [{dense: {units: 2}}]}\n");
	CHECK_STR(m, "dlk.yaml:1:1: name: missing required key 'name'");
	m = load_msg("name: demo\ndata:\n  train: {images: /a}\nmodel: {input: [4], layers: [{dense: {units: 2}}]}\n");
	CHECK_STR(m, "dlk.yaml:3:10: data.train.labels: missing required key 'labels' (format idx needs images and labels)");
	m = load_msg("name: demo\ndata:\n  format: csv\n  train: {images: /a, labels: /b}\n"
	             "model: {input: [4], layers: [{dense: {units: 2}}]}\n");
	CHECK_CONTAINS(m, "dlk.yaml:4:10: data.train.source: missing required key 'source' (format csv reads one source per split)");
	CHECK_CONTAINS(m, "dlk.yaml:4:19: data.train.images: images and labels are for format idx; format csv uses 'source'");
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}}\nmodel: {layers: [relu]}\n");
	CHECK_STR(m, "dlk.yaml:3:8: model.input: missing required key 'input'");
	m = load_msg("name: demo\nmodel: {input: [4], layers: [relu]}\n");
	CHECK_STR(m, "dlk.yaml:1:1: data: missing required key 'data'");
	m = load_msg("name:\ndata: {train: {images: /a, labels: /b}}\nmodel: {input: [4], layers: [relu]}\n");
	CHECK_STR(m, "dlk.yaml:1:1: name: 'name' is required but has no value");

	/* wrong YAML types */
	m = load_msg(MINIMAL "resources: [1, 2]\n");
	CHECK_STR(m, "dlk.yaml:10:12: resources: expected a mapping, got a sequence");
	m = load_msg(MINIMAL "training: {optimizer: {name: adam, lr: [1]}}\n");
	CHECK_STR(m, "dlk.yaml:10:40: training.optimizer.lr: expected a number > 0, got a sequence");
	m = load_msg(MINIMAL "labels: [a]\n");
	CHECK_STR(m, "dlk.yaml:10:9: labels: expected a mapping of label keys to values, got a sequence");
	/* a section of the wrong type is one problem, not a cascade */
	m = load_msg("name: demo\ndata: [1]\nmodel: {input: [4], layers: [relu]}\n");
	CHECK_STR(m, "dlk.yaml:2:7: data: expected a mapping, got a sequence");
	m = load_msg("name: demo\ndata: {train: [a]}\nmodel: {input: [4], layers: [relu]}\n");
	CHECK_STR(m, "dlk.yaml:2:15: data.train: expected a mapping, got a sequence");
	m = load_msg("name: demo\ndata: {train: {images: [a], labels: /b}}\nmodel: {input: [4], layers: [relu]}\n");
	CHECK_STR(m, "dlk.yaml:2:24: data.train.images: expected a URL or a mapping {url, sha256}, got a sequence");
	m = load_msg("name: demo\ndata: {train: {images: {sha256: 0}, labels: /b}}\nmodel: {input: [4], layers: [relu]}\n");
	CHECK_STR(m, "dlk.yaml:2:33: data.train.images.sha256: expected a string, got the integer 0\n"
	             "dlk.yaml:2:24: data.train.images.url: missing required key 'url'");
	m = load_msg("- name: demo\n");
	CHECK_STR(m, "dlk.yaml:1:1: expected a mapping at the top level, got a sequence");
	m = load_msg("");
	CHECK_STR(m, "dlk.yaml:1:1: the file is empty: a project needs at least name, data and model");
	m = load_msg(MINIMAL "name: again\n");
	CHECK_STR(m, "dlk.yaml:10:1: name: duplicate key 'name' (first at line 1)");
	m = load_msg(MINIMAL "training:\n  seed: 1\n  seed: 2\n");
	CHECK_STR(m, "dlk.yaml:12:3: training.seed: duplicate key 'seed' (first at line 11)");
	m = load_msg(MINIMAL "training: {eval_every_epoch: yes}\n");
	CHECK_STR(m, "dlk.yaml:10:30: training.eval_every_epoch: expected true or false, got 'yes'");
	m = load_msg(MINIMAL "training: {epochs: !!str 3}\n");
	CHECK_STR(m, "dlk.yaml:10:20: training.epochs: expected a positive integer, got the string \"3\"");
	m = load_msg(MINIMAL "training: {epochs: !!binary 3}\n");
	CHECK_STR(m, "dlk.yaml:10:20: training.epochs: unsupported tag 'tag:yaml.org,2002:binary' for '3'");

	/* enums */
	m = load_msg(MINIMAL "training: {optimizer: adm}\n");
	CHECK_STR(m, "dlk.yaml:10:23: training.optimizer: unknown value 'adm' (expected sgd, adam or adamw) (did you mean 'adam'?)");
	m = load_msg(MINIMAL "training: {lr_schedule: {name: cosin}}\n");
	CHECK_STR(m, "dlk.yaml:10:32: training.lr_schedule.name: unknown value 'cosin' (expected constant, step or cosine) (did you mean 'cosine'?)");
	m = load_msg("name: demo\ndata: {format: parquet, train: {source: /a}}\nmodel: {input: [4], layers: [relu]}\n");
	CHECK_STR(m, "dlk.yaml:2:16: data.format: unknown value 'parquet' (expected idx, csv, tar, images or text)");
	/* a bad format with a csv section: still one problem */
	m = load_msg("name: demo\ndata: {format: parquet, csv: {header: true}, train: {source: /a}}\n"
	             "model: {input: [4], layers: [relu]}\n");
	CHECK_STR(m, "dlk.yaml:2:16: data.format: unknown value 'parquet' (expected idx, csv, tar, images or text)");
	/* format text: a GPT-2 pair is two files, read by a BPE; per-channel values are 1 to 4 */
	m = load_msg("name: demo\ndata: {format: text, train: {source: /a}, text: {tokenizer: bpe, vocab: v.json}}\n"
	             "model: {input: [4], layers: [relu]}\n");
	CHECK_STR(m, "dlk.yaml:2:73: data.text.vocab: give both vocab and merges (a GPT-2 vocab.json and merges.txt), or neither");
	m = load_msg("name: demo\ndata: {format: text, train: {source: /a}, text: {vocab: v.json, merges: m.txt}}\n"
	             "model: {input: [4], layers: [relu]}\n");
	CHECK_STR(m, "dlk.yaml:2:57: data.text.vocab: vocab and merges are read by tokenizer: bpe, not byte");
	m = load_msg("name: demo\ndata: {format: images, train: {source: /a}, images: {std: [1, 0]}}\n"
	             "model: {input: [4], layers: [relu]}\n");
	CHECK_STR(m, "dlk.yaml:2:59: data.images.std: a standard deviation must be positive, not 0");
	m = load_msg("name: demo\ndata: {format: images, train: {source: /a}, images: {mean: [1, 2, 3, 4, 5]}}\n"
	             "model: {input: [4], layers: [relu]}\n");
	CHECK_STR(m, "dlk.yaml:2:60: data.images.mean: expected 1 to 4 numbers (one per channel), got 5");
	/* data.images is for 8-bit images (images, idx, tar), and flips and crops for [C, H, W] inputs */
	m = load_msg("name: demo\ndata: {format: csv, train: {source: /a}, images: {flip: true}}\n"
	             "model: {input: [4], layers: [relu]}\n");
	CHECK_STR(m, "dlk.yaml:2:50: data.images: normalisation per channel and augmentation are for images (format "
	          "images, idx or tar), not format csv: leave data.images out (data.mean and data.std scale every value)");
	m = load_msg("name: demo\ndata: {format: text, train: {source: /a}, images: {mean: [0.5]}}\n"
	             "model: {input: [4], layers: [relu]}\n");
	CHECK_CONTAINS(m, "data.images: normalisation per channel and augmentation are for images");
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}, images: {crop_padding: 2}}\n"
	             "model: {input: [784], layers: [relu]}\n");
	CHECK_STR(m, "dlk.yaml:2:64: data.images.crop_padding: augmentation moves the pixels of images [channels, "
	          "height, width], but model.input has 1 axis: give model.input as [C, H, W] or leave it out");
	m = load_msg("name: demo\ndata: {format: tar, train: {source: /a.tar}, images: {flip: true}}\n"
	             "model: {input: [1, 28, 28], layers: [flatten]}\n");
	CHECK_MSG(m == NULL || !strstr(m, "data.images"), "format tar takes data.images.flip (%s)", m ? m : "no problem");
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}, images: {flip: true, crop_padding: 2}}\n"
	             "model: {input: [1, 28, 28], layers: [flatten]}\n");
	CHECK_MSG(m == NULL || !strstr(m, "data.images"), "format idx takes data.images.flip and crop_padding (%s)",
	          m ? m : "no problem");
	/* data.images.noise: a denoiser's data (task image), the targets the images themselves */
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}, images: {noise: 51}}\n"
	             "model: {input: [1, 28, 28], task: image, loss: mse, layers: [relu]}\n");
	CHECK_MSG(!m[0], "format idx with task image takes data.images.noise (%s)", m);
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}, images: {noise: 51}}\n"
	             "model: {input: [1, 28, 28], layers: [flatten]}\n");
	CHECK_STR(m, "dlk.yaml:2:57: data.images.noise: noise makes a denoiser's data (model.task image: noisy inputs, the "
	          "images themselves as targets), not task classification's: leave it out, or set model.task: image");
	m = load_msg("name: demo\ndata: {format: images, train: {source: /a, targets: /b}, images: {noise: 51}}\n"
	             "model: {input: [1, 28, 28], task: image, loss: mse, layers: [relu]}\n");
	CHECK_CONTAINS(m, "data.train.targets: with data.images.noise the targets are the images themselves");
	m = load_msg("name: demo\ndata: {format: images, train: {source: /a}, images: {noise: 51}}\n"
	             "model: {input: [1, 28, 28], task: image, loss: mse, layers: [relu]}\n");
	CHECK_MSG(!m[0], "an image folder with task image and noise needs no targets (%s)", m);
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}, images: {noise: 51, flip: true}}\n"
	             "model: {input: [1, 28, 28], task: image, loss: mse, layers: [relu]}\n");
	CHECK_CONTAINS(m, "data.images.flip: flipping would move an input but not its target image");
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}, images: {noise: 300}}\n"
	             "model: {input: [1, 28, 28], task: image, loss: mse, layers: [relu]}\n");
	CHECK_CONTAINS(m, "data.images.noise");
	m = load_msg("name: demo\ndata: {format: csv, train: {source: /a}, images: {noise: 5}}\n"
	             "model: {input: [4], task: image, loss: mse, layers: [relu]}\n");
	CHECK_CONTAINS(m, "data.images: normalisation per channel and augmentation are for images");
	/* data.images.decode chooses when image folders are decoded */
	m = load_msg("name: demo\ndata: {format: images, train: {source: /a}, images: {decode: stream}}\n"
	             "model: {input: [1, 28, 28], layers: [flatten, {dense: {units: 10}}]}\n");
	CHECK_MSG(!m[0], "image folders take data.images.decode (%s)", m);
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}, images: {decode: once}}\n"
	             "model: {input: [1, 28, 28], layers: [flatten, {dense: {units: 10}}]}\n");
	CHECK_CONTAINS(m, "dlk.yaml:2:58: data.images.decode: decode chooses when image folders' files are decoded (format "
	                  "images); format idx is decoded as it is read");
	m = load_msg("name: demo\ndata: {format: images, train: {source: /a}, images: {decode: lazily}}\n"
	             "model: {input: [1, 28, 28], layers: [flatten, {dense: {units: 10}}]}\n");
	CHECK_CONTAINS(m, "data.images.decode: unknown value 'lazily' (expected auto, once or stream)");
	m = load_msg("name: demo\ndata: {format: csv, train: {source: /a}, images: {decode: stream}}\n"
	             "model: {input: [4], layers: [relu]}\n");
	CHECK_CONTAINS(m, "data.images: normalisation per channel and augmentation are for images");
	/* training.precision: fp32 or bf16 */
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}}\nmodel: {input: [4], layers: [relu]}\n"
	             "training: {precision: bf16}\nresources: {gpus: 2}\n");
	CHECK_MSG(!m[0], "bf16, here and on GPU workers (%s)", m);
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}}\nmodel: {input: [4], layers: [relu]}\n"
	             "training: {precision: fp16}\n");
	CHECK_CONTAINS(m, "dlk.yaml:4:23: training.precision: unknown value 'fp16' (expected fp32 or bf16)");
	/* "format:" with no value is the default, idx, and the splits are checked against it */
	m = load_msg("name: demo\ndata: {format: , train: {source: /a}}\nmodel: {input: [4], layers: [relu]}\n");
	CHECK_CONTAINS(m, "dlk.yaml:2:34: data.train.source: 'source' is for formats csv and tar; format idx uses images and labels");
	m = load_msg(MINIMAL "  init: he\n");
	CHECK_STR(m, "dlk.yaml:10:9: model.init: unknown value 'he' (expected torch, xavier or gpt2)");
	m = load_msg(MINIMAL "  loss: hinge\n");
	CHECK_STR(m, "dlk.yaml:10:9: model.loss: unknown value 'hinge' (expected softmax_cross_entropy, "
	          "binary_cross_entropy, mse, l1, huber or token_cross_entropy)");
	m = load_msg(MINIMAL "  loss: mse\n");
	CHECK_STR(m, "dlk.yaml:10:9: model.loss: task classification trains with softmax_cross_entropy, not mse");
	m = load_msg(MINIMAL "  task: regression\n  loss: binary_cross_entropy\n");
	CHECK_STR(m, "dlk.yaml:11:9: model.loss: task regression trains with mse, l1 or huber, not binary_cross_entropy");
	m = load_msg(MINIMAL "serving: {gate: [{metric: r2, min: 0.8}]}\n");
	CHECK_CONTAINS(m, "serving.gate[0].metric: a model of task classification has no test metric 'r2'");
	m = load_msg(MINIMAL "serving: {gate: [{metric: accuracy}]}\n");
	CHECK_CONTAINS(m, "serving.gate[0]: a rule needs min, max or both");
	m = load_msg(MINIMAL "serving: {gate: [{metric: acuracy, min: 0.5}]}\n");
	CHECK_CONTAINS(m, "serving.gate[0].metric: unknown value 'acuracy'");
	m = load_msg(MINIMAL "  task: regression\ntraining: {label_smoothing: 0.1}\n");
	CHECK_CONTAINS(m, "training.label_smoothing: label smoothing is for task classification, not regression");
	/* task lm: text corpora, logits per position, its own loss, validation and gate */
	m = load_msg(MINIMAL "  task: lm\n");
	CHECK_CONTAINS(m, "data.format: task lm reads plain text corpora: set data.format to text, not idx");
	m = load_msg(MINIMAL "  task: lm\n  loss: softmax_cross_entropy\n");
	CHECK_CONTAINS(m, "model.loss: task lm trains with token_cross_entropy, not softmax_cross_entropy");
	m = load_msg(MINIMAL "  loss: token_cross_entropy\n");
	CHECK_CONTAINS(m, "model.loss: task classification trains with softmax_cross_entropy, not token_cross_entropy");
	m = load_msg("name: demo\ndata: {format: text, train: {source: c.txt}, validation: 0.1}\n"
	             "model: {task: lm, input: [8], layers: [{embedding: {vocab: 257, dim: 257}}]}\n");
	CHECK(m == NULL || !*m);
	m = load_msg("name: demo\ndata: {format: text, train: {source: c.txt}}\n"
	             "model: {task: lm, input: [8], layers: [{embedding: {vocab: 257, dim: 16}}, flatten, {dense: {units: 257}}]}\n");
	CHECK_CONTAINS(m, "model.layers[2]: task lm needs the model to end with [1, 8, VOCAB] logits (one row of "
	               "vocabulary logits per input token), not 1x1x257");
	m = load_msg("name: demo\ndata: {format: csv, train: {source: a.csv}, validation: 0.1}\n"
	             "model: {input: [4], layers: [{dense: {units: 2}}]}\n");
	CHECK_CONTAINS(m, "data.validation: a validation fraction of the corpus is for task lm, not classification");
	m = load_msg("name: demo\ndata: {format: text, train: {source: c.txt}, test: {source: v.txt}, validation: 0.1}\n"
	             "model: {task: lm, input: [8], layers: [{embedding: {vocab: 257, dim: 257}}]}\n");
	CHECK_CONTAINS(m, "data.validation: give either a validation fraction of the training corpus or data.test, not both");
	m = load_msg(MINIMAL "serving: {max_val_loss: 2}\n");
	CHECK_CONTAINS(m, "serving.max_val_loss: a maximum validation loss is for task lm, not classification");
	m = load_msg(MINIMAL "serving: {gate: [{metric: perplexity, max: 20}]}\n");
	CHECK_CONTAINS(m, "serving.gate[0].metric: a model of task classification has no test metric 'perplexity'");

	/* value syntax */
	m = load_msg("name: Fashion_MLP\ndata: {train: {images: /a, labels: /b}}\nmodel: {input: [4], layers: [relu]}\n");
	CHECK_STR(m, "dlk.yaml:1:7: name: 'Fashion_MLP' must consist of lowercase letters, digits and '-' (a DNS-1123 label)");
	m = load_msg("name: a-name-that-is-far-too-long-for-pods-with-suffixes-x\n"
	             "data: {train: {images: /a, labels: /b}}\nmodel: {input: [4], layers: [relu]}\n");
	CHECK_STR(m, "dlk.yaml:1:7: name: 'a-name-that-is-far-too-long-for-pods-with-suffixes-x' must be at most 50 characters (it has 52)");
	m = load_msg(MINIMAL "image: Registry/Team/Img\n");
	CHECK_CONTAINS(m, "dlk.yaml:10:8: image: 'Registry/Team/Img' has an invalid repository name");
	m = load_msg(MINIMAL "resources: {memory: 4GB}\n");
	CHECK_STR(m, "dlk.yaml:10:21: resources.memory: '4GB' has an unknown suffix 'GB' (use Ki Mi Gi Ti Pi Ei, or n u m k M G T P E)");
	m = load_msg(MINIMAL "resources: {cpu: -1}\n");
	CHECK_STR(m, "dlk.yaml:10:18: resources.cpu: '-1' must not be negative");
	m = load_msg(MINIMAL "labels: {team: vision, -bad: x, ok: \"has space\"}\n");
	CHECK_CONTAINS(m, "dlk.yaml:10:24: labels.-bad: invalid label key '-bad': the name part must start and end with a letter or digit");
	CHECK_CONTAINS(m, "dlk.yaml:10:37: labels.ok: invalid label value 'has space': a label value may only contain letters, digits, '-', '_' and '.'");
	m = load_msg(MINIMAL "schedule: \"0 25 * * *\"\n");
	CHECK_STR(m, "dlk.yaml:10:11: schedule: '0 25 * * *' hour field '25' is not valid (values 0-23)");
	m = load_msg(MINIMAL "schedule: \"@fortnightly\"\n");
	CHECK_STR(m, "dlk.yaml:10:11: schedule: '@fortnightly' unknown schedule macro (use @yearly, @monthly, @weekly, @daily or @hourly)");
	m = load_msg(MINIMAL "schedule: \"0 3 * *\"\n");
	CHECK_STR(m, "dlk.yaml:10:11: schedule: '0 3 * *' must have 5 fields (minute hour day-of-month month day-of-week), it has 4");
	m = load_msg("name: demo\ndata: {train: {images: \"ftp://x/a\", labels: /b}}\nmodel: {input: [4], layers: [relu]}\n");
	CHECK_STR(m, "dlk.yaml:2:24: data.train.images: 'ftp://x/a' has an unsupported scheme 'ftp' (use file://, https://, http://, pvc:// or a plain path)");
	/* credentials in a URL would be stored with the project: refused, and not repeated */
	m = load_msg("name: demo\ndata: {train: {images: \"https://ann:s3cret@data.example/a\", labels: /b}}\nmodel: {input: [4], layers: [relu]}\n");
	CHECK_STR(m, "dlk.yaml:2:24: data.train.images: 'https://***@data.example/a' carries credentials (user:password@host), "
	             "which would be stored in plain text with the project: put them in a netrc file instead (~/.netrc, or "
	             "$NETRC; in the cluster, a Secret named by data.netrc_secret)");
	CHECK(m && !strstr(m, "s3cret") && !strstr(m, "ann"));
	m = load_msg("name: demo\ndata: {train: {images: \"http://tok@h/a?u=x@y\", labels: /b}}\nmodel: {input: [4], layers: [relu]}\n");
	CHECK_CONTAINS(m, "'http://***@h/a?u=x@y' carries credentials");
	/* an @ after the host is part of the path, not a password */
	m = load_msg("name: demo\ndata: {train: {images: \"https://h.example/a@2x.gz\", labels: /b}}\nmodel: {input: [4], layers: [relu]}\n");
	CHECK(m == NULL || !strstr(m, "credentials"));
	m = load_msg("name: demo\ndata: {netrc_secret: Data_Auth, train: {images: /a, labels: /b}}\nmodel: {input: [4], layers: [relu]}\n");
	CHECK_CONTAINS(m, "dlk.yaml:2:22: data.netrc_secret: 'Data_Auth' must be lowercase letters");
	m = load_msg("name: demo\ndata: {train: {images: \"file://rel/a\", labels: /b}}\nmodel: {input: [4], layers: [relu]}\n");
	CHECK_STR(m, "dlk.yaml:2:24: data.train.images: 'file://rel/a' a file URL needs an absolute path (file:///path/to/file)");
	m = load_msg(MINIMAL "data_typo: 1\n");
	CHECK_STR(m, "dlk.yaml:10:1: data_typo: unknown key 'data_typo' (keys here are: name, image, namespace, labels, data, model, training, resources, storage, schedule, trigger, serving, logging, program)");

	/* ranges */
	m = load_msg(MINIMAL "training: {optimizer: {lr: 0}}\n");
	CHECK_STR(m, "dlk.yaml:10:28: training.optimizer.lr: expected a number > 0, got the integer 0");
	m = load_msg(MINIMAL "    - dropout: {rate: 1}\n");
	CHECK_STR(m, "dlk.yaml:10:23: model.layers[1].dropout.rate: expected a number in [0, 1), got the integer 1");
	m = load_msg(MINIMAL "training: {optimizer: {beta2: 1.0}}\n");
	CHECK_STR(m, "dlk.yaml:10:31: training.optimizer.beta2: expected a number in [0, 1), got the number 1.0");
	m = load_msg(MINIMAL "training: {optimizer: {eps: 0}}\n");
	CHECK_STR(m, "dlk.yaml:10:29: training.optimizer.eps: expected a number in (0, 1], got the integer 0");
	m = load_msg(MINIMAL "training: {lr_schedule: {gamma: -0.5}}\n");
	CHECK_STR(m, "dlk.yaml:10:33: training.lr_schedule.gamma: expected a number > 0, got the number -0.5");
	m = load_msg(MINIMAL "serving: {port: 70000, min_accuracy: 1.5}\n");
	CHECK_CONTAINS(m, "dlk.yaml:10:17: serving.port: expected an integer from 1 to 65535, got the integer 70000");
	CHECK_CONTAINS(m, "dlk.yaml:10:38: serving.min_accuracy: expected a number in [0, 1], got the number 1.5");
	m = load_msg(MINIMAL "resources: {master_port: 0}\n");
	CHECK_STR(m, "dlk.yaml:10:26: resources.master_port: expected a positive integer, got the integer 0");
	m = load_msg(MINIMAL "data_: 1\n");
	CHECK_STR(m, "dlk.yaml:10:1: data_: unknown key 'data_' (did you mean 'data'?)");
	m = load_msg(MINIMAL "training: {optimizer: {lr: .nan}}\n");
	CHECK_STR(m, "dlk.yaml:10:28: training.optimizer.lr: expected a number > 0, got the number .nan");
	m = load_msg(MINIMAL "data_x: 1\n  ");
	CHECK_CONTAINS(m, "dlk.yaml:10:1: data_x: unknown key 'data_x'");

	/* model shape sanity */
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}}\n"
	             "model:\n  input: [784]\n  layers:\n    - conv2d: {filters: 8}\n");
	CHECK_STR(m, "dlk.yaml:6:7: model.layers[0]: conv2d needs a 3-D input [C, H, W], but its input is flat");
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}}\n"
	             "model:\n  input: [1, 28, 28]\n  layers:\n    - flatten\n    - maxpool\n");
	CHECK_STR(m, "dlk.yaml:7:7: model.layers[1]: maxpool needs a 3-D input [C, H, W], but its input is flat");
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}}\n"
	             "model:\n  input: [1, 4, 4]\n  layers:\n    - conv2d: {filters: 8, kernel: 5}\n");
	CHECK_STR(m, "dlk.yaml:6:7: model.layers[0]: conv2d window 5 does not fit its 4x4 input (padding 0)");
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}}\n"
	             "model:\n  input: [1, 28, 0]\n  layers: [relu]\n");
	CHECK_STR(m, "dlk.yaml:4:18: model.input[2]: expected a positive integer, got the integer 0");
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}}\n"
	             "model:\n  input: [28, 28]\n  layers: [relu]\n");
	CHECK_STR(m, "dlk.yaml:4:10: model.input: expected [C, H, W] or [features], got 2 numbers");
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}, classes: [a, b, c]}\n"
	             "model:\n  input: [4]\n  layers: [{dense: {units: 2}}]\n");
	CHECK_STR(m, "dlk.yaml:5:12: model.layers[0]: the last dense layer has 2 units but data.classes names 3 classes");
	m = load_msg("name: demo\ndata: {train: {images: /a, labels: /b}}\nmodel: {input: [4], layers: []}\n");
	CHECK_STR(m, "dlk.yaml:3:29: model.layers: the model needs at least one layer");

	/* cross-field rules */
	m = load_msg(MINIMAL "storage: {claim: ckpt, size: 10Gi}\n");
	CHECK_STR(m, "dlk.yaml:10:30: storage.size: set either claim (an existing volume) or size (a new one), not both");
	m = load_msg(MINIMAL "resources: {tolerations: [{key: a, operator: Exists, value: b}]}\n");
	CHECK_STR(m, "dlk.yaml:10:27: resources.tolerations[0]: operator Exists takes no value");
	m = load_msg(MINIMAL "resources: {tolerations: [{operator: Equl}]}\n");
	CHECK_CONTAINS(m, "dlk.yaml:10:38: resources.tolerations[0].operator: unknown value 'Equl' (expected Exists or Equal) (did you mean 'Equal'?)");

	/* YAML syntax errors carry libyaml's own position and words */
	m = load_msg("name: demo\ndata: {train: [\nmodel:\n  input: [784\n");
	CHECK_STR(m, "dlk.yaml:4:8: invalid YAML: did not find expected ',' or ']' (while parsing a flow sequence at line 2, column 15)");
	m = load_msg("name: demo\n  bad: indent\n");
	CHECK_STR(m, "dlk.yaml:2:6: invalid YAML: mapping values are not allowed in this context");
	/* a tab where libyaml wants indentation: the tab named, and the fix */
	m = load_msg("name: demo\ndata:\n\ttrain: {images: /a, labels: /b}\n");
	CHECK_STR(m, "dlk.yaml:3:1: invalid YAML: tab characters are not allowed for indentation (indent with spaces)");
	m = load_msg("name: demo\nmodel:\n  layers:\n  \t- relu\n");
	CHECK_STR(m, "dlk.yaml:4:3: invalid YAML: tab characters are not allowed for indentation (indent with spaces)");
	m = load_msg("name: demo\n---\nname: two\n");
	CHECK_STR(m, "dlk.yaml:2:1: the file holds more than one YAML document; dlk.yaml must hold one");
	m = load_msg("name: \"tab\there\" \t\n? [a, b]\n: c\n");
	CHECK_STR(m, "dlk.yaml:2:3: a mapping key must be a scalar");

	/* every problem is reported, one per line */
	m = load_msg("name: Bad_Name\n"
	             "data: {train: {images: /a}}\n"
	             "model: {input: [4], layers: [dens]}\n"
	             "training: {epoch: 1, batch_size: 0}\n");
	CHECK_STR(m, "dlk.yaml:1:7: name: 'Bad_Name' must consist of lowercase letters, digits and '-' (a DNS-1123 label)\n"
	             "dlk.yaml:3:30: model.layers[0]: unknown layer 'dens' (did you mean 'dense'?)\n"
	             "dlk.yaml:4:12: training.epoch: unknown key 'epoch' (did you mean 'epochs'?)\n"
	             "dlk.yaml:4:34: training.batch_size: expected a positive integer, got the integer 0\n"
	             "dlk.yaml:2:15: data.train.labels: missing required key 'labels' (format idx needs images and labels)");
	CHECK(count_lines(m) == 5);
	CHECK_CONTAINS(spec_test_err.hint, "fix the 5 problems");

	/* the file name is the one given */
	{
		struct dlk_err e = DLK_ERR_INIT;
		const char *y = "name: x\n";
		CHECK(!project_load_mem(y, strlen(y), "proj/dlk.yaml", NULL, 0, &e));
		CHECK_CONTAINS(e.msg, "proj/dlk.yaml:1:1: data: missing required key 'data'");
		CHECK(!project_load("tests/does-not-exist.yaml", NULL, 0, &e));
		CHECK_CONTAINS(e.msg, "cannot open 'tests/does-not-exist.yaml'");
		CHECK(e.code == DLK_EXIT_CONFIG);
	}
	return CHECK_DONE();
}
