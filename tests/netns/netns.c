/* SPDX-License-Identifier: MIT */
/*
 * netns.c - the network-namespace test bed (see netns.h). Namespaces are
 * made with `ip netns add` and removed the way `ip netns del` does it
 * (detach the bind mount under /run/netns, unlink it), which needs no
 * helper process and so also works from a signal handler. Deleting the
 * switch namespace deletes the bridge and the veth pairs with it; a peer
 * namespace disappears once its last process has exited. Tools run in a
 * namespace through setns() in a forked child, so `ip netns exec`'s sysfs
 * remount is not needed. The WAN emulator (nn_link, nn_nat) adds a delay
 * program per peer namespace (nn-delay, started here, killed by nn_close),
 * an iptables NFQUEUE rule and an nftables loss rule in the peer's
 * PREROUTING, and router namespaces for NATs.
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NETNS_DIR "/run/netns/"
#define NAME_MAX_LEN 48

/* What the signal handler may read: the names, and how many exist. */
static char g_names[NN_MAX_PEERS + 1 + NN_MAX_NATS][NAME_MAX_LEN];
static volatile sig_atomic_t g_count;
static size_t g_peers;
static char g_switch[NAME_MAX_LEN];
static pid_t g_owner;
/* delay programs, killed before the namespaces go */
static volatile pid_t g_delay_pid[NN_MAX_PEERS];
/* each peer's address, and where the other end of its veth is */
static char g_addr[NN_MAX_PEERS][20];
static char g_outer_ns[NN_MAX_PEERS][NAME_MAX_LEN];
static char g_outer_dev[NN_MAX_PEERS][16];
static char g_nat_addr[NN_MAX_NATS][20];
static int g_home_fd = -1; /* the test process's own namespace */
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
    for (size_t i = 0; i < NN_MAX_PEERS; i++) {
        pid_t pid = g_delay_pid[i];
        if (pid > 0) {
            g_delay_pid[i] = 0;
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
        }
    }
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
    snprintf(g_addr[i], sizeof(g_addr[i]), "10.77.0.%zu", i + 1);
    snprintf(g_outer_ns[i], sizeof(g_outer_ns[i]), "%s", g_switch);
    snprintf(g_outer_dev[i], sizeof(g_outer_dev[i]), "v%zu", i);
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
    g_home_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
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
    snprintf(listen, sizeof(listen), "tcp://%s:0", g_addr[index]);
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
    char ns[NAME_MAX_LEN];
    if (i >= g_peers)
        return -1;
    peer_ns(i, ns, sizeof(ns));
    /* upload: the peer's egress; download: the egress of the other end of
     * its veth (the switch port, or the NAT router's) */
    return tbf(ns, "eth0", mbit) == 0 &&
                   tbf(g_outer_ns[i], g_outer_dev[i], mbit) == 0
               ? 0
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

/* ---- the WAN emulator ---- */

const char *nn_addr(size_t i) {
    return i < g_peers ? g_addr[i] : "";
}

const char *nn_nat_addr(unsigned nat) {
    return nat < NN_MAX_NATS ? g_nat_addr[nat] : "";
}

static const char *delay_program(void) {
    const char *env = getenv("NN_DELAY_PROGRAM");
    if (env != NULL && env[0] != '\0')
        return env;
#ifdef NN_DELAY_PATH
    return NN_DELAY_PATH;
#else
    return NULL;
#endif
}

/* Whether iptables can add an NFQUEUE rule in namespace ns (and remove
 * it again). */
static int nfqueue_works(const char *ns) {
    const char *add[] = {"iptables",   "-t",          "mangle",  "-A",
                         "PREROUTING", "-i",          "nn-none", "-j",
                         "NFQUEUE",    "--queue-num", "0",       NULL};
    const char *del[] = {"iptables", "-t", "mangle", "-F", "PREROUTING", NULL};
    if (run(ns, NULL, 0, add) != 0)
        return 0;
    (void)run(ns, NULL, 0, del);
    return 1;
}

