#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""wan_bench.py - moshpit against Gloo on an emulated wide-area network.

Runs moshpit-bench once per scenario with its emulated-network options
(8 ranks, one network namespace each, every rank's access link delayed,
rate-limited and lossy as the scenario says; see tests/netns/README.md) and
prints one table: per scenario the moshpit round time, Gloo's and Open
MPI's in the same run, the line-rate bound for the bytes a ring all-reduce of float32 moves
(each rank sends and receives 2(N-1)/N times the buffer), the ratios, and
the bytes moshpit moved over the busiest rank's link per round (what a
compressed setting of the moshpit side would shrink). Needs root
(it builds network namespaces); moshpit-bench exits 77 with "SKIP: ..."
where it cannot, and so does this script.

Arguments after the options (or after --) go to every moshpit-bench run
unchanged, e.g. a compression setting of the moshpit side.

  tests/bench/wan_bench.py [--bench PATH] [--rounds R] [--scenario NAME]...
                           [--json] [-- EXTRA moshpit-bench ARGS]
"""
import argparse
import json
import os
import subprocess
import sys
import time

# name, one-way delay ms (RTT = 2x), rate Mbit/s, loss %, size, cc, rounds,
# moshpit-bench arguments of the scenario. The -cubic-only scenario keeps
# cubic on moshpit's data connections too (config congestion "default",
# and so data_streams' default of 4): a host where bbr is not allowed.
# The -mtu scenario is the bbr lossy one without its loss: the same
# packets of one MTU through the same delay line, so that the part of a
# lossy round due to the loss can be told from what the machine's CPU
# allows (every packet costs several context switches on a virtual machine).
# The rtt100-20m rows are the same lossy link at a home uplink's rate: a
# fifth of the packets per second, so that a machine whose delay line
# cannot carry 8 x 100 Mbit/s of MTU-sized packets still shows how close
# to the line a lossy round comes (its -mtu row is the lossless control).
PER_PACKET = {"rtt100-100m-4m-bbr-mtu", "rtt100-20m-4m-bbr-mtu"}
SCENARIOS = [
    ("rtt20-1g-16m", 10, 1000, 0, "16M", None, 3, []),
    ("rtt100-100m-16m", 50, 100, 0, "16M", None, 3, []),
    ("rtt100-100m-loss1-4m-cubic", 50, 100, 1, "4M", "cubic", 3, []),
    ("rtt100-100m-loss1-4m-cubic-only", 50, 100, 1, "4M", "cubic", 3,
     ["--moshpit-cc", "default"]),
    ("rtt100-100m-loss1-4m-bbr", 50, 100, 1, "4M", "bbr", 3, []),
    ("rtt100-100m-4m-bbr-mtu", 50, 100, 0, "4M", "bbr", 3, []),
    ("rtt50-20m-4m", 25, 20, 0, "4M", None, 3, []),
    ("rtt100-20m-loss1-4m-cubic", 50, 20, 1, "4M", "cubic", 3, []),
    ("rtt100-20m-loss1-4m-cubic-only", 50, 20, 1, "4M", "cubic", 3,
     ["--moshpit-cc", "default"]),
    ("rtt100-20m-loss1-4m-bbr", 50, 20, 1, "4M", "bbr", 3, []),
    ("rtt100-20m-4m-bbr-mtu", 50, 20, 0, "4M", "bbr", 3, []),
]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_bench = os.path.join(here, "..", "..", "build-bench", "tests",
                                 "bench", "moshpit-bench")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", default=default_bench,
                    help="the moshpit-bench program")
    ap.add_argument("--rounds", type=int, default=0,
                    help="timed rounds per scenario (default: 3)")
    ap.add_argument("--peers", type=int, default=8)
    ap.add_argument("--scenario", action="append", default=[],
                    help="run only these (repeatable): " +
                    ", ".join(s[0] for s in SCENARIOS))
    ap.add_argument("--json", action="store_true",
                    help="print the moshpit-bench JSON of each run")
    ap.add_argument("extra", nargs=argparse.REMAINDER,
                    help="passed to every moshpit-bench run")
    a = ap.parse_args()
    extra = a.extra[1:] if a.extra[:1] == ["--"] else a.extra
    names = {s[0] for s in SCENARIOS}
    for n in a.scenario:
        if n not in names:
            ap.error("unknown scenario %s" % n)
    rows, failed = [], False
    t_start = time.time()
    for (name, delay, rate, loss, size, cc, rounds, own) in SCENARIOS:
        if a.scenario and name not in a.scenario:
            continue
        cmd = [a.bench, "--peers", str(a.peers), "--size", size,
               "--rounds", str(a.rounds or rounds), "--warmup", "1",
               "--delay-ms", str(delay), "--rate-mbit", str(rate),
               "--json"]
        if loss:
            cmd += ["--loss-pct", str(loss)]
        elif name not in PER_PACKET:
            cmd += ["--offload"]  # lossless: fewer, larger packets
        if cc:
            cmd += ["--cc", cc]
        cmd += own + extra
        print("running %s: %s" % (name, " ".join(cmd)), file=sys.stderr)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
        if p.returncode == 77:
            print(p.stdout.strip())
            return 77
        try:
            res = json.loads(p.stdout)
        except ValueError:
            print("%s: moshpit-bench exited %d without JSON" %
                  (name, p.returncode), file=sys.stderr)
            failed = True
            continue
        if a.json:
            print(json.dumps(res, indent=1))
        failed |= p.returncode != 0
        sysres = {s["system"]: s for s in res["systems"]}
        bound = res["network"]["bound_s"]

        def t(sysname):
            s = sysres.get(sysname)
            return s["s_per_round"] if s and s["status"] == "ok" else None
        mb = sysres.get("moshpit", {}).get("link_bytes_per_round")
        rows.append((name, 2 * delay, rate, loss, size, cc or "default",
                     t("moshpit"), t("gloo"), t("mpi"), bound,
                     mb / 1048576.0 if mb else None))
    print("| scenario | RTT ms | Mbit/s | loss % | size | cc | moshpit s "
          "| Gloo s | MPI s | bound s | moshpit/bound | Gloo/bound "
          "| moshpit/Gloo | moshpit/MPI | moshpit link MiB/round |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")

    def f(x, fmt="%.3f"):
        return fmt % x if x is not None else "-"
    for (name, rtt, rate, loss, size, cc, m, g, mp, b, mb) in rows:
        print("| %s | %d | %d | %g | %siB | %s | %s | %s | %s | %s | %s | %s "
              "| %s | %s | %s |"
              % (name, rtt, rate, loss, size, cc, f(m), f(g), f(mp), f(b),
                 f(m / b if m and b else None, "%.2f"),
                 f(g / b if g and b else None, "%.2f"),
                 f(m / g if m and g else None, "%.2f"),
                 f(m / mp if m and mp else None, "%.2f"), f(mb, "%.2f")))
    print("(%d s in all)" % (time.time() - t_start), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
