#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Peers that each see only part of the data learn what none of them could
alone.

Eight peer processes train a small MLP on scikit-learn's digits data set
(8x8 images, 10 classes). Each peer holds the training images of only two
classes (non-IID, as in federated learning). Every few local SGD steps the
peers average their parameters with moshpit (moshpit.torch.OuterOptimizer);
halfway through, one peer is killed and a new one joins in its place,
starting from the swarm's parameters (Peer.fetch_state).

For comparison, in this process: each peer's model trained alone on its
own two classes, and one model trained on all the data. The script prints
test accuracy per outer step for the three and draws them into a PNG.

    MOSHPIT_LIBRARY=build/libmoshpit.so PYTHONPATH=python \\
        /usr/bin/python3 examples/python/digits.py --png digits.png
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch

HIDDEN = 64


def load_data(seed):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    xtr, xte, ytr, yte = train_test_split(
        x, y, test_size=0.3, random_state=seed, stratify=y
    )
    return xtr, ytr.astype(np.int64), xte, yte.astype(np.int64)


def shard_classes(peer, peers):
    """Two classes per peer: its own and one more, so that all ten classes
    are held by the eight peers."""
    return {peer % 10, (peer + peers) % 10}


def shard(xtr, ytr, slot, peers):
    """Training data of slot `slot`: its classes, split evenly among the
    slots that hold the same class."""
    keep = np.zeros(len(ytr), bool)
    for c in shard_classes(slot, peers):
        holders = [s for s in range(peers) if c in shard_classes(s, peers)]
        idx = np.flatnonzero(ytr == c)
        keep[idx[holders.index(slot) :: len(holders)]] = True
    return xtr[keep], ytr[keep]


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(64, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, 10)
    )


def accuracy(model, x, y):
    with torch.no_grad():
        return float((model(torch.from_numpy(x)).argmax(1).numpy() == y).mean())


class Trainer:
    """One model, its inner optimizer and a stream of minibatches."""

    def __init__(self, x, y, args, seed, batch):
        self.x, self.y = torch.from_numpy(x), torch.from_numpy(y)
        self.model = make_model(args.seed)  # every peer starts alike
        self.opt = torch.optim.SGD(self.model.parameters(), lr=args.lr, momentum=0.9)
        self.rng = np.random.default_rng(seed)
        self.batch = batch

    def step(self):
        idx = torch.from_numpy(self.rng.integers(0, len(self.y), self.batch))
        loss = torch.nn.functional.cross_entropy(self.model(self.x[idx]), self.y[idx])
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()


def worker(args):
    """One peer: trains on its slot's shard and averages with the swarm.
    Writes one JSON line per event on stdout."""
    import moshpit
    import moshpit.torch

    torch.set_num_threads(1)
    xtr, ytr, xte, yte = load_data(args.seed)
    x, y = shard(xtr, ytr, args.slot, args.peers)
    tr = Trainer(x, y, args, seed=1000 + args.slot + 100 * args.start, batch=args.batch)

    def say(**kw):
        sys.stdout.write(json.dumps(kw) + "\n")
        sys.stdout.flush()

    # Loading Python and torch takes a while on a busy machine: the peer
    # opens only when told to, with the endpoint to join through.
    say(event="loaded")
    bootstrap = sys.stdin.readline().split()
    peer = moshpit.Peer(
        swarm="digits",
        bootstrap=bootstrap,
        swarm_secret=bytes.fromhex(args.secret),
        group_size=args.peers,
        matchmaking_ms=args.matchmaking_ms,
        peer_timeout_ms=2000,
        round_timeout_ms=15000,
        serve_state=1,
        log=lambda _, level, msg: print(
            "peer %d: %s" % (args.slot, msg), file=sys.stderr, flush=True),
        log_level=int(os.environ.get("DIGITS_LOG_LEVEL", "0")),
    )
    outer = moshpit.torch.OuterOptimizer(
        tr.model.parameters(), peer, lr=args.outer_lr, momentum=args.outer_momentum,
        every=args.inner,
    )
    say(event="open", endpoint=peer.endpoint)
    if args.start > 0:
        # a peer joining late starts from the swarm's parameters
        peer.wait_members(2, timeout=30.0)
        flat = torch.zeros_like(outer.global_)
        rounds = peer.fetch_state(flat, timeout=30.0)
        outer.load_(flat)
        say(event="fetched", rounds=rounds, accuracy=accuracy(tr.model, xte, yte))
    else:
        peer.wait_members(args.peers, timeout=60.0)
        say(event="ready")
    for step in range(args.start, args.steps):
        for _ in range(args.inner):
            tr.step()
            info = outer.step()
        say(
            event="step",
            step=step + 1,
            accuracy=accuracy(tr.model, xte, yte),
            group=info.group_size,
            failed=info.peers_failed,
        )
    peer.close()


class Proc:
    def __init__(self, args, slot, start=0):
        cmd = [
            sys.executable, os.path.abspath(__file__), "--worker",
            "--slot", str(slot), "--start", str(start), "--secret", args.secret,
        ]
        for k in ("peers", "steps", "inner", "batch", "lr", "outer_lr",
                  "outer_momentum", "seed", "matchmaking_ms"):
            cmd += ["--" + k.replace("_", "-"), str(getattr(args, k))]
        self.slot = slot
        self.p = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )

    def go(self, bootstrap=""):
        self.p.stdin.write(bootstrap + "\n")
        self.p.stdin.flush()

    def next(self):
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("peer of slot %d exited (%s)" % (self.slot, self.p.wait()))
        return json.loads(line)


