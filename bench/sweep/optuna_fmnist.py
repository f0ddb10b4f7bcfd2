"""Optuna's TPE over the sweep example's space (learning rate, width), each trial a
`dlk train --local` run of the project (the same runs `dlk sweep --local` makes, without early
stopping), TRIALS trials with N_JOBS at once: the best test accuracy and the wall time.
Usage: optuna_fmnist.py DLK PROJECT TRIALS N_JOBS"""
import json
import os
import subprocess
import sys
import time

import optuna

optuna.logging.set_verbosity(optuna.logging.WARNING)
dlk, project, trials, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
env = dict(os.environ, DLK_THREADS=str(max(1, (os.cpu_count() or 2) // jobs)))


def objective(trial):
    lr = trial.suggest_float("lr", 0.0003, 0.03, log=True)
    units = trial.suggest_categorical("units", [8, 16, 32, 64])
    out = subprocess.run([dlk, "-f", project, "train", "--local", "-q", "-o", "json", "--fresh",
                          "--set", "name=optuna-%d" % trial.number,
                          "--set", "training.optimizer.lr=%g" % lr,
                          "--set", "model.layers.1.dense.units=%d" % units],
                         check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out)["testAccuracy"]


t0 = time.monotonic()
study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=7))
study.optimize(objective, n_trials=trials, n_jobs=jobs)
print("optuna TPE (no pruning): best accuracy %.4f, %.1f s" % (study.best_value, time.monotonic() - t0))
