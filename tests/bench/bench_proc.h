/* SPDX-License-Identifier: MIT */
/*
 * bench_proc.h - the child-process plumbing of the moshpit-bench driver:
 * starting a child program with chosen descriptors kept open, waiting for a
 * set of children with a deadline (and ending the stragglers), reading
 * newline-terminated reports from a child's pipe with a deadline, and the
 * monotonic clock, sleep and temp-dir removal that go with them. POSIX only;
 * the driver is the only user.
 */
#ifndef MOSHPIT_BENCH_PROC_H
#define MOSHPIT_BENCH_PROC_H

#include <stddef.h>
#include <sys/types.h>

/* Monotonic seconds. */
double proc_now(void);
void proc_sleep_ms(long ms);

void proc_set_cloexec(int fd);

/* Removes a directory tree we created (no symlinks followed). */
void proc_rm_tree(const char *path);

/*
 * fork/exec of argv[0] (an absolute path). The child's stdout goes to our
 * stderr; keep_fds[0..nkeep) stay open across exec; mpi_env sets the
 * Open MPI variables for a single-host run (and for root). Returns the pid,
 * or -1 if fork failed; an exec failure shows as exit status 127.
 */
pid_t proc_spawn(char *const argv[], const int *keep_fds, int nkeep,
                 int mpi_env);

/*
 * Reaps pids[0..n) (set to 0 as they exit). At the deadline it sends
 * SIGTERM to the rest, 5 s later SIGKILL. status[i]: exit code, 128+signal,
 * or -1 if the child had to be ended. Returns how many exited with 0.
 */
int proc_wait_all(pid_t *pids, int n, double deadline, int *status);

/* Per-child line reader on a report pipe. */
typedef struct proc_line_reader {
    int fd;
    char buf[1024];
    size_t len;
    int eof;
} proc_line_reader_t;

/*
 * Returns 0 with the next line (without '\n', truncated to cap-1) in line;
 * -1 on deadline, EOF (lr->eof set) or an over-long line.
 */
int proc_read_line(proc_line_reader_t *lr, char *line, size_t cap,
                   double deadline);

#endif /* MOSHPIT_BENCH_PROC_H */
