"""A 2-process jax.distributed program run by dlk: each process sums its share of the
Fashion-MNIST training labels, and one all-reduce (a jitted sum over an array sharded across
the processes) gives every process the total, which it checks against the whole file.

dlk gives each process JAX_COORDINATOR_ADDRESS (read by jax.distributed.initialize) and
DLK_WORLD_SIZE, DLK_RANK (passed as num_processes and process_id), and the data in DLK_DATA_DIR.
"""
import gzip
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P


def report(**fields):
    print("DLK-PROGRESS " + json.dumps(fields), flush=True)


def labels(data_dir):
    with gzip.open(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"), "rb") as f:
        data = f.read()
    return np.frombuffer(data, dtype=np.uint8, offset=8).astype(np.int64)


def main():
    world, rank = int(os.environ["DLK_WORLD_SIZE"]), int(os.environ["DLK_RANK"])
    jax.distributed.initialize(num_processes=world, process_id=rank)
    y = labels(os.environ.get("DLK_DATA_DIR", "/usr/share/datasets/fashion-mnist"))
    mine = np.array([y[rank::world].sum()], dtype=np.float32)

    # one value per process, laid out over a mesh of every process's device: the sum is an
    # all-reduce across the processes
    mesh = Mesh(np.array(jax.devices()), ("p",))
    sharding = NamedSharding(mesh, P("p"))
    local = [jax.device_put(mine, d) for d in jax.local_devices()]
    arr = jax.make_array_from_single_device_arrays((len(jax.devices()),), sharding, local)
    total = jax.jit(jnp.sum, out_shardings=NamedSharding(mesh, P()))(arr)
    total = float(np.asarray(total.addressable_data(0)))
    print("rank %d of %d: local sum %d, all-reduced sum %d, expected %d" % (rank, world, mine[0], total, y.sum()),
          flush=True)
    if rank == 0:
        report(event="done", metrics={"label_sum": total})
    if total != float(y.sum()):
        raise SystemExit("all-reduced sum %d is not the file's %d" % (total, y.sum()))
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
