// SPDX-License-Identifier: MIT
//
// bench_gloo_child.cc - one rank of the Gloo side of moshpit-bench. It
// connects a full mesh of --peers ranks over gloo::transport::tcp bound to
// 127.0.0.1 (rendezvous through a gloo::rendezvous::FileStore in the
// driver's fresh temp dir), then runs gloo::AllreduceRingChunked<float>
// (sum) on --size bytes of deterministic random floats: --warmup untimed
// rounds and --rounds timed ones, each preceded by gloo::barrier so all ranks
// start together and each timed from just after the barrier to the end of
// run(). The input is restored before every round (outside the timing) and
// the last round's output is checked against the sum recomputed from the
// known seeds. Per-round times and the verdict go to the --out file.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include "bench_common.h"

namespace {

int run(const bench_args_t &a) {
    const size_t count = a.bytes / sizeof(float);
    if (count > (size_t)INT32_MAX) {
        std::fprintf(stderr, "gloo rank %d: size too large for Gloo\n", a.rank);
        return BENCH_EXIT_ERROR;
    }

    // IPv4 TCP on loopback (or the rank's address on the emulated
    // network), so the comparison is socket against socket.
    gloo::transport::tcp::attr attr(a.addr);
    attr.ai_family = AF_INET;
    auto dev = gloo::transport::tcp::CreateDevice(attr);

    gloo::rendezvous::FileStore store(a.store);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(a.rank, a.peers);
    ctx->setTimeout(std::chrono::seconds(300));
    ctx->connectFullMesh(store, dev);

    std::vector<float> input(count), buf(count);
    bench_fill(input.data(), count, &a, a.rank);
    std::vector<float *> ptrs{buf.data()};
    gloo::AllreduceRingChunked<float> allreduce(ctx, ptrs, (int)count);

    std::vector<bench_round_t> rs((size_t)a.rounds);
    for (int i = 0; i < a.warmup + a.rounds; i++) {
        std::copy(input.begin(), input.end(), buf.begin());
        gloo::BarrierOptions bopts(ctx);
        gloo::barrier(bopts);
        double t0 = bench_now();
        allreduce.run();
        double t1 = bench_now();
        if (i >= a.warmup) {
            bench_round_t &r = rs[(size_t)(i - a.warmup)];
            r.call_s = r.allreduce_s = t1 - t0;
            r.round_id = 0;
            r.group = (unsigned)a.peers;
            r.fraction = 1.0;
        }
    }

    char msg[256];
    int bad =
        bench_verify(buf.data(), count, a.seed, a.peers, 1.0, msg, sizeof(msg));
    if (bad) {
        std::fprintf(stderr, "gloo rank %d: VERIFICATION FAILED: %s\n", a.rank,
                     msg);
    }
    // Keep every rank alive until all have finished the collective, so no
    // peer sees a closed socket while still receiving.
    gloo::BarrierOptions bopts(ctx);
    gloo::barrier(bopts);
    if (bench_write_result(a.out, a.rank, rs.data(), a.rounds,
                           bad ? msg : nullptr) != 0) {
        return BENCH_EXIT_ERROR;
    }
    return bad ? BENCH_EXIT_VERIFY : BENCH_EXIT_OK;
}

} // namespace

int main(int argc, char **argv) {
    bench_args_t a;
    if (bench_parse_args(argc, argv, &a) != 0 || a.rank < 0 ||
        a.rank >= a.peers || a.store == nullptr) {
        return BENCH_EXIT_ERROR;
    }
    try {
        return run(a);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "gloo rank %d: %s\n", a.rank, e.what());
        return BENCH_EXIT_ERROR;
    }
}
