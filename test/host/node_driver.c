/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * Test driver of the node group bootstrap (src/node/ibshare_node.c), with a fake
 * create() and no RDMA: the "pool" is a memfd with a pattern at offset 0,
 * the "cmd_fd" (shared mode) another memfd. Used by test/host/node_*.sh.
 *
 *   node_driver join [options]     join, check, hold, leave
 *     -d DIR     runtime directory             -k KEY   job key ("" none)
 *     -D DEV     device name (fake0)           -t SEC   timeout (10)
 *     -m MODE    fallback|shared (fallback)    -n N     slices (80)
 *     -c FILE    append "create <pid> <key>" when create() runs
 *     -f FAULT   fault from the start (params) -F FAULT fault armed by -A
 *     -C A,B,M   publish registration counters
 *     -S FIFO    wait for EOF on FIFO before joining (start barrier)
 *     -A FIFO    after joining, wait for EOF, then arm -F ("armed" line)
 *     -H FIFO    after joining, wait for EOF before leaving (hold)
 *     -R FIFO    also write the lines to FIFO (the script's barrier)
 *     -G GUID    port GUID, hex (0123456789abcdef), in params and desc
 *     -M         publish the group's mode as this member's, as the
 *                transport does before its first QP (killed in shared
 *                mode, its slice is then retired)
 *     -P sleep   after joining, fork a child that only sleeps (600 s);
 *                prints "forked pid=<child>"
 *     -P leave   after joining, fork a child that leaves the group, closes
 *                its copies of the fds and exits normally; it prints "child
 *                pid=.. last=.. fdleak=..", the parent waits for it and
 *                prints "forked pid=<child> status=<exit status>"
 *   prints "waiting <pid>" (with -S), "joined pid=.. founder=.. slice=..
 *   server=.. mode=.. pattern=<founder pid> cmd=<founder pid>|none fds=ok
 *   retired=<slices retired, -1 without the state>",
 *   "armed <pid>" (with -A) and "left pid=.. last=0|1 slice_ok=1 fdleak=0".
 *   Exit 0, or 1 if joining failed, 2 if a check failed.
 *
 *   node_driver raw SOCK KIND [SEC [KEY [DEV [GUID]]]]
 *                                    send one raw message, print the reply:
 *     KIND: join garbage short magic version type long fds stall, or a
 *     join of another group than KEY DEV GUID (default: none fake0 and
 *     the default GUID): job (KEY + "x"), device (DEV + "x"), guid (+ 1)
 *   node_driver request SOCK [SEC [KEY [DEV [GUID]]]]
 *                                    the joiner's side of a hand-off
 *   node_driver serve SOCK KEY DEV GUID
 *                                    a server that lies: answers one JOIN,
 *                                    whatever it names, with a fallback
 *                                    descriptor of KEY DEV GUID; prints
 *                                    "listening" and "served <pid>"
 *   node_driver flood SOCK N SEC     N connections that say nothing, held
 *                                    until the server closes them or SEC
 *                                    pass: prints "flood N closed M"
 *   node_driver lines N SEC          copy N lines from stdin, byte by byte
 *                                    (so nothing after them is consumed)
 */
#define _GNU_SOURCE
#include "node/ibshare_node.h"
#include "node/ibshare_sock.h"

#include <ucs/sys/sock.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>


#define SLICE_SIZE   65536
#define MAX_FD_SCAN  1024
#define DEFAULT_GUID 0x0123456789abcdefull
#define MAX_FLOOD    1000


typedef struct {
    const char *create_log;
    const char *job_key;
    const char *dev_name;
    uint64_t    port_guid;
    int         shared;
    unsigned    num_slices;
    int         pool_fd;       /* what create() made, founder only */
    int         cmd_fd;
} driver_t;

static int ready_fd = -1;


static void out(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    int len;

    va_start(ap, fmt);
    len = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if ((len < 0) || (len >= (int)sizeof(line) - 1)) {
        len = sizeof(line) - 2;
    }
    line[len++] = '\n';

    /* One write each: lines of concurrent drivers never interleave */
    if (write(STDOUT_FILENO, line, len) != len) {
        exit(3);
    }
    if ((ready_fd >= 0) && (write(ready_fd, line, len) != len)) {
        exit(3);
    }
}

/* The open fds, as a bitmap: compared before joining and after leaving */
static void fd_snapshot(unsigned char *map)
{
    struct dirent *entry;
    DIR *dir;
    int fd;

    memset(map, 0, MAX_FD_SCAN);
    dir = opendir("/proc/self/fd");
    if (dir == NULL) {
        return;
    }
    while ((entry = readdir(dir)) != NULL) {
        fd = atoi(entry->d_name);
        if ((entry->d_name[0] != '.') && (fd != dirfd(dir)) &&
            (fd < MAX_FD_SCAN)) {
            map[fd] = 1;
        }
    }
    closedir(dir);
}

/* The fds open now that were not in before; each is named on stderr */
static int fd_leaks(const unsigned char *before)
{
    unsigned char after[MAX_FD_SCAN];
    int fd, leaks = 0;

    fd_snapshot(after);
    for (fd = 0; fd < MAX_FD_SCAN; ++fd) {
        if (after[fd] && !before[fd]) {
            fprintf(stderr, "node_driver: fd %d leaked\n", fd);
            ++leaks;
        }
    }
    return leaks;
}

/* Reads until EOF: the script releases every reader at once by closing */
static void wait_eof(int fd)
{
    char buf[64];
    ssize_t ret;

    do {
        ret = read(fd, buf, sizeof(buf));
    } while ((ret > 0) || ((ret < 0) && (errno == EINTR)));
}

static int open_fifo(const char *path)
{
    int fd;

    if (path == NULL) {
        return -1;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "node_driver: open(%s): %m\n", path);
        exit(3);
    }
    return fd;
}

