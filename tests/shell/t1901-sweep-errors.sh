#!/bin/sh
# dlk sweep refuses what it cannot run, before any trial starts, naming the file, line and key:
# a wrong sweep: section, a key the project does not have, a value the project refuses, and
# options that do not go with a sweep. A project with a sweep: section still trains as it is.
. "$(dirname "$0")/../lib.sh"

project() {
	blobs_project . &&
	cat >>dlk.yaml
}

test_expect_success 'a project with a sweep: section trains as it is; the section is the sweep'"'"'s' '
	project <<-EOF &&
	sweep:
	  parameters:
	    training.epochs: [1, 2]
	EOF
	dlk train --local -q -o json >out.json && jq -e ".testAccuracy" out.json >/dev/null &&
	dlk train --dry-run -o json >objs.json && ! grep -q "parameters" objs.json
'

test_expect_success 'a wrong method: file, line, column, the key and the choices' '
	project <<-EOF &&
	sweep:
	  method: bayes
	  parameters:
	    training.epochs: [1, 2]
	EOF
	test_exit_code 3 dlk sweep --local 2>err && cat err &&
	grep -q "^error: dlk.yaml:$(grep -n "method: bayes" dlk.yaml | cut -d: -f1):11: sweep.method: is .bayes.; one of random, grid, tpe" err &&
	! test -d .dlk/runs
'

test_expect_success 'a key the project does not have is refused before any trial, with its line' '
	project <<-EOF &&
	sweep:
	  parameters:
	    training.epoch: [1, 2]
	EOF
	line=$(grep -n "training.epoch:" dlk.yaml | cut -d: -f1) &&
	test_exit_code 3 dlk sweep --local 2>err && cat err &&
	grep -q "dlk.yaml:$line:5: sweep.parameters.training.epoch" err && grep -q "epochs" err &&
	! test -d .dlk/runs
'

test_expect_success 'a value the project refuses is refused before any trial' '
	project <<-EOF &&
	sweep:
	  parameters:
	    training.batch_size: {int: [0, 8]}
	EOF
	test_exit_code 3 dlk sweep --local 2>err && cat err &&
	grep -q "sweep.parameters.training.batch_size" err && grep -q "batch_size" err && ! test -d .dlk/runs
'

test_expect_success 'no sweep: section, no cluster without --local, --set: each refused with what to do' '
	blobs_project . &&
	test_exit_code 3 dlk sweep --local 2>err && grep -q "has no sweep: section" err &&
	grep -q "init --example sweep" err &&
	project <<-EOF &&
	sweep:
	  parameters:
	    training.epochs: [1, 2]
	EOF
	test_exit_code 3 dlk sweep 2>err && grep -q "no kubeconfig" err && grep -q "run the sweep on this machine: .dlk sweep --local." err &&
	test_exit_code 2 dlk sweep --local --set training.epochs=3 2>err && grep -q "set does not go with dlk sweep" err
'

test_expect_success 'a grid sweep runs each point once; and dlk status lists them' '
	project <<-EOF &&
	sweep:
	  name: g
	  method: grid
	  trials: 10
	  parameters:
	    training.epochs: [1, 2]
	    training.seed: [1, 2]
	EOF
	dlk sweep --local -q -o json >s.json && jq -e ".trials | length == 4" s.json &&
	jq -e "[.trials[] | \"\(.params[\"training.epochs\"]) \(.params[\"training.seed\"])\"] | sort == [\"1 1\", \"1 2\", \"2 1\", \"2 2\"]" s.json &&
	jq -e "[.trials[] | .outcome == \"succeeded\"] | all" s.json &&
	dlk status g -o json | jq -e ".best.trial" >/dev/null &&
	test "$(dlk status g | grep -c "^[0-3] ")" = 4
'

test_expect_success 'ASHA at steps: rungs on the training loss of the steps' '
	project <<-EOF &&
	sweep:
	  name: st
	  metric: loss
	  trials: 6
	  parameters:
	    training.optimizer.lr: {loguniform: [0.00001, 0.3]}
	  early_stopping: {method: asha, at: steps, min: 8, reduction_factor: 2}
	EOF
	DLK_TEST_CHECKPOINT_DELAY_MS=40 dlk sweep --local -q -o json >s.json &&
	jq -e ".goal == \"minimize\" and (.trials | length) == 6" s.json &&
	jq -e "[.trials[] | select(.outcome == \"stopped\")] | length >= 1" s.json &&
	jq -e "[.trials[] | select(.outcome == \"stopped\") | .stopped_at | IN(8, 16, 32, 64)] | all" s.json &&
	jq -e "[.trials[] | .curve | length > 1] | all" s.json &&
	jq -e "[.trials[] | select(.outcome == \"succeeded\") | .curve | last | .[0]] | all(. == 128)" s.json
'

test_expect_success 'a GPU-hours budget: no new trial once spent, counted again after a restart' '
	project <<-EOF &&
	resources: {gpus: 1}
	sweep:
	  name: b
	  trials: 5
	  gpu_hours: 0.000001
	  parameters:
	    training.seed: {int: [1, 100]}
	EOF
	DLK_DEVICE=cpu dlk sweep --local -q 2>err && cat err &&
	grep -q "^warning: the budget of 1e-06 GPU-hours is spent: no new trials" err &&
	test "$(cat .dlk/runs/b-*/*.json | jq -s length)" = 1 &&
	DLK_DEVICE=cpu dlk sweep --local -q 2>err && grep -q "budget of 1e-06 GPU-hours is spent" err &&
	test "$(cat .dlk/runs/b-*/*.json | jq -s length)" = 1
'

test_done