int nn_can_delay(char *why, size_t cap) {
    const char *prog = delay_program();
    if (prog == NULL || access(prog, X_OK) != 0) {
        snprintf(why, cap,
                 "the delay program nn-delay was not built (install "
                 "libnetfilter-queue-dev and reconfigure)");
        return 0;
    }
    if (!have_tool("iptables", "-V")) {
        snprintf(why, cap, "`iptables` not found (install iptables)");
        return 0;
    }
    if (!have_tool("ethtool", "--version")) {
        snprintf(why, cap, "`ethtool` not found (install ethtool)");
        return 0;
    }
    if (g_count == 0 || !nfqueue_works(g_switch)) {
        snprintf(why, cap,
                 "iptables cannot add an NFQUEUE rule (kernel without "
                 "CONFIG_NETFILTER_XT_TARGET_NFQUEUE or "
                 "CONFIG_NETFILTER_NETLINK_QUEUE?)");
        return 0;
    }
    return 1;
}

static void stop_delay(size_t i) {
    pid_t pid = g_delay_pid[i];
    if (pid > 0) {
        g_delay_pid[i] = 0;
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
}

/* Starts nn-delay in namespace ns and waits for its "ready". */
static pid_t start_delay(const char *ns, unsigned delay_us, unsigned jitter_us,
                         unsigned seed) {
    const char *prog = delay_program();
    char d[16], j[16], sd[16], fdarg[16];
    int p[2];
    if (prog == NULL || pipe(p) != 0)
        return -1;
    snprintf(d, sizeof(d), "%u", delay_us);
    snprintf(j, sizeof(j), "%u", jitter_us);
    snprintf(sd, sizeof(sd), "%u", seed);
    snprintf(fdarg, sizeof(fdarg), "%d", p[1]);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        char path[sizeof(NETNS_DIR) + NAME_MAX_LEN];
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        for (size_t k = 0; k < NSIGS; k++)
            signal(g_sigs[k], SIG_DFL);
        close(p[0]);
        snprintf(path, sizeof(path), NETNS_DIR "%s", ns);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || setns(fd, CLONE_NEWNET) != 0)
            _exit(126);
        const char *argv[] = {prog, "--queue",     "0",   "--delay-us",
                              d,    "--jitter-us", j,     "--seed",
                              sd,   "--ready-fd",  fdarg, NULL};
        execv(prog, (char *const *)argv);
        _exit(127);
    }
    close(p[1]);
    char buf[8] = {0};
    ssize_t got;
    do
        got = read(p[0], buf, sizeof(buf) - 1);
    while (got < 0 && errno == EINTR);
    close(p[0]);
    if (got < 5 || strncmp(buf, "ready", 5) != 0) {
        fprintf(stderr, "netns: nn-delay did not start in %s\n", ns);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    return pid;
}

static int offload(const char *ns, const char *dev, int on) {
    const char *v = on ? "on" : "off";
    const char *argv[] = {"ethtool", "-K", dev,   "tso", v,
                          "gso",     v,    "gro", v,     NULL};
    if (run(ns, NULL, 1, argv) != 0)
        return -1;
    return ip(ns, "link set %s gso_max_segs %s gso_max_size %s", dev,
              on ? "65535" : "1", on ? "65536" : "1500");
}

int nn_link(size_t i, const nn_link_t *l) {
    char ns[NAME_MAX_LEN], script[1024];
    if (i >= g_peers || l->loss_permille > 1000 || l->jitter_us > l->delay_us ||
        (l->offload && l->loss_permille > 0))
        return -1;
    peer_ns(i, ns, sizeof(ns));
    /* packets per MTU on lossy links: both ends of the veth */
    int on = l->offload != 0;
    if (offload(ns, "eth0", on) != 0 ||
        offload(g_outer_ns[i], g_outer_dev[i], on) != 0)
        return -1;
    /* loss: before the delay line (raw priority), so a lost packet is
     * never held */
    int k = snprintf(script, sizeof(script),
                     "add table inet mptw\ndelete table inet mptw\n");
    if (l->loss_permille > 0)
        snprintf(script + k, sizeof(script) - (size_t)k,
                 "table inet mptw {\n"
                 " chain loss { type filter hook prerouting priority -300;"
                 " policy accept;\n"
                 "  iifname \"eth0\" numgen random mod 1000 < %u drop; }\n"
                 "}\n",
                 l->loss_permille);
    if (nft(ns, script) != 0)
        return -1;
    /* delay: the queue rule goes in only once its program listens, and
     * the program goes only after the rule */
    const char *flush[] = {"iptables", "-t",         "mangle",
                           "-F",       "PREROUTING", NULL};
    if (run(ns, NULL, 1, flush) != 0)
        return -1;
    stop_delay(i);
    if (l->delay_us > 0) {
        pid_t pid = start_delay(ns, l->delay_us, l->jitter_us,
                                (unsigned)(g_owner * 31 + (int)i));
        if (pid < 0)
            return -1;
        g_delay_pid[i] = pid;
        const char *add[] = {"iptables",   "-t",          "mangle", "-A",
                             "PREROUTING", "-i",          "eth0",   "-j",
                             "NFQUEUE",    "--queue-num", "0",      NULL};
        if (run(ns, NULL, 1, add) != 0)
            return -1;
    }
    return nn_rate(i, l->rate_mbit);
}

