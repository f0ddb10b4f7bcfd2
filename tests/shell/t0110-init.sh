#!/bin/sh
. "$(dirname "$0")/../lib.sh"

test_expect_success 'init writes a project named after its directory' '
	dlk init my_Proj >out &&
	grep -q "^name: my-proj " my_Proj/dlk.yaml && grep -q "wrote my_Proj/dlk.yaml" out
'

test_expect_success 'init never overwrites without --force' '
	dlk init p >/dev/null && echo "# mine" >>p/dlk.yaml &&
	test_exit_code 1 dlk init p 2>err && grep -q "already exists" err && grep -q -- --force err &&
	grep -q "# mine" p/dlk.yaml &&
	dlk init --force p >/dev/null && ! grep -q "# mine" p/dlk.yaml
'

test_expect_success 'init --name and --example' '
	dlk init --name vision-cnn --example cnn q >/dev/null &&
	grep -q "^name: vision-cnn" q/dlk.yaml && grep -q conv2d q/dlk.yaml
'

test_expect_success 'init rejects a name Kubernetes would reject' '
	test_exit_code 2 dlk init --name Bad_Name r 2>err && grep -q "invalid name" err && test ! -e r/dlk.yaml
'

test_expect_success 'init -q prints nothing' '
	dlk init -q s >out && test ! -s out && test -f s/dlk.yaml
'

test_expect_success 'init writes what a cluster needs, commented, and says where the data comes from' '
	for ex in mlp cnn resnet; do
		dlk init -q --example $ex $ex && cd $ex &&
		grep -q "^# image: " dlk.yaml && grep -q "^# storage:" dlk.yaml &&
		grep -q "dataset-fashion-mnist" dlk.yaml &&
		test_must_fail dlk train --kubeconfig "$TEST_TMP/none" 2>err &&
		test "$(grep -c "^warning: " err)" = 3 &&
		sed "s/^# image: /image: /; s/^# storage:/storage:/; s/^#   size:/  size:/" dlk.yaml >c.yaml &&
		test_must_fail dlk -f c.yaml train --kubeconfig "$TEST_TMP/none" 2>err &&
		grep -q "^warning: data.train.images" err && test "$(grep -c "^warning: " err)" = 1 &&
		dlk -f c.yaml train --dry-run >o.yaml && grep -q "image: registry.example.com/team/dlk:" o.yaml &&
		grep -q "kind: PersistentVolumeClaim" o.yaml && cd .. || exit 1
	done
'

test_done