static int make_memfd(const char *name, size_t size, const char *pattern)
{
    int fd = memfd_create(name, MFD_CLOEXEC);

    if ((fd < 0) || (ftruncate(fd, size) < 0) ||
        (pwrite(fd, pattern, strlen(pattern) + 1, 0) < 0)) {
        fprintf(stderr, "node_driver: memfd %s: %m\n", name);
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    return fd;
}

static ucs_status_t fake_create(void *arg, uct_ibshare_desc_t *desc,
                                int *cmd_fd_p, int *pool_fd_p)
{
    driver_t *d = arg;
    char pattern[64];
    int fd;

    if (d->create_log != NULL) {
        fd = open(d->create_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                  0644);
        if (fd >= 0) {
            dprintf(fd, "create %d %s\n", (int)getpid(), d->job_key);
            close(fd);
        }
    }

    snprintf(pattern, sizeof(pattern), "ibshare-pool %d", (int)getpid());
    d->pool_fd = make_memfd("ibshare-test-pool",
                            (size_t)d->num_slices * SLICE_SIZE, pattern);
    if (d->pool_fd < 0) {
        return UCS_ERR_NO_MEMORY;
    }
    if (d->shared) {
        snprintf(pattern, sizeof(pattern), "ibshare-cmd %d", (int)getpid());
        d->cmd_fd = make_memfd("ibshare-test-cmd", 4096, pattern);
        if (d->cmd_fd < 0) {
            return UCS_ERR_NO_MEMORY;
        }
    }

    desc->mode       = d->shared ? UCT_IBSHARE_GROUP_SHARED :
                                   UCT_IBSHARE_GROUP_FALLBACK;
    desc->pd_handle  = 0x11;
    desc->mr_handle  = 0x22;
    desc->lkey       = 0x1234;
    desc->rkey       = 0x5678;
    desc->pool_iova  = 0x10000000;
    desc->pool_size  = (uint64_t)d->num_slices * SLICE_SIZE;
    desc->slice_size = SLICE_SIZE;
    desc->num_slices = d->num_slices;
    desc->has_cmd_fd = d->shared;
    desc->port_guid  = d->port_guid;
    desc->port_num   = 1;
    snprintf(desc->dev_name, sizeof(desc->dev_name), "%s", d->dev_name);

    *pool_fd_p = d->pool_fd;
    *cmd_fd_p  = d->cmd_fd;
    return UCS_OK;
}

/* The pid in a pattern written by fake_create(), or -1 */
static int read_pattern(int fd, const char *prefix)
{
    char buf[64];
    ssize_t len;

    len = pread(fd, buf, sizeof(buf) - 1, 0);
    if (len <= 0) {
        return -1;
    }
    buf[len] = '\0';
    if (strncmp(buf, prefix, strlen(prefix))) {
        return -1;
    }
    return atoi(buf + strlen(prefix));
}

static int is_cloexec(int fd)
{
    int flags = fcntl(fd, F_GETFD);

    return (flags >= 0) && (flags & FD_CLOEXEC);
}

static unsigned parse_fault(const char *name)
{
    unsigned i;

    for (i = 0; uct_ibshare_node_fault_names[i] != NULL; ++i) {
        if (!strcmp(name, uct_ibshare_node_fault_names[i])) {
            return i;
        }
    }
    fprintf(stderr, "node_driver: unknown fault '%s'\n", name);
    exit(3);
}

/* -P: the fork of a member that does not exec (a fork-based helper) */
static int fork_child(const char *how, uct_ibshare_node_t *node,
                      int pool_fd, int cmd_fd, const unsigned char *before)
{
    int status, last, leak;
    pid_t pid;

    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "node_driver: fork(): %m\n");
        return 0;
    }

    if (pid == 0) {
        if (!strcmp(how, "sleep")) {
            sleep(600);
            _exit(0);
        }
        /* The caller's leave path, as a module torn down in the child */
        last = uct_ibshare_node_leave(node);
        close(pool_fd);
        if (cmd_fd >= 0) {
            close(cmd_fd);
        }
        leak = fd_leaks(before);
        out("child pid=%d last=%d fdleak=%d", (int)getpid(), last, leak);
        exit((!last && !leak) ? 0 : 2);
    }

    if (!strcmp(how, "sleep")) {
        out("forked pid=%d", (int)pid);
        return 1;
    }
    if (waitpid(pid, &status, 0) != pid) {
        fprintf(stderr, "node_driver: waitpid(%d): %m\n", (int)pid);
        return 0;
    }
    out("forked pid=%d status=%d", (int)pid,
        WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    return WIFEXITED(status) && (WEXITSTATUS(status) == 0);
}

