/* SPDX-License-Identifier: MIT */
/*
 * netns.c - the network-namespace test bed (see netns.h). Namespaces are
 * made with `ip netns add` and removed the way `ip netns del` does it
 * (detach the bind mount under /run/netns, unlink it), which needs no
 * helper process and so also works from a signal handler. Deleting the
 * switch namespace deletes the bridge and the veth pairs with it; a peer
 * namespace disappears once its last process has exited. Tools run in a
 * namespace through setns() in a forked child, so `ip netns exec`'s sysfs
 * remount is not needed.
 */
#include "netns.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define NETNS_DIR "/run/netns/"
#define NAME_MAX_LEN 48

/* What the signal handler may read: the names, and how many exist. */
static char g_names[NN_MAX_PEERS + 1][NAME_MAX_LEN];
static volatile sig_atomic_t g_count;
static size_t g_peers;
static char g_switch[NAME_MAX_LEN];
static pid_t g_owner;
/* the signals whose default action would leave the bed behind */
static const int g_sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGABRT};
#define NSIGS (sizeof(g_sigs) / sizeof(g_sigs[0]))

static void peer_ns(size_t i, char *buf, size_t len) {
    snprintf(buf, len, "mpt%d-p%zu", (int)g_owner, i);
}

/* ---- running tools ---- */

/* Runs argv (searched in PATH) inside namespace ns (NULL: the caller's),
 * with `input` on its stdin if non-NULL; stdout is discarded, stderr kept
 * only when loud. Returns the exit status, or -1. */
