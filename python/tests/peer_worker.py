# SPDX-License-Identifier: MIT
"""One peer process for the tests: reads JSON commands on stdin, one per
line, and answers each with one JSON line on stdout."""

import json
import sys
import time

import numpy as np

import moshpit


def main():
    peer = None
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        try:
            if op == "open":
                peer = moshpit.Peer(**cmd["config"])
                reply = {"endpoint": peer.endpoint}
            elif op == "wait":
                peer.wait_members(cmd["n"], timeout=cmd["timeout"])
                reply = {"members": peer.members}
            elif op == "average":
                x = np.array(cmd["values"], dtype=np.float32)
                t0 = time.monotonic()
                info = peer.average(x, weight=cmd["weight"])
                reply = {
                    "values": [float(v) for v in x],
                    "info": info._asdict(),
                    "seconds": time.monotonic() - t0,
                }
            elif op == "average_start":
                # the round in the background while this process computes
                x = np.array(cmd["values"], dtype=np.float32)
                t0 = time.monotonic()
                handle = peer.average_start(x, weight=cmd["weight"])
                work, steps = np.arange(1000, dtype=np.float64), 0
                while not handle.done():
                    work = work * 0.999 + 0.5
                    steps += 1
                info = handle.wait()
                reply = {
                    "values": [float(v) for v in x],
                    "info": info._asdict(),
                    "seconds": time.monotonic() - t0,
                    "steps": steps,
                }
            elif op == "exit":
                break
            else:
                reply = {"error": "unknown op %r" % op}
        except Exception as e:  # reported to the test, which fails
            reply = {"error": "%s: %s" % (type(e).__name__, e)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    if peer is not None:
        peer.close()


if __name__ == "__main__":
    main()
