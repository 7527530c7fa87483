/*
 * rexec - the remote execution of the multi-node test bed (contrib/vm/run
 * --nodes N), in place of sshd and ssh, which the guests do not have.
 *
 *   rexec serve ADDR PORT
 *       listen on ADDR:PORT (the guest's link address, so that only the
 *       guests' link reaches it); for each connection run the command it
 *       sends with /bin/sh -c, in a session of its own, stdin /dev/null, and
 *       send back its stdout, stderr and exit status.  The command is killed
 *       (its process group, SIGTERM then SIGKILL) when the client goes away.
 *   rexec run [-w SEC] HOST PORT CMD...
 *       run CMD (its words joined by spaces, as ssh does) on HOST, in the
 *       current directory if HOST has it (the shared directory does), else
 *       in /; copy its stdout and stderr to ours and exit with its status
 *       (128 + N when a signal N ended it, 255 when the connection failed).
 *       -w SEC: retry the connection for up to SEC seconds.
 *
 * Protocol, over one TCP connection: the client sends a 4-byte length (big
 * endian) and "CWD\0CMD\0"; the server sends frames of a type byte ('1'
 * stdout, '2' stderr, 'x' exit status), a 4-byte length and the data (for
 * 'x': the status, 4 bytes), and closes.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REQ_MAX   (1 << 20)
#define CHUNK     65536

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    ssize_t n;

    while (len > 0) {
        n = write(fd, p, len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return -1;
        }
        p   += n;
        len -= (size_t)n;
    }
    return 0;
}

/* 1: all read; 0: EOF first; -1: error */
static int read_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    ssize_t n;

    while (len > 0) {
        n = read(fd, p, len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return n == 0 ? 0 : -1;
        }
        p   += n;
        len -= (size_t)n;
    }
    return 1;
}

static int send_frame(int sock, char type, const void *data, uint32_t len)
{
    char hdr[5];
    uint32_t nlen = htonl(len);

    hdr[0] = type;
    memcpy(hdr + 1, &nlen, 4);
    return (write_all(sock, hdr, 5) || write_all(sock, data, len)) ? -1 : 0;
}

/* ------------------------------------------------------------- server */

static void kill_group(pid_t pid)
{
    int i;

    kill(-pid, SIGTERM);
    for (i = 0; i < 20; ++i) {
        if (waitpid(pid, NULL, WNOHANG) != 0) {
            break;
        }
        usleep(100000);
    }
    kill(-pid, SIGKILL);
}

static int serve_one(int sock)
{
    int out[2], err[2], fd, status, open_fds;
    uint32_t len;
    char *req, *cmd, buf[CHUNK];
    struct pollfd pfd[3];
    pid_t pid;
    ssize_t n;
    int i;

    if (read_all(sock, &len, 4) != 1) {
        return 1;
    }
    len = ntohl(len);
    if ((len < 2) || (len > REQ_MAX) || ((req = malloc(len + 1)) == NULL) ||
        (read_all(sock, req, len) != 1)) {
        fprintf(stderr, "rexec: bad request (length %u, at most %d)\n", len,
                REQ_MAX);
        return 1;
    }
    req[len] = '\0';
    cmd      = memchr(req, '\0', len);
    if ((cmd == NULL) || (cmd + 1 >= req + len)) {
        fprintf(stderr, "rexec: request without a command\n");
        return 1;
    }
    ++cmd;

    if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) {
        perror("rexec: pipe2");
        return 1;
    }
    pid = fork();
    if (pid < 0) {
        perror("rexec: fork");
        return 1;
    }
    if (pid == 0) {
        setsid();
        signal(SIGPIPE, SIG_DFL);
        fd = open("/dev/null", O_RDONLY);
        if ((fd < 0) || (dup2(fd, 0) < 0) || (dup2(out[1], 1) < 0) ||
            (dup2(err[1], 2) < 0)) {
            _exit(125);
        }
        if (chdir(req) != 0 && chdir("/") != 0) {
            _exit(125);
        }
        execl("/bin/sh", "sh", "-c", cmd, (char*)NULL);
        perror("rexec: exec /bin/sh");
        _exit(127);
    }
    close(out[1]);
    close(err[1]);

    pfd[0].fd     = out[0];
    pfd[1].fd     = err[0];
    pfd[2].fd     = sock;
    for (i = 0; i < 3; ++i) {
        pfd[i].events = POLLIN;
    }
    open_fds = 2;
    while (open_fds > 0) {
        if (poll(pfd, 3, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            break;
        }
        /* The client sends nothing more: readable means it went away */
        if (pfd[2].revents) {
            kill_group(pid);
            return 1;
        }
        for (i = 0; i < 2; ++i) {
            if (pfd[i].fd < 0 || !pfd[i].revents) {
                continue;
            }
            n = read(pfd[i].fd, buf, sizeof(buf));
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n <= 0) {
                close(pfd[i].fd);
                pfd[i].fd = -1;
                --open_fds;
            } else if (send_frame(sock, i ? '2' : '1', buf, (uint32_t)n)) {
                kill_group(pid);
                return 1;
            }
        }
    }
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            status = 255 << 8;
            break;
        }
    }
    status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) :
                                   WEXITSTATUS(status);
    len    = htonl((uint32_t)status);
    send_frame(sock, 'x', &len, 4);
    return 0;
}

