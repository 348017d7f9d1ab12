# SPDX-License-Identifier: MIT
"""Peers in separate processes on loopback: the exact weighted mean, and a
swarm that loses a peer."""

import numpy as np

COUNT = 1000
ROUND_TIMEOUT_S = 20.0
SLACK_S = 2.0


def inputs(n, round_no):
    rng = np.random.default_rng(1000 * n + round_no)
    values = rng.standard_normal((n, COUNT)).astype(np.float32) * 10
    weights = rng.uniform(0.5, 3.0, n)
    return values, weights


def weighted_mean(values, weights):
    v = values.astype(np.float64)
    return (weights[:, None] * v).sum(0) / weights.sum()


def average_all(ws, values, weights):
    for w, v, wt in zip(ws, values, weights):
        w.send(op="average", values=[float(a) for a in v], weight=float(wt))
    return [w.recv(ROUND_TIMEOUT_S + 30) for w in ws]


def test_four_processes_exact_mean(workers):
    n = 4
    ws = workers(
        n,
        swarm="py-exact",
        group_size=n,
        matchmaking_ms=10000,
        round_timeout_ms=int(ROUND_TIMEOUT_S * 1000),
    )
    for round_no in range(2):
        values, weights = inputs(n, round_no)
        mean = weighted_mean(values, weights)
        for i, r in enumerate(average_all(ws, values, weights)):
            info = r["info"]
            assert info["group_size"] == n, (i, info)
            assert info["fraction_averaged"] == 1.0, (i, info)
            assert info["peers_failed"] == 0, (i, info)
            assert info["round_id"] != 0
            assert abs(info["group_weight"] - weights.sum()) < 1e-9
            got = np.array(r["values"], dtype=np.float64)
            dev = np.abs(got - mean).max() / np.abs(mean).max()
            assert dev <= 1e-5, (i, dev)
            assert r["seconds"] <= ROUND_TIMEOUT_S + SLACK_S


def test_killed_peer(workers):
    """A peer dies: the survivors' calls still return within their deadline,
    each result is either untouched (alone) or the exact mean of the peers
    that the round reports, and rounds among the three survivors become
    exact again."""
    n = 4
    ws = workers(
        n,
        swarm="py-kill",
        group_size=n,
        matchmaking_ms=3000,
        peer_timeout_ms=2000,
        round_timeout_ms=int(ROUND_TIMEOUT_S * 1000),
    )
    ws[3].kill()
    survivors = ws[:3]
    full = 0
    for round_no in range(6):
        values, weights = inputs(3, 100 + round_no)
        mean = weighted_mean(values, weights)
        results = average_all(survivors, values, weights)
        sizes = set()
        for i, r in enumerate(results):
            info = r["info"]
            assert r["seconds"] <= ROUND_TIMEOUT_S + SLACK_S, (i, r["seconds"])
            assert info["group_size"] <= 3, (i, info)
            got = np.array(r["values"], dtype=np.float64)
            if info["group_size"] == 1:
                assert np.array_equal(got, values[i].astype(np.float64))
            sizes.add(info["group_size"])
            if info["group_size"] == 3 and info["fraction_averaged"] == 1.0:
                dev = np.abs(got - mean).max() / np.abs(mean).max()
                assert dev <= 1e-5, (round_no, i, dev)
        if sizes == {3}:
            full += 1
            if full == 2:
                break
    assert full == 2, "the survivors never averaged as a group of 3 twice"
