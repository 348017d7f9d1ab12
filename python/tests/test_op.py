# SPDX-License-Identifier: MIT
"""Averaging in the background: Peer.average_start and Op.wait / Op.done,
in one process (one op per peer, polls, the GIL, a close with an op live)
and across four processes that compute while their rounds run."""

import threading
import time

import numpy as np
import pytest

import moshpit

from test_swarm import inputs, weighted_mean


@pytest.fixture
def slow_peer():
    # alone with a 3 s window: a round ends when the window does
    p = moshpit.Peer(swarm="py-op", matchmaking_ms=3000, round_timeout_ms=8000)
    yield p
    p.close()


def test_one_op_poll_and_wait(slow_peer):
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    before = x.copy()
    op = slow_peer.average_start(x, weight=2.0)
    assert not op.done()
    with pytest.raises(moshpit.MoshpitError) as e:
        op.wait(timeout=0)
    assert e.value.code == moshpit.ETIMEDOUT
    with pytest.raises(moshpit.MoshpitError) as e:
        slow_peer.average_start(np.zeros(4, np.float32))
    assert e.value.code == moshpit.EBUSY and e.value.name == "EBUSY"
    info = op.wait()
    assert info.group_size == 1 and info.group_weight == 2.0
    assert np.array_equal(x, before)
    assert op.done() and op.wait() is info  # over: returned again at once
    # the op was waited for: the peer takes the next one
    assert slow_peer.average_start(x).wait().group_size == 1


def test_start_checks_like_average(slow_peer):
    x = np.zeros(16, np.float32)
    with pytest.raises(TypeError):
        slow_peer.average_start(np.zeros(16, np.float64))
    with pytest.raises(TypeError):
        slow_peer.average_start(x, weight="1")
    with pytest.raises(ValueError):
        slow_peer.average_start(np.zeros((4, 4), np.float32)[:, 1])
    for bad in (-1.0, float("nan"), float("inf"), 2 * moshpit.WEIGHT_MAX):
        with pytest.raises(moshpit.MoshpitError) as e:
            slow_peer.average_start(x, weight=bad)
        assert e.value.code == moshpit.EINVAL
    y = x.copy()
    y[3] = np.nan
    with pytest.raises(moshpit.MoshpitError) as e:
        slow_peer.average_start(y)
    assert e.value.code == moshpit.EINVAL
    # nothing was started by the refused calls
    op = slow_peer.average_start(x)
    op.wait()


def test_gil_released_while_waiting(slow_peer):
    op = slow_peer.average_start(np.ones(1000, np.float32))
    ticks = [0]
    done = threading.Event()
    result = []

    def waiter():
        result.append(op.wait())
        done.set()

    t = threading.Thread(target=waiter)
    t.start()
    while not done.is_set():
        ticks[0] += 1
        time.sleep(0.001)
    t.join()
    assert result[0].group_size == 1
    assert ticks[0] >= 20


def test_close_with_an_op_live():
    p = moshpit.Peer(swarm="py-op-close", matchmaking_ms=30000,
                     round_timeout_ms=40000)
    x = np.full(100, 3.0, np.float32)
    op = p.average_start(x)
    t0 = time.monotonic()
    p.close()
    assert time.monotonic() - t0 < 10  # not the 30 s window
    with pytest.raises(moshpit.MoshpitError) as e:
        op.wait()
    assert e.value.code == moshpit.ECLOSED
    assert op.done()
    assert np.all(x == 3.0)


def test_four_processes_exact_mean_in_the_background(workers):
    n = 4
    ws = workers(n, swarm="py-op-exact", group_size=n, min_group_size=n,
                 matchmaking_ms=10000, round_timeout_ms=20000)
    for round_no in range(2):
        values, weights = inputs(n, 10 + round_no)
        mean = weighted_mean(values, weights)
        for w, v, wt in zip(ws, values, weights):
            w.send(op="average_start", values=[float(a) for a in v],
                   weight=float(wt))
        steps = 0
        for i, w in enumerate(ws):
            r = w.recv(60)
            steps += r["steps"]
            info = r["info"]
            assert info["group_size"] == n, (i, info)
            assert info["fraction_averaged"] == 1.0, (i, info)
            got = np.array(r["values"], dtype=np.float64)
            dev = np.abs(got - mean).max() / np.abs(mean).max()
            assert dev <= 1e-5, (i, dev)
        # start returned before the round could end (it needs all four
        # and messages between them): the peers computed meanwhile
        assert steps > 0