static int cmd_join(int argc, char **argv)
{
    unsigned char before[MAX_FD_SCAN];
    const char *start = NULL, *arm = NULL, *hold = NULL, *ready = NULL;
    const char *fork_how = NULL;
    unsigned long long counters[3] = { 0, 0, 0 };
    uct_ibshare_node_params_t params;
    uct_ibshare_node_member_t member;
    uct_ibshare_node_t *node;
    unsigned arm_fault = UCT_IBSHARE_FAULT_NONE;
    int start_fd, arm_fd, hold_fd, pool_fd, cmd_fd;
    int pattern, cmd_pattern = -1, leak = 0, slice_ok = 1, last, fds_ok;
    int have_counters = 0, fork_ok = 1, publish_mode = 0, opt;
    ucs_status_t status;
    driver_t d;
    uint32_t value;

    memset(&d, 0, sizeof(d));
    memset(&params, 0, sizeof(params));
    d.dev_name        = "fake0";
    d.port_guid       = DEFAULT_GUID;
    d.num_slices      = 80;
    d.pool_fd         = -1;
    d.cmd_fd          = -1;
    d.job_key         = "";
    params.runtime_dir = "/tmp";
    params.timeout     = 10;

    while ((opt = getopt(argc, argv,
                         "d:k:D:t:m:n:c:f:F:C:S:A:H:R:G:P:M")) != -1) {
        switch (opt) {
        case 'd': params.runtime_dir = optarg; break;
        case 'k': d.job_key = optarg; break;
        case 'D': d.dev_name = optarg; break;
        case 't': params.timeout = atof(optarg); break;
        case 'm': d.shared = !strcmp(optarg, "shared"); break;
        case 'n': d.num_slices = atoi(optarg); break;
        case 'c': d.create_log = optarg; break;
        case 'f': params.fault = parse_fault(optarg); break;
        case 'F': arm_fault = parse_fault(optarg); break;
        case 'C':
            have_counters = sscanf(optarg, "%llu,%llu,%llu", &counters[0],
                                   &counters[1], &counters[2]) == 3;
            break;
        case 'S': start = optarg; break;
        case 'A': arm = optarg; break;
        case 'H': hold = optarg; break;
        case 'R': ready = optarg; break;
        case 'G': d.port_guid = strtoull(optarg, NULL, 16); break;
        case 'M': publish_mode = 1; break;
        case 'P':
            if (strcmp(optarg, "sleep") && strcmp(optarg, "leave")) {
                fprintf(stderr, "node_driver: -P sleep|leave, not '%s'\n",
                        optarg);
                return 3;
            }
            fork_how = optarg;
            break;
        default:
            return 3;
        }
    }

    /* Every fifo is open before the script hears from us, so it may close
     * its end whenever it likes after that */
    start_fd = open_fifo(start);
    arm_fd   = open_fifo(arm);
    hold_fd  = open_fifo(hold);
    if (ready != NULL) {
        ready_fd = open(ready, O_WRONLY | O_CLOEXEC);
        if (ready_fd < 0) {
            fprintf(stderr, "node_driver: open(%s): %m\n", ready);
            return 3;
        }
    }
    if (start_fd >= 0) {
        out("waiting %d", (int)getpid());
        wait_eof(start_fd);
    }

    fd_snapshot(before);

    params.job_key  = d.job_key;
    params.dev_name  = d.dev_name;
    params.port_guid = d.port_guid;
    params.create    = fake_create;
    params.arg      = &d;
    status = uct_ibshare_node_join(&params, &node, &member);
    if (status != UCS_OK) {
        /* What create() made is ours to close; nothing else may be open */
        if (d.pool_fd >= 0) {
            close(d.pool_fd);
        }
        if (d.cmd_fd >= 0) {
            close(d.cmd_fd);
        }
        out("failed pid=%d founder=%d status=%s fdleak=%d", (int)getpid(),
            member.founder, ucs_status_string(status),
            fd_leaks(before));
        return 1;
    }

    /* The fds must be the founder's files: read back its patterns */
    pool_fd = member.founder ? d.pool_fd : member.pool_fd;
    cmd_fd  = member.founder ? d.cmd_fd : member.cmd_fd;
    pattern = read_pattern(pool_fd, "ibshare-pool ");
    if (d.shared) {
        cmd_pattern = read_pattern(cmd_fd, "ibshare-cmd ");
    }
    fds_ok = (pattern > 0) && (d.shared ? (cmd_pattern == pattern) :
                                          (cmd_fd == -1)) &&
             (member.founder ||
              ((member.pool_fd >= 0) && is_cloexec(member.pool_fd) &&
               (!d.shared || is_cloexec(member.cmd_fd))));

    /* Our pid in our slice: read back before leaving, it shows that no
     * one else was handed the same slice */
    value = getpid();
    if ((member.desc.slice != UCT_IBSHARE_DESC_NO_SLICE) &&
        (pwrite(pool_fd, &value, sizeof(value),
                (off_t)member.desc.slice * SLICE_SIZE + 64) !=
         sizeof(value))) {
        slice_ok = 0;
    }

    if (have_counters) {
        uct_ibshare_node_set_counters(node, counters[0], counters[1],
                                      counters[2]);
    }
    if (publish_mode) {
        uct_ibshare_node_set_mode(node, member.desc.mode);
    }

    out("joined pid=%d founder=%d slice=%d server=%u mode=%s pattern=%d "
        "cmd=%d fds=%s retired=%d", (int)getpid(), member.founder,
        (member.desc.slice == UCT_IBSHARE_DESC_NO_SLICE) ? -1 :
        (int)member.desc.slice, member.desc.server_pid,
        uct_ibshare_group_mode_str(member.desc.mode), pattern, cmd_pattern,
        fds_ok ? "ok" : "BAD", uct_ibshare_node_slices_retired(node));

    if (fork_how != NULL) {
        fork_ok = fork_child(fork_how, node, pool_fd, cmd_fd, before);
    }

    if (arm_fd >= 0) {
        wait_eof(arm_fd);
        uct_ibshare_node_set_fault(node, arm_fault);
        out("armed %d", (int)getpid());
    }
    if (hold_fd >= 0) {
        wait_eof(hold_fd);
    }

    if ((member.desc.slice != UCT_IBSHARE_DESC_NO_SLICE) &&
        ((pread(pool_fd, &value, sizeof(value),
                (off_t)member.desc.slice * SLICE_SIZE + 64) !=
          sizeof(value)) || (value != (uint32_t)getpid()))) {
        slice_ok = 0;
    }

    last = uct_ibshare_node_leave(node);
    if (member.founder) {
        close(d.pool_fd);
        if (d.cmd_fd >= 0) {
            close(d.cmd_fd);
        }
    } else {
        close(member.pool_fd);
        if (member.cmd_fd >= 0) {
            close(member.cmd_fd);
        }
    }

    leak = fd_leaks(before);
    out("left pid=%d last=%d slice_ok=%d fdleak=%d", (int)getpid(), last,
        slice_ok, leak);
    ucs_close_fd(&start_fd);
    ucs_close_fd(&arm_fd);
    ucs_close_fd(&hold_fd);
    ucs_close_fd(&ready_fd);
    return (fds_ok && slice_ok && !leak && fork_ok) ? 0 : 2;
}

