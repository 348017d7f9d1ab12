/* SPDX-License-Identifier: MIT */
/*
 * bench_mpi_child.c - one rank of the Open MPI side of moshpit-bench,
 * started by the driver through mpirun (which the driver restricts to the
 * ob1 PML with the tcp and self BTLs on lo, so the data crosses loopback
 * TCP like everybody else's instead of shared memory). It runs an in-place
 * MPI_Allreduce (MPI_FLOAT, MPI_SUM) on --size bytes of deterministic
 * random floats: --warmup untimed rounds and --rounds timed ones, each
 * after an MPI_Barrier and timed until the call returns. The input is
 * restored before every round (outside the timing) and the last round's
 * output is checked against the sum recomputed from the known seeds. Each
 * rank writes "<--out>.<rank>" since mpirun does not pass descriptors on.
 */
#include <limits.h>

#include <mpi.h>

#include "bench_common.h"

int main(int argc, char **argv) {
    bench_args_t a;
    int rank = 0, size = 0, i, bad, rc = BENCH_EXIT_OK;
    size_t count;
    float *input, *buf;
    bench_round_t *rs;
    char msg[256], path[4096];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (bench_parse_args(argc, argv, &a) != 0 || a.peers != size) {
        fprintf(stderr, "mpi rank %d: bad arguments or -np mismatch\n", rank);
        MPI_Abort(MPI_COMM_WORLD, BENCH_EXIT_ERROR);
        return BENCH_EXIT_ERROR;
    }
    a.rank = rank;
    count = a.bytes / sizeof(float);
    if (count > (size_t)INT_MAX) {
        fprintf(stderr, "mpi rank %d: size too large for an int count\n", rank);
        MPI_Abort(MPI_COMM_WORLD, BENCH_EXIT_ERROR);
        return BENCH_EXIT_ERROR;
    }
    input = malloc(count * sizeof(float));
    buf = malloc(count * sizeof(float));
    rs = calloc((size_t)a.rounds, sizeof(*rs));
    if (input == NULL || buf == NULL || rs == NULL) {
        fprintf(stderr, "mpi rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, BENCH_EXIT_ERROR);
        return BENCH_EXIT_ERROR;
    }
    bench_fill(input, count, &a, rank);

    for (i = 0; i < a.warmup + a.rounds; i++) {
        double t0, t1;
        memcpy(buf, input, count * sizeof(float));
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
        t1 = MPI_Wtime();
        if (i >= a.warmup) {
            bench_round_t *r = &rs[i - a.warmup];
            r->call_s = r->allreduce_s = t1 - t0;
            r->group = (unsigned)size;
            r->fraction = 1.0;
        }
    }

    bad = bench_verify(buf, count, a.seed, size, 1.0, msg, sizeof(msg));
    if (bad) {
        fprintf(stderr, "mpi rank %d: VERIFICATION FAILED: %s\n", rank, msg);
        rc = BENCH_EXIT_VERIFY;
    }
    snprintf(path, sizeof(path), "%s.%d", a.out, rank);
    if (bench_write_result(path, rank, rs, a.rounds, bad ? msg : NULL) != 0) {
        rc = BENCH_EXIT_ERROR;
    }
    free(rs);
    free(buf);
    free(input);
    MPI_Finalize();
    return rc;
}
