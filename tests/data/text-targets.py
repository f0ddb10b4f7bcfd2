# Writes N synthetic text rows with float targets, for tasks multilabel and regression of format
# text: MULTI (JSON Lines) labels each row with the list of "starts_x" (its first letter is x) and
# "long" (more than 22 characters) that hold, possibly none; REGRESSION (CSV) gives each row two
# numbers separated by '|', the byte values of its first two letters. Both are learnable from the
# byte ids by a dense layer, which is what a test of the data path needs.
# Usage: python3 text-targets.py N SEED MULTI.jsonl REGRESSION.csv
import json, random, sys

n, rng = int(sys.argv[1]), random.Random(int(sys.argv[2]))
with open(sys.argv[3], "w") as ml, open(sys.argv[4], "w") as rg:
    rg.write("text,label\n")
    for i in range(n):
        first = rng.choice("ax")
        length = rng.randint(4, 40)
        text = first + "".join(rng.choice("bcdefghijklmnop") for _ in range(length - 1))
        labels = (["starts_x"] if first == "x" else []) + (["long"] if length > 22 else [])
        ml.write(json.dumps({"text": text, "label": labels}) + "\n")
        rg.write('"%s",%d|%d\n' % (text, ord(text[0]), ord(text[1])))
