# SPDX-License-Identifier: MIT
"""moshpit with PyTorch on the CPU: tensors straight into Peer.average,
moshpit.torch.average_ over a list of parameters, and the outer optimizer;
two peers in one process on real sockets, one thread each."""

import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import moshpit  # noqa: E402
import moshpit.torch as mtorch  # noqa: E402


@pytest.fixture
def pair():
    cfg = dict(group_size=2, matchmaking_ms=10000, round_timeout_ms=20000)
    a = moshpit.Peer(swarm="py-torch", **cfg)
    b = moshpit.Peer(swarm="py-torch", bootstrap=[a.endpoint], **cfg)
    a.wait_members(2, timeout=20.0)
    b.wait_members(2, timeout=20.0)
    yield a, b
    b.close()
    a.close()


def both(fa, fb):
    """Runs fa() and fb() at once (each blocks in a round); their results."""
    out = [None, None]
    err = []

    def run(i, f):
        try:
            out[i] = f()
        except BaseException as e:  # reported below
            err.append(e)

    t = threading.Thread(target=run, args=(1, fb))
    t.start()
    run(0, fa)
    t.join()
    if err:
        raise err[0]
    return out


def test_tensor_checks():
    with moshpit.Peer(swarm="py-torch-alone", matchmaking_ms=200) as p:
        x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
        info = p.average(x)
        assert info.group_size == 1
        assert torch.equal(x, torch.arange(12, dtype=torch.float32).reshape(3, 4))
        with pytest.raises(TypeError):
            p.average(torch.zeros(4, dtype=torch.float64))
        with pytest.raises(TypeError):
            p.average(torch.zeros(4, dtype=torch.int64))
        with pytest.raises(ValueError):
            p.average(torch.zeros(4, 3).t())
        with pytest.raises(ValueError):
            p.average(torch.zeros(4, device="meta"))
        with pytest.raises(TypeError):
            mtorch.average_([torch.zeros(3, dtype=torch.int32)], p)
        with pytest.raises(TypeError):
            mtorch.average_([np.zeros(3, np.float32)], p)
        with pytest.raises(ValueError):
            mtorch.average_([], p)


def test_tensor_average_exact(pair):
    a, b = pair
    xa = torch.full((5, 7), 1.0)
    xb = torch.full((5, 7), 4.0)
    ia, ib = both(lambda: a.average(xa, weight=1.0), lambda: b.average(xb, weight=2.0))
    assert ia.group_size == 2 and ib.group_size == 2
    assert torch.allclose(xa, torch.full((5, 7), 3.0))
    assert torch.equal(xa, xb)


def test_average_list_of_parameters(pair):
    a, b = pair
    torch.manual_seed(0)
    ma = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    mb = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    mb.double()  # another dtype goes through the float32 buffer and back
    want = [
        (pa.detach().double() + pb.detach()) / 2
        for pa, pb in zip(ma.parameters(), mb.parameters())
    ]
    ia, ib = both(
        lambda: mtorch.average_(ma.parameters(), a),
        lambda: mtorch.average_(list(mb.parameters()), b),
    )
    assert ia.group_size == 2 and ia.fraction_averaged == 1.0
    for pa, pb, w in zip(ma.parameters(), mb.parameters(), want):
        assert pa.dtype == torch.float32 and pb.dtype == torch.float64
        assert pa.requires_grad
        assert torch.allclose(pa.double(), w, atol=1e-6)
        assert torch.allclose(pb, w, atol=1e-6)


def test_outer_optimizer_nesterov(pair):
    """Two peers, three outer steps: both end with the same parameters, and
    they equal an independent computation of the Nesterov update."""
    a, b = pair
    lr, mu = 0.7, 0.9
    pa = [torch.nn.Parameter(torch.tensor([1.0, -2.0, 3.0]))]
    pb = [torch.nn.Parameter(torch.tensor([5.0, 0.0, -1.0]))]
    oa = mtorch.OuterOptimizer(pa, a, lr=lr, momentum=mu, every=2)
    ob = mtorch.OuterOptimizer(pb, b, lr=lr, momentum=mu, every=2)
    g = [np.array([1.0, -2.0, 3.0]), np.array([5.0, 0.0, -1.0])]
    v = [np.zeros(3), np.zeros(3)]
    for k in range(3):
        # inner steps: each peer moves its parameters its own way
        drift = [np.array([0.5, 0.25, -1.0]) * (k + 1), np.array([-1.0, 2.0, 0.5])]
        with torch.no_grad():
            pa[0].add_(torch.tensor(drift[0], dtype=torch.float32))
            pb[0].add_(torch.tensor(drift[1], dtype=torch.float32))
        assert oa.step() is None and ob.step() is None  # 1 of every=2
        local = [g[0] + drift[0], g[1] + drift[1]]
        with torch.no_grad():
            pa[0].copy_(torch.tensor(local[0], dtype=torch.float32))
            pb[0].copy_(torch.tensor(local[1], dtype=torch.float32))
        ia, ib = both(oa.step, ob.step)
        assert ia.group_size == 2 and ib.group_size == 2
        mean = (local[0] + local[1]) / 2
        for i in range(2):
            delta = g[i] - mean
            v[i] = mu * v[i] + delta
            g[i] = g[i] - lr * (delta + mu * v[i])
        assert np.allclose(pa[0].detach().numpy(), g[0], atol=1e-4)
        assert np.allclose(pb[0].detach().numpy(), g[1], atol=1e-4)
    assert not np.allclose(g[0], g[1])  # different starts, still pulled in


def test_outer_optimizer_lr1_is_parameter_averaging(pair):
    a, b = pair
    pa = [torch.nn.Parameter(torch.tensor([1.0, 2.0]))]
    pb = [torch.nn.Parameter(torch.tensor([3.0, 6.0]))]
    oa = mtorch.OuterOptimizer(pa, a, lr=1.0, momentum=0.0)
    ob = mtorch.OuterOptimizer(pb, b, lr=1.0, momentum=0.0)
    both(oa.step, ob.step)
    assert torch.allclose(pa[0].detach(), torch.tensor([2.0, 4.0]))
    assert torch.equal(pa[0].detach(), pb[0].detach())
    with pytest.raises(ValueError):
        mtorch.OuterOptimizer(pa, a, every=0)
    with pytest.raises(ValueError):
        mtorch.OuterOptimizer(pa, a, momentum=1.0)
    with pytest.raises(TypeError):
        mtorch.OuterOptimizer(pa, a, lr="fast")