static int sysctl_in(const char *ns, const char *kv) {
    const char *argv[] = {"sysctl", "-q", "-w", kv, NULL};
    return run(ns, NULL, 1, argv) == 0 ? 0 : -1;
}

int nn_nat(unsigned nat, const size_t *peers, size_t k) {
    char r[NAME_MAX_LEN], script[1024];
    if (nat >= NN_MAX_NATS || g_count == 0)
        return -1;
    for (size_t j = 0; j < k; j++)
        if (peers[j] >= g_peers || peers[j] >= 254)
            return -1;
    snprintf(r, sizeof(r), "mpt%d-n%u", (int)g_owner, nat);
    snprintf(g_nat_addr[nat], sizeof(g_nat_addr[nat]), "10.77.0.%u", 201 + nat);
    if (add_ns(r) != 0 ||
        ip(g_switch, "link add n%u type veth peer name wan netns %s", nat, r) !=
            0 ||
        ip(g_switch, "link set n%u master br0 up", nat) != 0 ||
        ip(r, "addr add %s/24 dev wan", g_nat_addr[nat]) != 0 ||
        ip(r, "link set wan up") != 0 || ip(r, "link set lo up") != 0 ||
        ip(r, "link add lan type bridge") != 0 ||
        ip(r, "addr add 10.78.%u.254/24 dev lan", nat) != 0 ||
        ip(r, "link set lan up") != 0 ||
        sysctl_in(r, "net.ipv4.ip_forward=1") != 0)
        return -1;
    /* masquerade what leaves; let in only what belongs to connections
     * opened from inside */
    snprintf(script, sizeof(script),
             "table ip mptnat {\n"
             " chain post { type nat hook postrouting priority 100;"
             " policy accept;\n"
             "  oifname \"wan\" masquerade; }\n"
             " chain gate { type filter hook forward priority 0;"
             " policy drop;\n"
             "  ct state established,related accept;\n"
             "  iifname \"lan\" oifname \"wan\" accept; }\n"
             "}\n");
    if (nft(r, script) != 0)
        return -1;
    for (size_t j = 0; j < k; j++) {
        size_t i = peers[j];
        char ns[NAME_MAX_LEN];
        peer_ns(i, ns, sizeof(ns));
        /* deleting the switch port deletes the peer's eth0 with it */
        if (ip(g_outer_ns[i], "link del %s", g_outer_dev[i]) != 0 ||
            ip(r, "link add l%zu type veth peer name eth0 netns %s", i, ns) !=
                0 ||
            ip(r, "link set l%zu master lan up", i) != 0 ||
            ip(ns, "addr add 10.78.%u.%zu/24 dev eth0", nat, i + 1) != 0 ||
            ip(ns, "link set eth0 up") != 0 ||
            ip(ns, "route add default via 10.78.%u.254", nat) != 0)
            return -1;
        snprintf(g_addr[i], sizeof(g_addr[i]), "10.78.%u.%zu", nat, i + 1);
        snprintf(g_outer_ns[i], sizeof(g_outer_ns[i]), "%s", r);
        snprintf(g_outer_dev[i], sizeof(g_outer_dev[i]), "l%zu", i);
        if (offload(ns, "eth0", 0) != 0 || offload(r, g_outer_dev[i], 0) != 0)
            return -1;
    }
    return 0;
}