static int serve(const char *addr, const char *port)
{
    struct sockaddr_in sin = {.sin_family = AF_INET};
    int lsock, sock, one = 1;
    char *end;
    long p;

    p = strtol(port, &end, 10);
    if (*end || p < 1 || p > 65535 || inet_pton(AF_INET, addr,
                                                &sin.sin_addr) != 1) {
        fprintf(stderr, "rexec: bad address %s:%s (want IPv4 and a port "
                "1..65535)\n", addr, port);
        return 2;
    }
    sin.sin_port = htons((uint16_t)p);
    lsock        = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if ((lsock < 0) ||
        setsockopt(lsock, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
        bind(lsock, (struct sockaddr*)&sin, sizeof(sin)) ||
        listen(lsock, 64)) {
        fprintf(stderr, "rexec: listen on %s:%s: %s\n", addr, port,
                strerror(errno));
        return 1;
    }
    signal(SIGCHLD, SIG_IGN); /* the connection handlers reap themselves */
    signal(SIGPIPE, SIG_IGN);
    for (;;) {
        sock = accept4(lsock, NULL, NULL, SOCK_CLOEXEC);
        if (sock < 0) {
            if (errno != EINTR && errno != ECONNABORTED) {
                perror("rexec: accept");
                usleep(100000);
            }
            continue;
        }
        setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        switch (fork()) {
        case -1:
            perror("rexec: fork");
            break;
        case 0:
            close(lsock);
            /* The command's status must be waited for in here */
            signal(SIGCHLD, SIG_DFL);
            _exit(serve_one(sock));
        }
        close(sock);
    }
}

/* ------------------------------------------------------------- client */

static int connect_to(const char *host, const char *port, int wait_sec)
{
    struct addrinfo hints = {.ai_family   = AF_INET,
                             .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai;
    time_t deadline = time(NULL) + wait_sec;
    int ret, sock, one = 1, err;

    ret = getaddrinfo(host, port, &hints, &ai);
    if (ret != 0) {
        fprintf(stderr, "rexec: cannot resolve %s:%s: %s\n", host, port,
                gai_strerror(ret));
        return -1;
    }
    for (;;) {
        sock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (sock < 0) {
            err = errno;
            break;
        }
        if (connect(sock, ai->ai_addr, ai->ai_addrlen) == 0) {
            setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            freeaddrinfo(ai);
            return sock;
        }
        err = errno;
        close(sock);
        if (time(NULL) >= deadline) {
            break;
        }
        sleep(1);
    }
    fprintf(stderr, "rexec: connect to %s:%s: %s\n", host, port,
            strerror(err));
    freeaddrinfo(ai);
    return -1;
}

static int run(int argc, char **argv)
{
    char cwd[4096], buf[CHUNK], hdr[5];
    size_t len, cwd_len, cmd_len = 0;
    uint32_t nlen, status;
    int sock, wait_sec = 0, i, first;
    char *req, *p;

    if (argc >= 2 && !strcmp(argv[0], "-w")) {
        wait_sec = atoi(argv[1]);
        argc    -= 2;
        argv    += 2;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: rexec run [-w SEC] HOST PORT CMD...\n");
        return 255;
    }
    if (getcwd(cwd, sizeof(cwd)) == NULL) {
        strcpy(cwd, "/");
    }
    for (i = 2; i < argc; ++i) {
        cmd_len += strlen(argv[i]) + 1;
    }
    cwd_len = strlen(cwd) + 1;
    len     = cwd_len + cmd_len;
    if (len > REQ_MAX) {
        fprintf(stderr, "rexec: command of %zu bytes, at most %d\n", len,
                REQ_MAX);
        return 255;
    }
    req = malloc(4 + len);
    if (req == NULL) {
        return 255;
    }
    nlen = htonl((uint32_t)len);
    memcpy(req, &nlen, 4);
    memcpy(req + 4, cwd, cwd_len);
    p     = req + 4 + cwd_len;
    first = 1;
    for (i = 2; i < argc; ++i) {
        if (!first) {
            *p++ = ' ';
        }
        first = 0;
        memcpy(p, argv[i], strlen(argv[i]));
        p += strlen(argv[i]);
    }
    *p = '\0';

    signal(SIGPIPE, SIG_IGN);
    sock = connect_to(argv[0], argv[1], wait_sec);
    if ((sock < 0) || write_all(sock, req, 4 + len)) {
        return 255;
    }
    free(req);
    for (;;) {
        if (read_all(sock, hdr, 5) != 1) {
            fprintf(stderr, "rexec: %s: connection lost before the exit "
                    "status\n", argv[0]);
            return 255;
        }
        memcpy(&nlen, hdr + 1, 4);
        len = ntohl(nlen);
        if (len > sizeof(buf) || (hdr[0] == 'x' && len != 4) ||
            (hdr[0] != 'x' && hdr[0] != '1' && hdr[0] != '2') ||
            read_all(sock, buf, len) != 1) {
            fprintf(stderr, "rexec: %s: bad frame (type 0x%02x, length "
                    "%zu)\n", argv[0], (unsigned char)hdr[0], len);
            return 255;
        }
        if (hdr[0] == 'x') {
            memcpy(&status, buf, 4);
            return (int)(ntohl(status) & 255);
        }
        /* A closed stdout or stderr here is no reason to stop the command */
        (void)write_all(hdr[0] == '1' ? 1 : 2, buf, len);
    }
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "serve")) {
        return serve(argv[2], argv[3]);
    }
    if (argc >= 2 && !strcmp(argv[1], "run")) {
        return run(argc - 2, argv + 2);
    }
    fprintf(stderr, "usage: rexec serve ADDR PORT\n"
            "       rexec run [-w SEC] HOST PORT CMD...\n");
    return 2;
}