def run_swarm(args):
    """Accuracy per step, averaged over the live peers, and the events."""
    import selectors

    half = args.steps // 2
    procs = [Proc(args, s) for s in range(args.peers)]
    victim = procs[-1]
    # the peer that joins halfway, in the victim's place with its data
    joiner = Proc(args, victim.slot, start=half)
    for p in procs + [joiner]:
        assert p.next()["event"] == "loaded"
    procs[0].go()
    first = procs[0].next()["endpoint"]
    for p in procs[1:]:
        p.go(first)
        p.next()  # open
    for p in procs:
        assert p.next()["event"] == "ready"
    t0 = time.monotonic()
    acc = {}  # step -> list of accuracies
    groups = {}
    events = []
    sel = selectors.DefaultSelector()
    for p in procs:
        sel.register(p.p.stdout, selectors.EVENT_READ, p)
    live = len(procs)
    while live:
        for key, _ in sel.select():
            p = key.data
            line = p.p.stdout.readline()
            if not line:
                sel.unregister(p.p.stdout)
                p.p.wait()
                live -= 1
                continue
            ev = json.loads(line)
            if ev["event"] == "step":
                acc.setdefault(ev["step"], []).append(ev["accuracy"])
                groups.setdefault(ev["step"], []).append(ev["group"])
                if p is victim and ev["step"] == half:
                    p.p.kill()
                    events.append("step %d: killed the peer of slot %d" % (half, p.slot))
                    # its data comes back with a new peer that joins late
                    newp = joiner
                    newp.go(first)
                    newp.next()  # open
                    got = newp.next()
                    events.append(
                        "step %d: a new peer joined, fetched the state (%d rounds), "
                        "accuracy %.3f before training" % (half, got["rounds"], got["accuracy"])
                    )
                    sel.register(newp.p.stdout, selectors.EVENT_READ, newp)
                    live += 1
                    procs.append(newp)
            else:
                events.append(str(ev))
    for p in procs:
        p.p.wait()
    steps = sorted(acc)
    return (
        [float(np.mean(acc[s])) for s in steps],
        [float(np.mean(groups[s])) for s in steps],
        events,
        time.monotonic() - t0,
    )


def run_local(args, xtr, ytr, xte, yte):
    """Each peer's data alone (mean over peers), and all the data in one
    process (a batch as large as the swarm's per step), per outer step."""
    torch.set_num_threads(1)
    alone = [
        Trainer(*shard(xtr, ytr, s, args.peers), args, seed=1000 + s, batch=args.batch)
        for s in range(args.peers)
    ]
    single = Trainer(xtr, ytr, args, seed=7, batch=args.batch * args.peers)
    acc_alone, acc_single = [], []
    for _ in range(args.steps):
        for _ in range(args.inner):
            for t in alone:
                t.step()
            single.step()
        acc_alone.append(float(np.mean([accuracy(t.model, xte, yte) for t in alone])))
        acc_single.append(accuracy(single.model, xte, yte))
    return acc_alone, acc_single


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--peers", type=int, default=8)
    ap.add_argument("--steps", type=int, default=60, help="outer steps")
    ap.add_argument("--inner", type=int, default=4, help="local steps per average")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--outer-lr", type=float, default=1.0)
    ap.add_argument("--outer-momentum", type=float, default=0.5)
    ap.add_argument("--matchmaking-ms", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--png", help="draw the accuracies into this file")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--slot", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--secret", default=os.urandom(32).hex(), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    if args.peers < 3 or args.steps < 2:
        ap.error("at least 3 peers and 2 steps")

    xtr, ytr, xte, yte = load_data(args.seed)
    print("digits: %d training and %d test images; %d peers, each with classes:"
          % (len(ytr), len(yte), args.peers))
    print("  " + "  ".join("%d:%s" % (s, sorted(shard_classes(s, args.peers)))
                           for s in range(args.peers)))
    swarm, groups, events, seconds = run_swarm(args)
    alone, single = run_local(args, xtr, ytr, xte, yte)
    for e in events:
        print(e)
    print("%4s %8s %8s %8s %6s" % ("step", "alone", "moshpit", "single", "group"))
    for i in range(args.steps):
        print("%4d %8.3f %8.3f %8.3f %6.2f" % (i + 1, alone[i], swarm[i], single[i], groups[i]))
    print("final test accuracy: alone %.3f, moshpit %.3f, one process %.3f "
          "(moshpit - one process = %+.1f points); swarm ran %.0f s"
          % (alone[-1], swarm[-1], single[-1], 100 * (swarm[-1] - single[-1]), seconds))
    if args.png:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        steps = np.arange(1, args.steps + 1)
        fig, ax = plt.subplots(figsize=(7, 4.2))
        ax.plot(steps, single, label="one process, all data")
        ax.plot(steps, swarm, label="%d peers with moshpit (mean of live peers)" % args.peers)
        ax.plot(steps, alone, label="each peer alone (mean)")
        ax.axvline(args.steps // 2, color="gray", ls=":", lw=1)
        ax.text(args.steps // 2 + 0.5, 0.05, "a peer killed,\na new one joins",
                fontsize=8, color="gray")
        ax.set_xlabel("outer step (%d local SGD steps each)" % args.inner)
        ax.set_ylabel("test accuracy")
        ax.set_ylim(0, 1)
        ax.set_title("digits: each peer holds 2 of 10 classes")
        ax.legend(loc="center right")
        fig.tight_layout()
        fig.savefig(args.png, dpi=100)
        print("wrote", args.png)


if __name__ == "__main__":
    sys.exit(main())