static int raw_connect(const char *path)
{
    struct sockaddr_un addr;
    int fd;

    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if ((fd < 0) || (connect(fd, (struct sockaddr*)&addr, sizeof(addr)) < 0)) {
        printf("connect failed: %m\n");
        exit(1);
    }
    return fd;
}

/* The group named by argv[first..]: KEY DEV GUID, each optional */
static void parse_ident(int argc, char **argv, int first,
                        uct_ibshare_ident_t *ident)
{
    memset(ident, 0, sizeof(*ident));
    ident->job_hash  = uct_ibshare_job_hash((argc > first) ? argv[first] :
                                            "none");
    snprintf(ident->dev_name, sizeof(ident->dev_name), "%s",
             (argc > first + 1) ? argv[first + 1] : "fake0");
    ident->port_guid = (argc > first + 2) ?
                       strtoull(argv[first + 2], NULL, 16) : DEFAULT_GUID;
}

static int cmd_raw(int argc, char **argv)
{
    const char *path = argv[1], *kind = argv[2];
    double seconds   = (argc > 3) ? atof(argv[3]) : 5;
    uct_ibshare_ident_t ident;
    char other_key[256];
    uint8_t buf[512];
    int fds[UCT_IBSHARE_SOCK_MAX_FDS];
    uct_ibshare_msg_t msg;
    uct_ibshare_desc_t desc;
    unsigned nfds = 0, i;
    ucs_status_t status;
    char err[256];
    size_t length;
    int fd, extra_fd = -1;

    parse_ident(argc, argv, 4, &ident);
    if (!strcmp(kind, "job")) {
        snprintf(other_key, sizeof(other_key), "%sx",
                 (argc > 4) ? argv[4] : "none");
        ident.job_hash = uct_ibshare_job_hash(other_key);
    } else if (!strcmp(kind, "device")) {
        strncat(ident.dev_name, "x",
                sizeof(ident.dev_name) - strlen(ident.dev_name) - 1);
    } else if (!strcmp(kind, "guid")) {
        ident.port_guid += 1;
    }

    fd     = raw_connect(path);
    length = uct_ibshare_msg_pack_join(buf, sizeof(buf), getpid(),
                                       geteuid(), &ident);
    if (!strcmp(kind, "garbage")) {
        for (i = 0; i < 64; ++i) {
            buf[i] = (uint8_t)rand();
        }
        length = 64;
    } else if (!strcmp(kind, "short")) {
        length = 6;
    } else if (!strcmp(kind, "magic")) {
        buf[0] ^= 0xff;
    } else if (!strcmp(kind, "version")) {
        buf[4] = 99; /* the version field, after the 32-bit magic */
    } else if (!strcmp(kind, "type")) {
        memset(&desc, 0, sizeof(desc));
        desc.mode       = UCT_IBSHARE_GROUP_FALLBACK;
        desc.pool_size  = desc.slice_size = 4096;
        desc.num_slices = 1;
        desc.server_pid = getpid();
        desc.port_num   = 1;
        strcpy(desc.dev_name, "x");
        length = uct_ibshare_msg_pack_desc(buf, sizeof(buf), &desc);
    } else if (!strcmp(kind, "long")) {
        memset(buf + length, 0, sizeof(buf) - length);
        length = 300;
    } else if (!strcmp(kind, "fds")) {
        extra_fd = memfd_create("ibshare-test-extra", MFD_CLOEXEC);
    } else if (!strcmp(kind, "stall")) {
        length = 0;
    } else if (strcmp(kind, "join") && strcmp(kind, "job") &&
               strcmp(kind, "device") && strcmp(kind, "guid")) {
        fprintf(stderr, "node_driver: unknown kind '%s'\n", kind);
        return 3;
    }

    if (length > 0) {
        status = uct_ibshare_sock_send(fd, buf, length, &extra_fd,
                                       extra_fd >= 0, ucs_get_time() +
                                       ucs_time_from_sec(seconds));
        /* A server that refuses closes at once, maybe before our
         * message: its answer may still be waiting */
        if (status != UCS_OK) {
            printf("send failed: %s\n", ucs_status_string(status));
        }
    }
    if (extra_fd >= 0) {
        close(extra_fd);
    }

    status = uct_ibshare_sock_recv(fd, buf, UCT_IBSHARE_MSG_MAX, &length, fds,
                                   UCT_IBSHARE_SOCK_MAX_FDS, &nfds,
                                   ucs_get_time() +
                                   ucs_time_from_sec(seconds));
    close(fd);
    if (status == UCS_ERR_CONNECTION_RESET) {
        printf("reply closed\n");
        return 0;
    } else if (status == UCS_ERR_TIMED_OUT) {
        printf("reply timeout\n");
        return 0;
    } else if (status != UCS_OK) {
        printf("reply error %s\n", ucs_status_string(status));
        return 0;
    }
    uct_ibshare_sock_close_fds(fds, nfds);

    if (uct_ibshare_msg_unpack(buf, length, &msg, err, sizeof(err)) !=
        UCS_OK) {
        printf("reply bad: %s\n", err);
    } else if ((msg.type == UCT_IBSHARE_MSG_REFUSE) &&
               (msg.refuse_reason >= UCT_IBSHARE_REFUSE_JOB)) {
        printf("reply refuse %u (%s) job=%016llx dev=%s guid=%016llx\n",
               msg.refuse_reason,
               uct_ibshare_refuse_reason_str(msg.refuse_reason),
               (unsigned long long)msg.refuse_ident.job_hash,
               msg.refuse_ident.dev_name,
               (unsigned long long)msg.refuse_ident.port_guid);
    } else if (msg.type == UCT_IBSHARE_MSG_REFUSE) {
        printf("reply refuse %u\n", msg.refuse_reason);
    } else if (msg.type == UCT_IBSHARE_MSG_DESC) {
        printf("reply desc slice=%d fds=%u\n", (int)msg.desc.slice, nfds);
    } else {
        printf("reply type %u\n", msg.type);
    }
    return 0;
}