int nn_peer_nft(size_t i, const char *script) {
    char ns[NAME_MAX_LEN];
    if (i >= g_peers)
        return -1;
    peer_ns(i, ns, sizeof(ns));
    return nft(ns, script);
}

int nn_nat_nft(unsigned nat, const char *script) {
    char r[NAME_MAX_LEN];
    if (nat >= NN_MAX_NATS || g_nat_addr[nat][0] == '\0')
        return -1;
    snprintf(r, sizeof(r), "mpt%d-n%u", (int)g_owner, nat);
    return nft(r, script);
}

/* Moves the calling thread into the named network namespace. */
static int enter_named(const char *name) {
    char path[sizeof(NETNS_DIR) + NAME_MAX_LEN];
    snprintf(path, sizeof(path), NETNS_DIR "%s", name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = setns(fd, CLONE_NEWNET);
    close(fd);
    return rc == 0 ? 0 : -1;
}

int nn_enter(size_t i) {
    if (i == (size_t)-1)
        return g_home_fd >= 0 && setns(g_home_fd, CLONE_NEWNET) == 0 ? 0 : -1;
    char ns[NAME_MAX_LEN];
    if (i >= g_peers)
        return -1;
    peer_ns(i, ns, sizeof(ns));
    return enter_named(ns);
}

int nn_enter_switch(void) {
    if (g_count == 0)
        return -1;
    return enter_named(g_switch);
}

const char *nn_switch_host(void) {
    static int done;
    if (g_count == 0)
        return NULL;
    if (!done) {
        if (ip(g_switch, "addr add 10.77.0.254/24 dev br0") != 0 ||
            ip(g_switch, "link set lo up") != 0)
            return NULL;
        done = 1;
    }
    return "10.77.0.254";
}

int nn_peer_ns_prefix(char *buf, size_t cap) {
    if (g_count == 0)
        return -1;
    int n = snprintf(buf, cap, NETNS_DIR "mpt%d-p", (int)g_owner);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

int nn_exec_in(const char *prefix, const char *index, char *const argv[]) {
    char path[256];
    size_t k = 0;
    if (prefix == NULL || index == NULL || argv == NULL || argv[0] == NULL ||
        index[0] == '\0' || strlen(index) > 3) {
        errno = EINVAL;
        return -1;
    }
    for (k = 0; index[k] != '\0'; k++)
        if (index[k] < '0' || index[k] > '9') {
            errno = EINVAL;
            return -1;
        }
    int n = snprintf(path, sizeof(path), "%s%s", prefix, index);
    if (n <= 0 || (size_t)n >= sizeof(path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (setns(fd, CLONE_NEWNET) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    close(fd);
    execv(argv[0], argv);
    return -1;
}

int nn_bytes(size_t i, uint64_t *rx, uint64_t *tx) {
    char line[512];
    int found = -1;
    if (nn_enter(i) != 0)
        return -1;
    /* /proc/net follows the reader's network namespace at open */
    FILE *f = fopen("/proc/self/net/dev", "r");
    (void)nn_enter((size_t)-1);
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long long r, t, skip;
        char name[32];
        if (sscanf(line,
                   " %31[^:]: %llu %llu %llu %llu %llu %llu %llu %llu "
                   "%llu",
                   name, &r, &skip, &skip, &skip, &skip, &skip, &skip, &skip,
                   &t) == 10 &&
            strcmp(name, "eth0") == 0) {
            *rx = r;
            *tx = t;
            found = 0;
        }
    }
    fclose(f);
    return found;
}

int nn_reset_tcp(size_t i, const char *filter) {
    char ns[NAME_MAX_LEN], f[512];
    if (i >= NN_MAX_PEERS)
        return -1;
    peer_ns(i, ns, sizeof(ns));
    snprintf(f, sizeof(f), "%s", filter);
    /* ss takes the filter as words: split it at spaces */
    const char *argv[80] = {"ss", "-K", "-t", "state", "established"};
    size_t n = 5;
    for (char *save = NULL, *w = strtok_r(f, " ", &save); w != NULL && n < 79;
         w = strtok_r(NULL, " ", &save))
        argv[n++] = w;
    argv[n] = NULL;
    return run(ns, NULL, 1, argv) == 0 ? 0 : -1;
}
