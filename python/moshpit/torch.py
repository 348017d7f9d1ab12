# SPDX-License-Identifier: MIT
"""PyTorch helpers: average a list of tensors in place, and an outer
optimizer for local-SGD / DiLoCo training over a moshpit swarm.

Example (each peer runs this; `peer` is a moshpit.Peer of the swarm)::

    import torch
    import moshpit, moshpit.torch

    model = torch.nn.Linear(64, 10)
    inner = torch.optim.AdamW(model.parameters(), lr=1e-3)
    outer = moshpit.torch.OuterOptimizer(
        model.parameters(), peer, lr=0.7, momentum=0.9, every=8)
    for x, y in batches:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        inner.zero_grad()
        loss.backward()
        inner.step()
        info = outer.step()   # every 8th call: average with the swarm
"""

import torch

__all__ = ["average_", "flatten", "unflatten_", "OuterOptimizer"]


def _check_tensors(tensors):
    tensors = list(tensors)
    if not tensors:
        raise ValueError("expected at least one tensor")
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError("expected torch.Tensor, got %s" % type(t).__name__)
        if not t.is_floating_point():
            raise TypeError("expected floating-point tensors, got %s" % t.dtype)
    return tensors


def flatten(tensors):
    """One contiguous float32 CPU tensor holding all tensors, in order."""
    tensors = _check_tensors(tensors)
    with torch.no_grad():
        return torch.cat(
            [t.detach().reshape(-1).to("cpu", torch.float32) for t in tensors]
        )


def unflatten_(tensors, flat):
    """Copies the float32 vector flat back into tensors (in place, each in
    its own dtype and device)."""
    tensors = _check_tensors(tensors)
    total = sum(t.numel() for t in tensors)
    if flat.numel() != total:
        raise ValueError("flat has %d elements, tensors %d" % (flat.numel(), total))
    offset = 0
    with torch.no_grad():
        for t in tensors:
            n = t.numel()
            t.copy_(flat[offset : offset + n].view_as(t))
            offset += n


def average_(tensors, peer, weight=1.0):
    """Averages the tensors in place with the swarm, through one flat
    float32 buffer (tensors on a GPU, or of another floating dtype, are
    copied to the host and back). Returns the moshpit.RoundInfo."""
    tensors = _check_tensors(tensors)
    flat = flatten(tensors)
    info = peer.average(flat, weight=weight)
    if info.group_size > 1:
        unflatten_(tensors, flat)
    return info


class OuterOptimizer:
    """The outer loop of local-SGD / DiLoCo over moshpit.

    Each peer trains with any inner torch optimizer; every `every` calls of
    step() this optimizer averages the parameters with the swarm (weight
    `weight`), takes the difference between its copy of the global
    parameters and that average as an outer gradient, and applies it with
    SGD and (Nesterov) momentum:

        delta = global - average(local)
        v = momentum * v + delta
        global -= lr * (delta + momentum * v)      (nesterov=True)
        global -= lr * v                           (nesterov=False)
        local = global

    lr=1 and momentum=0 is plain periodic parameter averaging. Averaging
    the parameters rather than the deltas means peers whose global copies
    differ (a group missed a round, a peer joined late) are pulled back
    together: with lr=1 they agree after every fully averaged round.

    A round with nobody to average with (group_size 1) still applies the
    peer's own delta. step() returns the RoundInfo of its averaging round,
    or None when it only counted an inner step.
    """

    def __init__(self, params, peer, lr=0.7, momentum=0.9, nesterov=True,
                 every=1, weight=1.0):
        self.params = _check_tensors(params)
        if isinstance(every, bool) or not isinstance(every, int):
            raise TypeError("every: expected an int")
        if every < 1:
            raise ValueError("every: expected >= 1")
        for name, v in (("lr", lr), ("momentum", momentum)):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise TypeError("%s: expected a number" % name)
        if not lr > 0:
            raise ValueError("lr: expected > 0")
        if not 0 <= momentum < 1:
            raise ValueError("momentum: expected in [0, 1)")
        self.peer = peer
        self.lr = float(lr)
        self.momentum = float(momentum)
        self.nesterov = bool(nesterov)
        self.every = every
        self.weight = weight
        self.steps = 0
        self.global_ = flatten(self.params)
        self.velocity = torch.zeros_like(self.global_)

    def load_(self, flat):
        """Sets parameters and the global copy to the float32 vector flat
        (e.g. what moshpit.Peer.fetch_state returned) and resets the
        momentum."""
        if flat.numel() != self.global_.numel():
            raise ValueError("expected %d elements" % self.global_.numel())
        self.global_ = flat.detach().to("cpu", torch.float32).clone()
        self.velocity.zero_()
        unflatten_(self.params, self.global_)

    def step(self, weight=None):
        self.steps += 1
        if self.steps % self.every:
            return None
        local = flatten(self.params)
        info = self.peer.average(local, weight=self.weight if weight is None else weight)
        delta = self.global_ - local
        self.velocity.mul_(self.momentum).add_(delta)
        if self.nesterov:
            update = delta + self.momentum * self.velocity
        else:
            update = self.velocity
        self.global_.sub_(self.lr * update)
        unflatten_(self.params, self.global_)
        return info
