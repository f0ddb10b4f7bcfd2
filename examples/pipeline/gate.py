"""The gate stage: the accuracy of the predictions ($DLK_INPUT_PREDS/predictions.csv, whose rows
are index,label,class,...), written to $DLK_OUTPUT/report.json; fails when it is below
$DLK_PARAM_MIN_ACCURACY, which stops the stages after it."""
import csv
import json
import os
import sys

rows = list(csv.reader(open(os.path.join(os.environ["DLK_INPUT_PREDS"], "predictions.csv"))))[1:]
correct = sum(1 for r in rows if r[1] == r[2])
acc = correct / len(rows) if rows else 0.0
need = float(os.environ.get("DLK_PARAM_MIN_ACCURACY", "0"))
with open(os.path.join(os.environ["DLK_OUTPUT"], "report.json"), "w") as f:
    json.dump({"samples": len(rows), "correct": correct, "accuracy": round(acc, 4), "min_accuracy": need}, f)
print(f"gate: accuracy {acc:.4f} on {len(rows)} samples (at least {need} asked)")
if acc < need:
    sys.exit(f"gate: accuracy {acc:.4f} is below {need}")
