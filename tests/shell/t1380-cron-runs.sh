#!/bin/sh
# A scheduled training (`schedule:` renders a CronJob): its runs are Jobs of other names that
# carry an ownerReference to it. `dlk status NAME`, `dlk logs NAME` and the list follow them;
# `dlk train --wait` says that it has nothing to wait for. The runs are made here the way the
# CronJob controller and `kubectl create job --from=cronjob/NAME` make them: the job template,
# with the CronJob as their owner.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/apiserver/lib.sh"

# dlk-cli.json's scripts, under the runs' names: nightly-1 trains and ends like "ok", nightly-2
# keeps running like "forever", nightly-3 prints two lines and ends
jq '.jobs["nightly-1"] = .jobs.ok | .jobs["nightly-2"] = .jobs.forever | .jobs["stray"] = .jobs.forever |
    .jobs["nightly-3"] = {"timeline": [{"at": 0, "phase": "Running", "log": "run 3 starting"},
      {"at": 300, "log": "run 3 done"}, {"at": 500, "phase": "Succeeded", "exitCode": 0}]}' \
	"$TEST_ROOT/tests/apiserver/scenarios/dlk-cli.json" >"$TEST_TMP/cron.json"
apiserver_project "$TEST_TMP/cron.json"
CJ=/apis/batch/v1/namespaces/default/cronjobs
JOBS=/apis/batch/v1/namespaces/default/jobs

