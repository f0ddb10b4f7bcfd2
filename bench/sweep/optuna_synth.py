"""Optuna's TPE and random search on the objective bench/sweep/dlk_sweep_synth.c gives dlk's
samplers (optimum 0 at lr = 0.01, n = 40, m = 0.9): the best value found in BUDGET trials, mean
over SEEDS seeds, and the wall time per search.
Usage: optuna_synth.py BUDGET SEEDS"""
import math
import sys
import time

import optuna

optuna.logging.set_verbosity(optuna.logging.WARNING)
budget = int(sys.argv[1]) if len(sys.argv) > 1 else 40
seeds = int(sys.argv[2]) if len(sys.argv) > 2 else 10


def objective(trial):
    lr = trial.suggest_float("lr", 1e-5, 1.0, log=True)
    n = trial.suggest_int("n", 1, 100)
    m = trial.suggest_float("m", 0.0, 1.0)
    a, b, c = math.log10(lr) + 2, (n - 40) / 30, (m - 0.9) * 5
    return -(a * a) - b * b - c * c


for name, make in (("random", lambda s: optuna.samplers.RandomSampler(seed=s)),
                   ("tpe", lambda s: optuna.samplers.TPESampler(seed=s))):
    total, t0 = 0.0, time.monotonic()
    for s in range(seeds):
        study = optuna.create_study(direction="maximize", sampler=make(s))
        study.optimize(objective, n_trials=budget)
        total += study.best_value / seeds
    print("optuna %-6s budget %d: best %.4f (mean of %d seeds), %.2f ms per search"
          % (name, budget, total, seeds, (time.monotonic() - t0) * 1e3 / seeds))
