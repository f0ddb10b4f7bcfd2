#!/bin/sh
# make demo: a fresh project trained on Fashion-MNIST on this machine.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
dir=${DLK_DEMO_DIR:-$top/build/demo}
rm -rf "$dir"
"$top/dlk" init --example "${DLK_DEMO_EXAMPLE:-mlp}" "$dir"
cd "$dir"
"$top/dlk" train --local