# run NAME [UID]: a Job from the CronJob nightly's template, owned by it (or by a CronJob of that uid)
run() {
	api $CJ/nightly >cj.json &&
	jq --arg n "$1" --arg uid "${2:-}" '{apiVersion: "batch/v1", kind: "Job",
	    metadata: {name: $n, labels: .spec.jobTemplate.metadata.labels,
	      ownerReferences: [{apiVersion: "batch/v1", kind: "CronJob", name: .metadata.name,
	        uid: (if $uid == "" then .metadata.uid else $uid end), controller: true}]},
	    spec: .spec.jobTemplate.spec}' cj.json |
	api $JOBS -o /dev/null -f -H "Content-Type: application/json" --data-binary @-
}
row() { awk -v n="$1" '$1 == n' out | tr -s " "; }
# until_ok CMD...: until CMD succeeds (the test API server plays the pods' timelines on timers,
# later on a loaded machine), 10 s at most
until_ok() {
	_i=0
	until "$@" >/dev/null 2>&1; do
		_i=$((_i + 1)); [ $_i -lt 100 ] || { echo "still not true after 10 s: $*" >&2; return 1; }
		sleep 0.1
	done
}
# succeeded JOB N: N of the Job's pods have succeeded
succeeded() { [ "$(api $JOBS/$1 | jq -r ".status.succeeded // 0")" -ge "$2" ]; }
# status_row NAME TEXT: dlk status lists NAME in a row starting with TEXT (blanks squeezed)
status_row() { dlk status | awk -v n="$1" '$1 == n' | tr -s " " | grep -q "^$2"; }

test_expect_success 'train --wait of a scheduled project submits, says it does not wait, and succeeds' '
	dlk -f "$PROJ" train --set name=nightly --set resources.workers=2 --set "schedule=0 3 * * *" --wait >out 2>err &&
	cat out err &&
	grep -q "^job .nightly. submitted" out &&
	grep -q "is scheduled (CronJob, schedule .0 3 \* \* \*.): no run starts now, so --wait has nothing to wait for" err &&
	grep -q "dlk logs -f nightly" err &&
	api $CJ/nightly | jq -e ".spec.schedule == \"0 3 * * *\"" >/dev/null &&
	test_must_fail dlk -f "$PROJ" train --set name=nightly --set resources.workers=2 --set "schedule=0 3 * * *" --wait --report r.html 2>err && cat err &&
	grep -q "has no run to report on yet" err
'

test_expect_success 'before its first run: Scheduled in the list, no runs in detail, logs say so' '
	dlk status >out && cat out &&
	row nightly | grep -q "^nightly Scheduled 0/2 0 - " &&
	dlk status nightly >out && cat out &&
	grep -q "^scheduled: nightly (namespace default), a CronJob$" out &&
	grep -q "^schedule: *0 3 \* \* \*$" out &&
	grep -q "^suspended: *no$" out &&
	grep -q "^last run: *never on schedule$" out &&
	grep -q "^runs: *none yet" out &&
	dlk status -o json >j && jq -e ".jobs[0].name == \"nightly\" and .jobs[0].state == \"Scheduled\" and .jobs[0].run == null" j &&
	test_exit_code 6 dlk logs nightly 2>err &&
	grep -q "scheduled training .nightly. has not started a run yet (schedule .0 3 \* \* \*.)" err
'

test_expect_success 'a finished and a running run: status shows the CronJob once, its newest run in detail' '
	run nightly-1 && until_ok succeeded nightly-1 2 &&
	run nightly-2 &&
	run stray 00000000-0000-0000-0000-000000000000 &&
	api $CJ/nightly -X PATCH -H "Content-Type: application/merge-patch+json" -o /dev/null -f \
		--data-binary "{\"status\": {\"lastScheduleTime\": \"2026-01-01T03:00:00Z\", \"lastSuccessfulTime\": \"2026-01-01T03:09:00Z\",
		  \"active\": [{\"kind\": \"Job\", \"name\": \"nightly-2\"}]}}" &&
	until_ok status_row nightly "nightly Running 2/2 " && until_ok status_row stray "stray Running" &&
	dlk status >out && cat out &&
	row nightly | grep -q "^nightly Running 2/2 0 - " &&
	test -z "$(row nightly-1)$(row nightly-2)" &&
	row stray | grep -q "^stray Running" &&
	printf "%s" "{\"apiVersion\": \"batch/v1\", \"kind\": \"Job\",
	  \"metadata\": {\"name\": \"nightly-0\", \"labels\": {\"dlk.dev/job\": \"nightly-0\"}},
	  \"spec\": {\"suspend\": true, \"template\": {\"spec\": {\"restartPolicy\": \"Never\",
	    \"containers\": [{\"name\": \"worker\", \"image\": \"dlk\"}]}}}}" |
	api $JOBS -o /dev/null -f -H "Content-Type: application/json" --data-binary @- &&
	dlk status >out && test "$(sed 1d out | cut -d" " -f1 | tr "\n" " ")" = "nightly nightly-0 stray " &&
	{ timeout 3 "$DLK" status -w >w; test $? = 124; } && cat w &&
	head -n 1 w | grep -q "^NAME" &&
	test "$(grep -c "^nightly *Running *2/2" w)" -ge 1 && ! grep -q "^nightly-[123] " w && grep -q "^stray *Running" w &&
	dlk status nightly >out && cat out &&
	grep -q "^last run: *2026-01-01T03:00:00Z$" out &&
	grep -q "^succeeded: *2026-01-01T03:09:00Z$" out &&
	grep -q "^active: *1 run$" out &&
	grep -q "^RUN *STATE *WORKERS *GPUS *PROGRESS *AGE$" out &&
	test "$(grep -n "^nightly-2 *Running *2/2" out | cut -d: -f1)" -lt "$(grep -n "^nightly-1 *Succeeded *0/2 *0 *epoch 2/2 step 940/940" out | cut -d: -f1)" &&
	! grep -q "^stray" out &&
	grep -q "^latest run:$" out &&
	grep -q "^job: *nightly-2 (namespace default)$" out &&
	grep -q "^state: *Running$" out &&
	grep -q "^1 *nightly-2-1-[0-9a-f]* *- *Running" out
'

test_expect_success 'status NAME -o json: the CronJob and its runs, newest first' '
	dlk status nightly -o json >j && head -14 j &&
	jq -e ".cronJob.name == \"nightly\" and .cronJob.schedule == \"0 3 * * *\" and .cronJob.suspended == false and
	       .cronJob.active == 1 and .cronJob.lastScheduleTime == \"2026-01-01T03:00:00Z\" and
	       (.runs | map(.name)) == [\"nightly-2\", \"nightly-1\"] and .runs[0].state == \"Running\" and
	       .runs[1].state == \"Succeeded\" and .runs[1].progress.step == 940" j &&
	dlk status -o json >j &&
	jq -e "[.jobs[] | select(.name == \"nightly\")] | length == 1 and .[0].run == \"nightly-2\" and .[0].cronJob.schedule == \"0 3 * * *\"" j &&
	dlk status -o yaml >y && grep -q "^ *run: nightly-2$" y
'

test_expect_success 'status -w NAME of a scheduled project says what to use instead' '
	test_exit_code 2 dlk status -w nightly 2>err && cat err &&
	grep -q "is a scheduled training (a CronJob): -w follows one Job" err
'

test_expect_success 'logs NAME: the run that has not ended' '
	dlk logs nightly >out 2>err && cat out err &&
	grep -q "run .nightly-2. of scheduled training .nightly. (the newest that has not ended)" err &&
	grep -q "^\[rank 0\] still training$" out && grep -q "^\[rank 1\] still training$" out &&
	dlk logs --rank 1 nightly >out 2>/dev/null && test "$(cat out)" = "[rank 1] still training" &&
	test_exit_code 2 dlk logs --rank 2 nightly 2>err && grep -q "job .nightly-2. has ranks 0 to 1, not 2" err
'

test_expect_success 'logs NAME: the latest run when none is going, also with -f (which does not wait for the next)' '
	api $JOBS/nightly-2 -X DELETE -o /dev/null -f && sleep 0.5 &&
	dlk logs nightly >out 2>err && cat out err &&
	grep -q "run .nightly-1. of scheduled training .nightly. (the latest; it has ended)" err &&
	cat >want <<-\EOT &&
	[rank 1] rank1 starting
	[rank 0] rank0 step 1 loss 2.30
	[rank 1] rank1 step 1 loss 2.31
	[rank 0] rank0 done
	EOT
	diff -u want out &&
	timeout 20 "$DLK" logs -f nightly >out 2>err && cat err &&
	grep -q "it has ended, and -f does not wait for the next" err &&
	grep -q "^\[rank 0\] rank0 done$" out
'

test_expect_success 'logs -f NAME follows a running run to its end' '
	run nightly-3 &&
	timeout 20 "$DLK" logs -f nightly >out 2>err && cat out err &&
	grep -q "run .nightly-3. of scheduled training .nightly. (the newest that has not ended)" err &&
	grep -q "^\[rank 0\] run 3 done$" out && grep -q "^\[rank 1\] run 3 starting$" out &&
	dlk status nightly -o json >j && jq -e "(.runs | map(.name)) == [\"nightly-3\", \"nightly-1\"] and .runs[0].state == \"Succeeded\"" j
'

test_expect_success 'completion offers the scheduled project as well as its runs' '
	dlk __complete logs nig >out && cat out && grep -qx nightly out && grep -qx nightly-3 out
'

test_expect_success 'delete removes the CronJob and its runs' '
	dlk delete nightly >/dev/null &&
	test_must_fail dlk status nightly 2>err &&
	api "$JOBS?labelSelector=dlk.dev/job%3Dnightly" | jq -e "[.items[] | select(.metadata.name != \"stray\")] | length == 0"
'

test_done
