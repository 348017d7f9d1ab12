/* SPDX-License-Identifier: MIT */
/*
 * bench_proc.c - child-process plumbing for the moshpit-bench driver (see
 * bench_proc.h): fork/exec with chosen descriptors, deadline-bounded
 * reaping that ends stragglers with SIGTERM then SIGKILL, a line reader on
 * a child's report pipe that never blocks past its deadline, and the small
 * clock, sleep and cleanup helpers these need.
 */
#include "bench_proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double proc_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void proc_sleep_ms(long ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
}

void proc_set_cloexec(int fd) {
    int fl = fcntl(fd, F_GETFD);
    if (fl >= 0) {
        (void)fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
    }
}

void proc_rm_tree(const char *path) {
    DIR *d = opendir(path);
    struct dirent *e;
    char p[PATH_MAX];
    struct stat st;
    if (d != NULL) {
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
                continue;
            }
            snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
            if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
                proc_rm_tree(p);
            } else {
                (void)unlink(p);
            }
        }
        closedir(d);
    }
    (void)rmdir(path);
}

/*
 * Starts argv[0] with stdout sent to our stderr (our stdout carries only
 * the table or the JSON), keep_fds[] left open across exec (all other
 * descriptors of ours are close-on-exec) and, if mpi_env, the variables
 * that let mpirun run as root and without ssh.
 */
pid_t proc_spawn(char *const argv[], const int *keep_fds, int nkeep,
                 int mpi_env) {
    pid_t pid = fork();
    if (pid != 0) {
        return pid; /* parent, or -1 */
    }
    signal(SIGPIPE, SIG_DFL);
    for (int i = 0; i < nkeep; i++) {
        int fl = fcntl(keep_fds[i], F_GETFD);
        (void)fcntl(keep_fds[i], F_SETFD, fl & ~FD_CLOEXEC);
    }
    (void)dup2(STDERR_FILENO, STDOUT_FILENO);
    if (mpi_env) {
        /* Single host: never look for ssh/rsh. */
        setenv("OMPI_MCA_plm_rsh_agent", "", 1);
        if (geteuid() == 0) {
            setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
            setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
        }
    }
    execv(argv[0], argv);
    fprintf(stderr, "moshpit-bench: cannot run %s: %s\n", argv[0],
            strerror(errno));
    _exit(127);
}

/*
 * Waits for all pids until the deadline; then SIGTERMs the stragglers
 * (mpirun passes it on to its ranks), gives them 5 s and SIGKILLs them.
 * status[i] = exit code, 128+signal, or -1 for "had to be killed".
 * Returns the number of children that exited 0.
 */
int proc_wait_all(pid_t *pids, int n, double deadline, int *status) {
    int left = 0, good = 0, killed = 0;
    for (int i = 0; i < n; i++) {
        status[i] = -1;
        left += pids[i] > 0;
    }
    for (;;) {
        for (int i = 0; i < n; i++) {
            int st;
            if (pids[i] <= 0) {
                continue;
            }
            pid_t r = waitpid(pids[i], &st, WNOHANG);
            if (r == pids[i]) {
                if (killed == 0) {
                    status[i] =
                        WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                }
                good += status[i] == 0;
                pids[i] = 0;
                left--;
            }
        }
        if (left == 0) {
            return good;
        }
        if (proc_now() > deadline) {
            int sig = killed == 0 ? SIGTERM : SIGKILL;
            for (int i = 0; i < n; i++) {
                if (pids[i] > 0) {
                    fprintf(stderr,
                            "moshpit-bench: child %d (pid %ld) still "
                            "running at the deadline, sending %s\n",
                            i, (long)pids[i],
                            sig == SIGTERM ? "SIGTERM" : "SIGKILL");
                    (void)kill(pids[i], sig);
                }
            }
            killed++;
            deadline = proc_now() + 5.0;
        }
        proc_sleep_ms(10);
    }
}

/*
 * Waits until the child has sent a full line (returned in line), the deadline
 * passes or its pipe closes. Returns 0 with a line, -1 otherwise.
 */
int proc_read_line(proc_line_reader_t *lr, char *line, size_t cap,
                   double deadline) {
    for (;;) {
        char *nl = memchr(lr->buf, '\n', lr->len);
        if (nl != NULL) {
            size_t n = (size_t)(nl - lr->buf);
            size_t c = n < cap - 1 ? n : cap - 1;
            memcpy(line, lr->buf, c);
            line[c] = '\0';
            memmove(lr->buf, nl + 1, lr->len - n - 1);
            lr->len -= n + 1;
            return 0;
        }
        if (lr->eof || lr->len == sizeof(lr->buf)) {
            return -1;
        }
        double left = deadline - proc_now();
        if (left <= 0) {
            return -1;
        }
        struct pollfd p = {lr->fd, POLLIN, 0};
        int r = poll(&p, 1, left > 1.0 ? 1000 : (int)(left * 1000) + 1);
        if (r < 0 && errno != EINTR) {
            return -1;
        }
        if (r > 0) {
            ssize_t got =
                read(lr->fd, lr->buf + lr->len, sizeof(lr->buf) - lr->len);
            if (got > 0) {
                lr->len += (size_t)got;
            } else if (got == 0 || errno != EINTR) {
                lr->eof = 1;
            }
        }
    }
}
