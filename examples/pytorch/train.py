"""Fashion-MNIST with PyTorch DistributedDataParallel (gloo), run by dlk.

dlk starts one process per rank with torchrun's variables (MASTER_ADDR, MASTER_PORT, RANK,
WORLD_SIZE, LOCAL_RANK, ...), so init_process_group("gloo") finds the gang; `torchrun
--nproc-per-node 2 train.py` by hand gives it the same. It reads the IDX files in DLK_DATA_DIR,
saves a checkpoint per epoch in DLK_CHECKPOINT_DIR and resumes from it after a restart, and
reports to dlk with DLK-PROGRESS lines (docs/program.md).
"""
import argparse
import gzip
import json
import os
import struct
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def report(**fields):
    """One progress line for dlk: the prefix and a JSON object."""
    print("DLK-PROGRESS " + json.dumps(fields), flush=True)


def read_idx(path):
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        data = f.read()
    _, _, dims = struct.unpack(">HBB", data[:4])
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return torch.frombuffer(bytearray(data[4 + 4 * dims:]), dtype=torch.uint8).reshape(shape)


def load(data_dir, split, limit):
    prefix = "train" if split == "train" else "t10k"
    x = read_idx(os.path.join(data_dir, prefix + "-images-idx3-ubyte.gz"))[:limit]
    y = read_idx(os.path.join(data_dir, prefix + "-labels-idx1-ubyte.gz"))[:limit]
    return x.reshape(len(x), -1).float() / 255.0, y.long()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64, help="per process")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--train-samples", type=int, default=60000)
    ap.add_argument("--test-samples", type=int, default=10000)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    data_dir = os.environ.get("DLK_DATA_DIR", "/usr/share/datasets/fashion-mnist")
    ckpt_dir = os.environ.get("DLK_CHECKPOINT_DIR")
    ckpt = os.path.join(ckpt_dir, "checkpoint.pt") if ckpt_dir else None

    x, y = load(data_dir, "train", args.train_samples)
    tx, ty = load(data_dir, "test", args.test_samples)
    torch.manual_seed(42)
    model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    first, train_loss = 0, float("nan")
    if ckpt and os.path.exists(ckpt):
        state = torch.load(ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        first = state["epoch"]
        train_loss = state.get("loss", float("nan"))
        if rank == 0:
            print("resumed from epoch %d" % first, flush=True)

    # each rank trains on its own slice of every epoch's permutation (what DistributedSampler does)
    steps = len(x) // (args.batch_size * world)
    loss_sum = torch.zeros(2)
    for epoch in range(first, args.epochs):
        perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(epoch))
        mine = perm[rank::world]
        loss_sum.zero_()
        t0 = time.time()
        for step in range(steps):
            idx = mine[step * args.batch_size:(step + 1) * args.batch_size]
            loss = F.cross_entropy(ddp(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_sum += torch.tensor([loss.item(), 1.0])
            if rank == 0 and (step + 1) % 50 == 0:
                report(step=epoch * steps + step + 1, steps=args.epochs * steps, epoch=epoch + 1, epochs=args.epochs,
                       loss=loss.item(), samples_per_s=(step + 1) * args.batch_size * world / (time.time() - t0))
        dist.all_reduce(loss_sum)
        train_loss = (loss_sum[0] / loss_sum[1]).item()
        if rank == 0:
            report(event="epoch", epoch=epoch + 1, epochs=args.epochs, loss=train_loss)
            if ckpt:
                torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": epoch + 1,
                            "loss": train_loss}, ckpt + ".tmp")
                os.replace(ckpt + ".tmp", ckpt)
        dist.barrier()

    # evaluation on the test set, split over the ranks and summed
    model.eval()
    conf = torch.zeros(10, 10, dtype=torch.long)
    tloss = torch.zeros(1)
    with torch.no_grad():
        out = model(tx[rank::world])
        tloss += F.cross_entropy(out, ty[rank::world], reduction="sum")
        for t, p in zip(ty[rank::world].tolist(), out.argmax(1).tolist()):
            conf[t, p] += 1
    dist.all_reduce(conf)
    dist.all_reduce(tloss)
    if rank == 0:
        out_dir = os.environ.get("DLK_OUTPUT_DIR", ".")
        path = os.path.join(out_dir, "model.pt")
        torch.save(model.state_dict(), path)
        report(event="done", loss=train_loss, model=path,
               metrics={"test_loss": tloss.item() / conf.sum().item()}, confusion=conf.tolist())
        print("final loss %.6f" % train_loss, flush=True)
    # every rank leaves together: a rank that exits while rank 0 still writes its model closes
    # the group's connections under it
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
