# SPDX-License-Identifier: MIT
"""Shared test helpers: the library under test, and peer processes driven
over pipes (tests/peer_worker.py)."""

import json
import os
import queue
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_ROOT = os.path.dirname(HERE)
REPO = os.path.dirname(PKG_ROOT)

# The tests run against the source tree's package; the library comes from
# MOSHPIT_LIBRARY, else from the usual build directory of the repository.
sys.path.insert(0, PKG_ROOT)
if not os.environ.get("MOSHPIT_LIBRARY"):
    for d in ("build", "build-ci"):
        cand = os.path.join(REPO, d, "libmoshpit.so")
        if os.path.exists(cand):
            os.environ["MOSHPIT_LIBRARY"] = cand
            break


class Worker:
    """A peer in its own process, answering one JSON line per command."""

    def __init__(self):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "peer_worker.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
            env=dict(os.environ, PYTHONPATH=PKG_ROOT),
        )
        self._lines = queue.Queue()
        t = threading.Thread(target=self._read, daemon=True)
        t.start()

    def _read(self):
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def send(self, **cmd):
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def recv(self, timeout):
        """The next reply; fails the test if none comes within timeout s."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail("peer process %d: no reply in %.0f s" % (self.proc.pid, timeout))
        if line is None:
            pytest.fail("peer process %d exited (%s)" % (self.proc.pid, self.proc.poll()))
        reply = json.loads(line)
        if "error" in reply:
            pytest.fail("peer process %d: %s" % (self.proc.pid, reply["error"]))
        return reply

    def call(self, reply_timeout, **cmd):
        self.send(**cmd)
        return self.recv(reply_timeout)

    def kill(self):
        self.proc.kill()
        self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.send(op="exit")
                self.proc.stdin.close()
                self.proc.wait(timeout=15)
            except Exception:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def workers():
    """start(n, **config): n peer processes in one swarm, all seeing each
    other; stopped (or killed) at the end of the test."""
    started = []

    def start(n, **config):
        ws = [Worker() for _ in range(n)]
        started.extend(ws)
        first = ws[0].call(30, op="open", config=config)["endpoint"]
        for w in ws[1:]:
            w.call(30, op="open", config=dict(config, bootstrap=[first]))
        for w in ws:
            w.call(40, op="wait", n=n, timeout=30.0)
        return ws

    yield start
    for w in started:
        w.stop()


def now():
    return time.monotonic()