static int cmd_request(int argc, char **argv)
{
    double seconds = (argc > 2) ? atof(argv[2]) : 5;
    int fds[UCT_IBSHARE_SOCK_MAX_FDS];
    uct_ibshare_ident_t ident;
    uct_ibshare_msg_t reply;
    ucs_status_t status;
    char err[256] = "";

    parse_ident(argc, argv, 3, &ident);
    status = uct_ibshare_sock_request(AT_FDCWD, argv[1], argv[1], &ident,
                                      ucs_get_time() +
                                      ucs_time_from_sec(seconds), &reply,
                                      fds, err, sizeof(err));
    if (status != UCS_OK) {
        printf("request failed: %s: %s\n", ucs_status_string(status), err);
        return 1;
    }
    uct_ibshare_sock_close_fds(fds, UCT_IBSHARE_SOCK_MAX_FDS);
    printf("request ok type=%u\n", reply.type);
    return 0;
}

static int cmd_serve(int argc, char **argv)
{
    int listen_fd, fd, pool_fd, ret = 1;
    uint8_t buf[UCT_IBSHARE_MSG_MAX];
    uct_ibshare_desc_t desc;
    unsigned nfds;
    size_t length;
    struct pollfd pfd;

    if (uct_ibshare_sock_listen(AT_FDCWD, argv[1], argv[1], &listen_fd) !=
        UCS_OK) {
        return 1;
    }
    printf("listening\n");
    fflush(stdout);

    pfd.fd     = listen_fd;
    pfd.events = POLLIN;
    if ((poll(&pfd, 1, 10000) != 1) ||
        ((fd = accept(listen_fd, NULL, NULL)) < 0)) {
        fprintf(stderr, "node_driver serve: nobody came: %m\n");
        goto out;
    }
    if (uct_ibshare_sock_recv(fd, buf, sizeof(buf), &length, NULL, 0, &nfds,
                              ucs_get_time() + ucs_time_from_sec(5)) !=
        UCS_OK) {
        close(fd);
        goto out;
    }

    memset(&desc, 0, sizeof(desc));
    desc.mode       = UCT_IBSHARE_GROUP_FALLBACK;
    desc.pool_iova  = 0x10000000;
    desc.pool_size  = desc.slice_size = SLICE_SIZE;
    desc.num_slices = 1;
    desc.server_pid = getpid();
    desc.port_num   = 1;
    desc.port_guid  = strtoull(argv[4], NULL, 16);
    desc.job_hash   = uct_ibshare_job_hash(argv[2]);
    snprintf(desc.dev_name, sizeof(desc.dev_name), "%s", argv[3]);
    length  = uct_ibshare_msg_pack_desc(buf, sizeof(buf), &desc);
    pool_fd = make_memfd("ibshare-test-liar", SLICE_SIZE, "liar");
    if ((length > 0) && (pool_fd >= 0) &&
        (uct_ibshare_sock_send(fd, buf, length, &pool_fd, 1,
                               ucs_get_time() + ucs_time_from_sec(5)) ==
         UCS_OK)) {
        printf("served %d\n", (int)getpid());
        ret = 0;
    }
    if (pool_fd >= 0) {
        close(pool_fd);
    }
    /* Until the joiner has read it: closing first could reset the
     * connection before the descriptor is read */
    poll(&(struct pollfd){ .fd = fd, .events = POLLIN }, 1, 5000);
    close(fd);
out:
    close(listen_fd);
    unlink(argv[1]);
    return ret;
}