static int run(const char *ns, const char *input, int loud,
               const char *const *argv) {
    int in[2] = {-1, -1};
    if (input != NULL && pipe(in) != 0)
        return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        if (input != NULL) {
            dup2(in[0], 0);
            close(in[0]);
            close(in[1]);
        } else if (null >= 0) {
            dup2(null, 0);
        }
        if (null >= 0) {
            dup2(null, 1);
            if (!loud)
                dup2(null, 2);
        }
        if (ns != NULL) {
            char path[sizeof(NETNS_DIR) + NAME_MAX_LEN];
            snprintf(path, sizeof(path), NETNS_DIR "%s", ns);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0 || setns(fd, CLONE_NEWNET) != 0)
                _exit(126);
        }
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    if (input != NULL) {
        close(in[0]);
        size_t len = strlen(input), off = 0;
        while (off < len) {
            ssize_t w = write(in[1], input + off, len - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                break;
            off += (size_t)w;
        }
        close(in[1]);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* `ip -n ns` + words split at spaces (ns NULL: no -n). Loud; 0 or -1. */
static int ip(const char *ns, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int ip(const char *ns, const char *fmt, ...) {
    char line[512];
    const char *argv[40];
    int argc = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    argv[argc++] = "ip";
    if (ns != NULL) {
        argv[argc++] = "-n";
        argv[argc++] = ns;
    }
    for (char *save = NULL, *w = strtok_r(line, " ", &save);
         w != NULL && argc < 39; w = strtok_r(NULL, " ", &save))
        argv[argc++] = w;
    argv[argc] = NULL;
    int rc = run(NULL, NULL, 1, argv);
    if (rc != 0)
        fprintf(stderr, "netns: `ip %s%s ...` failed (%d)\n", ns ? "-n " : "",
                ns ? ns : "", rc);
    return rc == 0 ? 0 : -1;
}

static int nft(const char *ns, const char *script) {
    const char *argv[] = {"nft", "-f", "-", NULL};
    int rc = run(ns, script, 1, argv);
    if (rc != 0)
        fprintf(stderr, "netns: nft in %s failed (%d) on:\n%s\n", ns, rc,
                script);
    return rc == 0 ? 0 : -1;
}

/* ---- teardown ---- */

static void remove_ns(const char *name) {
    char path[sizeof(NETNS_DIR) + NAME_MAX_LEN];
    /* snprintf is not async-signal-safe: build the path by hand */
    size_t k = 0;
    for (const char *s = NETNS_DIR; *s; s++)
        path[k++] = *s;
    for (const char *s = name; *s && k + 1 < sizeof(path); s++)
        path[k++] = *s;
    path[k] = '\0';
    umount2(path, MNT_DETACH);
    unlink(path);
}

void nn_close(void) {
    if (g_owner != getpid())
        return; /* a forked child (peer or tool) never tears down */
    while (g_count > 0) {
        g_count--;
        remove_ns(g_names[g_count]);
    }
}

static void on_signal(int sig) {
    nn_close();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Whether process pid is gone: no such process, or a zombie nobody has
 * reaped yet (a test killed with SIGKILL whose parent exited). */
static int pid_gone(int pid) {
    char path[64], buf[256];
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 1;
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')');
    return paren != NULL && paren[1] == ' ' && paren[2] == 'Z';
}

/* Removes mpt<pid>-* namespaces whose pid no longer exists. */
static void remove_leftovers(void) {
    DIR *d = opendir(NETNS_DIR);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int pid = 0, used = 0;
        if (sscanf(e->d_name, "mpt%d-%n", &pid, &used) != 1 || used == 0 ||
            pid <= 0 || strlen(e->d_name) >= NAME_MAX_LEN)
            continue;
        if (pid_gone(pid)) {
            fprintf(stderr, "netns: removing leftover namespace %s\n",
                    e->d_name);
            remove_ns(e->d_name);
        }
    }
    closedir(d);
}

/* ---- setup ---- */

static void skip(const char *why) {
    printf("SKIP: %s\n", why);
    fflush(stdout);
    nn_close();
    exit(NN_SKIP);
}

static void fail(const char *what) {
    fprintf(stderr, "FAIL: netns setup: %s\n", what);
    nn_close();
    exit(1);
}

static int add_ns(const char *name) {
    if (ip(NULL, "netns add %s", name) != 0)
        return -1;
    snprintf(g_names[g_count], NAME_MAX_LEN, "%s", name);
    g_count++;
    return 0;
}

static int have_tool(const char *tool, const char *arg) {
    const char *argv[] = {tool, arg, NULL};
    return run(NULL, NULL, 0, argv) == 0;
}

/* veths keep GSO off, so a dropped packet is one MTU-sized packet, as on a
 * real link, not a 64 KiB super-packet. */
static int add_peer(size_t i) {
    char ns[NAME_MAX_LEN];
    peer_ns(i, ns, sizeof(ns));
    if (add_ns(ns) != 0 ||
        ip(g_switch, "link add v%zu type veth peer name eth0 netns %s", i,
           ns) != 0 ||
        ip(g_switch, "link set v%zu gso_max_segs 1 gso_max_size 1500", i) !=
            0 ||
        ip(g_switch, "link set v%zu master br0 up", i) != 0 ||
        ip(ns, "link set eth0 gso_max_segs 1 gso_max_size 1500") != 0 ||
        ip(ns, "addr add 10.77.0.%zu/24 dev eth0", i + 1) != 0 ||
        ip(ns, "link set eth0 up") != 0 || ip(ns, "link set lo up") != 0)
        return -1;
    return 0;
}

void nn_open(size_t n) {
    if (n == 0 || n > NN_MAX_PEERS)
        fail("peer count out of range");
    if (geteuid() != 0)
        skip("the netns test bed needs root (network namespaces, nftables, "
             "tc)");
    if (!have_tool("ip", "-V") || !have_tool("tc", "-V"))
        skip("`ip` and `tc` not found (install iproute2)");
    if (!have_tool("nft", "--version"))
        skip("`nft` not found (install nftables)");
    g_owner = getpid();
    remove_leftovers();
    atexit(nn_close);
    for (size_t k = 0; k < NSIGS; k++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(g_sigs[k], &sa, NULL);
    }
    snprintf(g_switch, sizeof(g_switch), "mpt%d-sw", (int)g_owner);
    if (add_ns(g_switch) != 0)
        skip("cannot create a network namespace (`ip netns add` failed: "
             "no CAP_SYS_ADMIN, or a container without /run/netns?)");
    if (ip(g_switch, "link add br0 type bridge") != 0 ||
        ip(g_switch, "link set br0 up") != 0)
        skip("cannot create a bridge in a network namespace");
    if (nft(g_switch, "table inet mpt_probe { chain c { type filter hook "
                      "input priority 0; policy accept; }; }\n") != 0)
        skip("nftables does not work here (kernel without nf_tables?)");
    const char *tbf[] = {"tc",    "qdisc",   "add",  "dev",     "br0",
                         "root",  "tbf",     "rate", "100mbit", "burst",
                         "100kb", "latency", "50ms", NULL};
    if (run(g_switch, NULL, 1, tbf) != 0)
        skip("tc qdisc tbf does not work here (kernel without sch_tbf?)");
    g_peers = n;
    for (size_t i = 0; i < n; i++)
        if (add_peer(i) != 0)
            fail("creating a peer namespace failed (see above)");
}

/* ---- the peer side ---- */

static int child_init(void *arg, size_t index, moshpit_config_t *cfg) {
    static char listen[64];
    char ns[NAME_MAX_LEN], path[sizeof(NETNS_DIR) + NAME_MAX_LEN];
    (void)arg;
    if (index >= g_peers)
        return -1;
    /* die with the test process; its signal handlers are not ours */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != g_owner)
        return -1;
    for (size_t k = 0; k < NSIGS; k++)
        signal(g_sigs[k], SIG_DFL);
    peer_ns(index, ns, sizeof(ns));
    snprintf(path, sizeof(path), NETNS_DIR "%s", ns);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
        fprintf(stderr, "netns: cannot enter %s: %s\n", ns, strerror(errno));
        return -1;
    }
    close(fd);
    snprintf(listen, sizeof(listen), "tcp://10.77.0.%zu:0", index + 1);
    cfg->listen = listen;
    return 0;
}

void nn_use(it_peer_cfg_t *cfg) {
    cfg->child_init = child_init;
    cfg->child_arg = NULL;
}

/* ---- faults ---- */

int nn_loss(size_t i, unsigned in_permille, unsigned out_permille) {
    char ns[NAME_MAX_LEN], script[1024];
    if (i >= g_peers || in_permille > 1000 || out_permille > 1000)
        return -1;
    peer_ns(i, ns, sizeof(ns));
    int k = snprintf(script, sizeof(script),
                     "add table inet mpt\ndelete table inet mpt\n");
    if (in_permille > 0 || out_permille > 0)
        snprintf(script + k, sizeof(script) - (size_t)k,
                 "table inet mpt {\n"
                 " chain loss_in { type filter hook input priority 0;"
                 " policy accept;\n"
                 "  iifname \"eth0\" numgen random mod 1000 < %u drop; }\n"
                 " chain loss_out { type filter hook output priority 0;"
                 " policy accept;\n"
                 "  oifname \"eth0\" numgen random mod 1000 < %u drop; }\n"
                 "}\n",
                 in_permille, out_permille);
    return nft(ns, script);
}

static int tbf(const char *ns, const char *dev, unsigned mbit) {
    char rate[32], burst[32];
    if (mbit == 0) {
        const char *del[] = {"tc", "qdisc", "del", "dev", dev, "root", NULL};
        (void)run(ns, NULL, 0, del); /* none installed is fine */
        return 0;
    }
    /* a bucket of 10 ms of traffic, at least 10 full-size packets */
    unsigned long b = (unsigned long)mbit * 1000000ul / 8ul / 100ul;
    snprintf(rate, sizeof(rate), "%umbit", mbit);
    snprintf(burst, sizeof(burst), "%lu", b < 15140 ? 15140ul : b);
    const char *argv[] = {"tc",   "qdisc",   "replace", "dev", dev,
                          "root", "tbf",     "rate",    rate,  "burst",
                          burst,  "latency", "200ms",   NULL};
    return run(ns, NULL, 1, argv) == 0 ? 0 : -1;
}

int nn_rate(size_t i, unsigned mbit) {
    char ns[NAME_MAX_LEN], veth[32];
    if (i >= g_peers)
        return -1;
    peer_ns(i, ns, sizeof(ns));
    snprintf(veth, sizeof(veth), "v%zu", i);
    /* upload: the peer's egress; download: the switch port's egress */
    return tbf(ns, "eth0", mbit) == 0 && tbf(g_switch, veth, mbit) == 0 ? 0
                                                                        : -1;
}

static void add_set(char *buf, size_t cap, const char *name, const int *side,
                    size_t n, int which) {
    size_t k = strlen(buf);
    k += (size_t)snprintf(buf + k, cap - k,
                          " set %s { type ipv4_addr; elements = { ", name);
    int first = 1;
    for (size_t i = 0; i < n && k < cap; i++)
        if ((side[i] != 0) == which) {
            k += (size_t)snprintf(buf + k, cap - k, "%s10.77.0.%zu",
                                  first ? "" : ", ", i + 1);
            first = 0;
        }
    if (k < cap)
        snprintf(buf + k, cap - k, " }; }\n");
}

int nn_partition(const int *side, size_t n) {
    char script[4096] = "add table bridge mpt\ndelete table bridge mpt\n"
                        "table bridge mpt {\n";
    size_t na = 0;
    for (size_t i = 0; i < n; i++)
        na += side[i] != 0;
    if (n > g_peers || na == 0 || na == n)
        return -1;
    add_set(script, sizeof(script), "a", side, n, 1);
    add_set(script, sizeof(script), "b", side, n, 0);
    size_t k = strlen(script);
    snprintf(script + k, sizeof(script) - k,
             " chain cut { type filter hook forward priority 0;"
             " policy accept;\n"
             "  ip saddr @a ip daddr @b drop;\n"
             "  ip saddr @b ip daddr @a drop; }\n}\n");
    return nft(g_switch, script);
}

int nn_heal(void) {
    return nft(g_switch, "add table bridge mpt\ndelete table bridge mpt\n");
}

long nn_rss_kib(int pid) {
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    long kib = -1;
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}