static int cmd_flood(int argc, char **argv)
{
    int count = atoi(argv[2]), i, open_count, closed = 0;
    ucs_time_t deadline = ucs_get_time() + ucs_time_from_sec(atof(argv[3]));
    struct pollfd pfds[MAX_FLOOD];
    char c;

    if ((count < 1) || (count > MAX_FLOOD)) {
        fprintf(stderr, "node_driver flood: N %d is not in 1..%d\n", count,
                MAX_FLOOD);
        return 3;
    }
    for (i = 0; i < count; ++i) {
        pfds[i].fd      = raw_connect(argv[1]);
        pfds[i].events  = POLLIN;
        pfds[i].revents = 0;
    }

    /* Each one counts once, when the server closes it */
    open_count = count;
    while ((open_count > 0) &&
           (poll(pfds, count, uct_ibshare_sock_ms_left(deadline)) > 0)) {
        for (i = 0; i < count; ++i) {
            if ((pfds[i].fd < 0) || !pfds[i].revents) {
                continue;
            }
            if (read(pfds[i].fd, &c, 1) <= 0) {
                ++closed;
            }
            close(pfds[i].fd);
            pfds[i].fd = -1;
            --open_count;
        }
    }
    for (i = 0; i < count; ++i) {
        if (pfds[i].fd >= 0) {
            close(pfds[i].fd);
        }
    }
    printf("flood %d closed %d\n", count, closed);
    return 0;
}

static int cmd_lines(int argc, char **argv)
{
    int count = atoi(argv[1]);
    ucs_time_t deadline = ucs_get_time() + ucs_time_from_sec(atof(argv[2]));
    struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
    char c;

    while (count > 0) {
        if (poll(&pfd, 1, uct_ibshare_sock_ms_left(deadline)) <= 0) {
            fprintf(stderr, "node_driver lines: %d line(s) missing after %s "
                    "s\n", count, argv[2]);
            return 1;
        }
        if (read(STDIN_FILENO, &c, 1) != 1) {
            fprintf(stderr, "node_driver lines: EOF, %d line(s) missing\n",
                    count);
            return 1;
        }
        if (write(STDOUT_FILENO, &c, 1) != 1) {
            return 1;
        }
        count -= (c == '\n');
    }
    return 0;
}

int main(int argc, char **argv)
{
    if ((argc >= 2) && !strcmp(argv[1], "join")) {
        return cmd_join(argc - 1, argv + 1);
    } else if ((argc >= 4) && !strcmp(argv[1], "raw")) {
        return cmd_raw(argc - 1, argv + 1);
    } else if ((argc >= 3) && !strcmp(argv[1], "request")) {
        return cmd_request(argc - 1, argv + 1);
    } else if ((argc >= 6) && !strcmp(argv[1], "serve")) {
        return cmd_serve(argc - 1, argv + 1);
    } else if ((argc >= 5) && !strcmp(argv[1], "flood")) {
        return cmd_flood(argc - 1, argv + 1);
    } else if ((argc >= 4) && !strcmp(argv[1], "lines")) {
        return cmd_lines(argc - 1, argv + 1);
    }

    fprintf(stderr, "usage: node_driver join|raw|request|serve|flood|lines "
            "...\n");
    return 3;
}
