/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The node group's files: the per-user directory, the lock file's locks and
 * state area, the listing ibshare_info prints, and the sweeping of the files
 * of dead groups. See ibshare_node_int.h for the lock layout.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* F_OFD_SETLK */
#endif

#include "ibshare_node_int.h"

#include <ucs/debug/log_def.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/string.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>


static void uct_ibshare_lock_fill(struct flock *fl, short type, off_t offset)
{
    memset(fl, 0, sizeof(*fl));
    fl->l_type   = type;
    fl->l_whence = SEEK_SET;
    fl->l_start  = offset;
    fl->l_len    = 1;
}

int uct_ibshare_lock_try(int fd, short type, off_t offset)
{
    struct flock fl;
    int err;

    uct_ibshare_lock_fill(&fl, type, offset);
    if (fcntl(fd, F_OFD_SETLK, &fl) == 0) {
        return 0;
    }

    err = errno;
    if ((err == EAGAIN) || (err == EACCES)) {
        return -EAGAIN;
    }
    ucs_error("fcntl(F_OFD_SETLK, byte %ld) on a node group lock file "
              "failed: %s%s", (long)offset, strerror(err),
              (err == EINVAL) ? " (OFD locks need Linux 3.15 or later)" : "");
    return -err;
}

void uct_ibshare_lock_release(int fd, off_t offset)
{
    struct flock fl;

    uct_ibshare_lock_fill(&fl, F_UNLCK, offset);
    if (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
        ucs_warn("fcntl(F_OFD_SETLK, F_UNLCK, byte %ld) failed: %m",
                 (long)offset);
    }
}

int uct_ibshare_lock_test(int fd, off_t offset)
{
    struct flock fl;
    int err;

    /* A write lock conflicts with any other holder, shared or not */
    uct_ibshare_lock_fill(&fl, F_WRLCK, offset);
    if (fcntl(fd, F_OFD_GETLK, &fl) < 0) {
        err = errno;
        ucs_error("fcntl(F_OFD_GETLK, byte %ld) failed: %s", (long)offset,
                  strerror(err));
        return -err;
    }
    return fl.l_type != F_UNLCK;
}

ucs_status_t uct_ibshare_lock_wait(int fd, short type, off_t offset,
                                   ucs_time_t deadline)
{
    ucs_time_t patient = ucs_get_time() +
                         ucs_time_from_msec(UCT_IBSHARE_WAIT_SHORT_MS);
    int sleep_ms       = 1;
    int ret;

    /* Never F_OFD_SETLKW: it has no timeout, and a holder that stalls must
     * not hang us */
    for (;;) {
        ret = uct_ibshare_lock_try(fd, type, offset);
        if (ret == 0) {
            return UCS_OK;
        } else if (ret != -EAGAIN) {
            return UCS_ERR_IO_ERROR;
        } else if (ucs_get_time() >= deadline) {
            return UCS_ERR_TIMED_OUT;
        }
        poll(NULL, 0, sleep_ms);
        if (ucs_get_time() >= patient) {
            sleep_ms = ucs_min(sleep_ms * 2, UCT_IBSHARE_WAIT_MAX_MS);
        }
    }
}

/* What the user can do about a bad group directory: another user's is not
 * ours to remove */
static const char *uct_ibshare_node_dir_advice(uid_t owner)
{
    if (owner == geteuid()) {
        return "remove it";
    }
    return "set UCX_IBSHARE_RUNTIME_DIR=<a directory of yours> (or have its "
           "owner or root remove it)";
}

/* 1 if dir is a directory of ours that we can create files in */
static int uct_ibshare_node_dir_usable(const char *dir)
{
    struct stat st;

    return (dir != NULL) && (dir[0] == '/') && (stat(dir, &st) == 0) &&
           S_ISDIR(st.st_mode) && (st.st_uid == geteuid()) &&
           (access(dir, W_OK | X_OK) == 0);
}

const char *uct_ibshare_node_runtime_dir(const char *runtime_dir)
{
    const char *xdg;

    if ((runtime_dir == NULL) ||
        strcmp(runtime_dir, UCT_IBSHARE_NODE_RUNTIME_DIR_AUTO)) {
        return runtime_dir;
    }

    /* The same choice in every rank of a job: they share the environment
     * and the uid. One that chose otherwise (the directory went away with
     * the user's last login) founds a group of its own: no sharing, but
     * never two groups on one PD */
    xdg = getenv("XDG_RUNTIME_DIR");
    if (uct_ibshare_node_dir_usable(xdg)) {
        return xdg;
    }
    if ((xdg != NULL) && (xdg[0] != '\0')) {
        ucs_debug("XDG_RUNTIME_DIR=%s is not a writable directory of uid %u; "
                  "the node group uses /tmp", xdg, (unsigned)geteuid());
    }
    return "/tmp";
}

ucs_status_t uct_ibshare_node_dir_open(const char *runtime_dir, int create,
                                       char *path, size_t max, int *fd_p)
{
    uid_t euid = geteuid();
    int created = 0;
    struct stat st;
    int fd;

    runtime_dir = uct_ibshare_node_runtime_dir(runtime_dir);
    if ((runtime_dir == NULL) || (runtime_dir[0] == '\0')) {
        ucs_error("the node group's runtime directory is not set");
        return UCS_ERR_INVALID_PARAM;
    }

    if (snprintf(path, max, "%s/" UCT_IBSHARE_NODE_DIR_PREFIX "%u",
                 runtime_dir, (unsigned)euid) >= (int)max) {
        ucs_error("runtime directory path '%s' is too long", runtime_dir);
        return UCS_ERR_INVALID_PARAM;
    }

    if (create) {
        if (mkdir(path, 0700) == 0) {
            created = 1;
        } else if (errno != EEXIST) {
            ucs_error("cannot create the node group directory %s: %m%s",
                      path, (errno == ENOENT) ?
                      " (does the runtime directory exist?)" : "");
            return UCS_ERR_IO_ERROR;
        }
    }

    /* O_NOFOLLOW: someone else may have put a symlink there before us */
    fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if ((errno == ENOENT) && !create) {
            return UCS_ERR_NO_ELEM;
        } else if ((errno == ELOOP) || (errno == ENOTDIR)) {
            /* O_DIRECTORY reports a symlink as ENOTDIR: tell them apart */
            if (lstat(path, &st) < 0) {
                st.st_mode = 0;
                st.st_uid  = euid;
            }
            ucs_error("%s is %s; it must be a directory of uid %u with mode "
                      "0700, %s", path, S_ISLNK(st.st_mode) ?
                      "a symbolic link" : "not a directory", (unsigned)euid,
                      uct_ibshare_node_dir_advice(st.st_uid));
        } else if ((errno == EACCES) && (lstat(path, &st) == 0) &&
                   (st.st_uid != euid)) {
            /* Squatted: another user made it before us, and kept it shut */
            ucs_error("cannot open the node group directory %s: it is owned "
                      "by uid %u, not by us (uid %u); %s", path,
                      (unsigned)st.st_uid, (unsigned)euid,
                      uct_ibshare_node_dir_advice(st.st_uid));
        } else {
            ucs_error("cannot open the node group directory %s: %m", path);
        }
        return UCS_ERR_IO_ERROR;
    }

    /* mkdir's mode went through the umask; only our own creation is ours
     * to fix, a directory we found is checked as it is */
    if (created && (fchmod(fd, 0700) < 0)) {
        ucs_error("fchmod(%s, 0700) failed: %m", path);
        goto err;
    }

    if (fstat(fd, &st) < 0) {
        ucs_error("fstat(%s) failed: %m", path);
        goto err;
    }
    if (!S_ISDIR(st.st_mode)) {
        ucs_error("%s is not a directory", path);
        goto err;
    }
    if (st.st_uid != euid) {
        ucs_error("%s is owned by uid %u, not by us (uid %u): another user "
                  "could control our node group; %s", path,
                  (unsigned)st.st_uid, (unsigned)euid,
                  uct_ibshare_node_dir_advice(st.st_uid));
        goto err;
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        ucs_error("%s has mode %04o: group or others have access; it must "
                  "be 0700 (chmod 0700 it or remove it)", path,
                  (unsigned)(st.st_mode & 07777));
        goto err;
    }
    if ((st.st_mode & S_IRWXU) != S_IRWXU) {
        ucs_error("%s has mode %04o: we need 0700", path,
                  (unsigned)(st.st_mode & 07777));
        goto err;
    }

    *fd_p = fd;
    return UCS_OK;

err:
    close(fd);
    return UCS_ERR_IO_ERROR;
}

int uct_ibshare_node_is_group_file(const char *name, const char *suffix)
{
    unsigned i;

    for (i = 0; i < UCT_IBSHARE_NODE_NAME_LEN; ++i) {
        if (!(((name[i] >= '0') && (name[i] <= '9')) ||
              ((name[i] >= 'a') && (name[i] <= 'f')))) {
            return 0;
        }
    }
    return !strcmp(name + UCT_IBSHARE_NODE_NAME_LEN, suffix);
}

size_t uct_ibshare_node_state_size(uint32_t num_records)
{
    return sizeof(uct_ibshare_node_state_t) +
           (size_t)num_records * sizeof(uct_ibshare_node_record_t);
}

static ucs_status_t
uct_ibshare_node_state_mmap(int fd, const char *lock_path, size_t size,
                            uct_ibshare_node_state_t **state_p)
{
    void *ptr;

    ptr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (ptr == MAP_FAILED) {
        ucs_error("mmap(%s, %zu bytes) failed: %m", lock_path, size);
        return UCS_ERR_IO_ERROR;
    }

    *state_p = ptr;
    return UCS_OK;
}

ucs_status_t uct_ibshare_node_state_reset(int fd, const char *lock_path,
                                          const uct_ibshare_desc_t *desc,
                                          const char *job_key,
                                          uct_ibshare_node_state_t **state_p,
                                          size_t *size_p)
{
    uint32_t num_records = desc->num_slices + UCT_IBSHARE_STATE_EXTRA_RECORDS;
    size_t size          = uct_ibshare_node_state_size(num_records);
    uct_ibshare_node_state_t *state;
    ucs_status_t status;
    struct stat st;

    if (fstat(fd, &st) < 0) {
        ucs_error("fstat(%s) failed: %m", lock_path);
        return UCS_ERR_IO_ERROR;
    }

    /* Grow only: a reader with an old mapping must never touch a page past
     * the end of the file (SIGBUS) */
    if (((size_t)st.st_size < size) && (ftruncate(fd, size) < 0)) {
        ucs_error("ftruncate(%s, %zu) failed: %m", lock_path, size);
        return UCS_ERR_IO_ERROR;
    }

    status = uct_ibshare_node_state_mmap(fd, lock_path, size, &state);
    if (status != UCS_OK) {
        return status;
    }

    /* A dead group's state, if any, goes now; readers see no magic until
     * the new one is complete */
    __atomic_store_n(&state->magic, 0, __ATOMIC_RELEASE);
    memset(state, 0, size);
    state->version     = UCT_IBSHARE_STATE_VERSION;
    state->header_size = sizeof(*state);
    state->record_size = sizeof(state->records[0]);
    state->num_records = num_records;
    state->num_slices  = desc->num_slices;
    state->mode        = desc->mode;
    state->group_mrs   = (desc->mode == UCT_IBSHARE_GROUP_SHARED) ? 1 : 0;
    state->founder_pid = getpid();
    state->pool_size   = desc->pool_size;
    state->slice_size  = desc->slice_size;
    ucs_strncpy_zero(state->job_key, job_key, sizeof(state->job_key));
    ucs_strncpy_zero(state->dev_name, desc->dev_name,
                     sizeof(state->dev_name));
    __atomic_store_n(&state->magic, UCT_IBSHARE_STATE_MAGIC,
                     __ATOMIC_RELEASE);

    *state_p = state;
    *size_p  = size;
    return UCS_OK;
}

/* Checks a state header (a copy or the mapping); err names the problem */
static int uct_ibshare_node_state_valid(const uct_ibshare_node_state_t *state,
                                        size_t file_size, const char **err)
{
    if (state->magic != UCT_IBSHARE_STATE_MAGIC) {
        *err = "no state magic";
    } else if (state->version != UCT_IBSHARE_STATE_VERSION) {
        *err = "another state version";
    } else if ((state->header_size != sizeof(*state)) ||
               (state->record_size != sizeof(state->records[0]))) {
        *err = "another state layout";
    } else if ((state->num_slices < 1) ||
               (state->num_slices > UCT_IBSHARE_DESC_MAX_SLICES) ||
               (state->num_records !=
                state->num_slices + UCT_IBSHARE_STATE_EXTRA_RECORDS)) {
        *err = "bad record count";
    } else if (file_size < uct_ibshare_node_state_size(state->num_records)) {
        *err = "file shorter than its state";
    } else {
        return 1;
    }
    return 0;
}

ucs_status_t uct_ibshare_node_state_map(int fd, const char *lock_path,
                                        uint32_t num_slices,
                                        uct_ibshare_node_state_t **state_p,
                                        size_t *size_p)
{
    uint32_t num_records = num_slices + UCT_IBSHARE_STATE_EXTRA_RECORDS;
    size_t size          = uct_ibshare_node_state_size(num_records);
    uct_ibshare_node_state_t *state;
    ucs_status_t status;
    const char *err;
    struct stat st;

    if (fstat(fd, &st) < 0) {
        ucs_error("fstat(%s) failed: %m", lock_path);
        return UCS_ERR_IO_ERROR;
    }
    if ((size_t)st.st_size < size) {
        ucs_warn("%s: the group's state is %zu bytes, expected %zu",
                 lock_path, (size_t)st.st_size, size);
        return UCS_ERR_IO_ERROR;
    }

    status = uct_ibshare_node_state_mmap(fd, lock_path, size, &state);
    if (status != UCS_OK) {
        return status;
    }

    if (!uct_ibshare_node_state_valid(state, st.st_size, &err) ||
        (state->num_slices != num_slices)) {
        ucs_warn("%s: the group's state is unusable (%s)", lock_path,
                 (state->num_slices != num_slices) ? "another slice count" :
                 err);
        munmap(state, size);
        return UCS_ERR_IO_ERROR;
    }

    *state_p = state;
    *size_p  = size;
    return UCS_OK;
}

/* Opens a group's lock file for inspection; -1 if it is not a usable one */
static int uct_ibshare_node_open_group(int dir_fd, const char *name,
                                       int flags, struct stat *st)
{
    int fd;

    fd = openat(dir_fd, name, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        return -1;
    }

    if ((fstat(fd, st) < 0) || !S_ISREG(st->st_mode) ||
        (st->st_uid != geteuid())) {
        close(fd);
        return -1;
    }
    return fd;
}

/* 1 if name in dir_fd is (still) the file open as fd */
static int uct_ibshare_node_same_file(int dir_fd, const char *name, int fd)
{
    struct stat st_path, st_fd;

    return (fstatat(dir_fd, name, &st_path, AT_SYMLINK_NOFOLLOW) == 0) &&
           (fstat(fd, &st_fd) == 0) && (st_path.st_dev == st_fd.st_dev) &&
           (st_path.st_ino == st_fd.st_ino);
}

/* Removes the files of the dead groups in dir_fd but keep (NULL: none),
 * reports each to cb (may be NULL); returns how many groups it removed */
static int uct_ibshare_node_sweep_dir(int dir_fd, const char *dir_path,
                                      const char *keep,
                                      void (*cb)(const char *dir_path,
                                                 const char *name, void *arg),
                                      void *arg)
{
    char sock_name[UCT_IBSHARE_NODE_NAME_LEN + 8];
    struct dirent *entry;
    int fd, dup_fd, count = 0;
    struct stat st;
    DIR *dir;

    /* Through the fd whose owner and mode were checked, not a path (not
     * ucs_sys_readdir): in a shared /tmp the name may lead elsewhere now */
    dup_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
    if (dup_fd < 0) {
        return -errno;
    }
    dir = fdopendir(dup_fd);
    if (dir == NULL) {
        count = -errno;
        close(dup_fd);
        return count;
    }

    while ((entry = readdir(dir)) != NULL) {
        if (!uct_ibshare_node_is_group_file(entry->d_name,
                                            UCT_IBSHARE_NODE_LOCK_SUFFIX) ||
            ((keep != NULL) &&
             !strncmp(entry->d_name, keep, UCT_IBSHARE_NODE_NAME_LEN))) {
            continue;
        }

        fd = uct_ibshare_node_open_group(dir_fd, entry->d_name, O_RDWR, &st);
        if (fd < 0) {
            continue;
        }

        /* A group that looks live keeps its locks untouched. Then the last
         * member's protocol: with the join lock (nobody joining) and the
         * members byte (nobody attached), the group is dead and its files
         * are ours to remove; a joiner that opened the file meanwhile finds
         * it unlinked once it gets the join lock, and opens anew */
        if ((uct_ibshare_lock_test(fd, UCT_IBSHARE_LOCK_MEMBERS) == 0) &&
            (uct_ibshare_lock_try(fd, F_WRLCK, UCT_IBSHARE_LOCK_JOIN) == 0) &&
            uct_ibshare_node_same_file(dir_fd, entry->d_name, fd) &&
            (uct_ibshare_lock_try(fd, F_WRLCK, UCT_IBSHARE_LOCK_MEMBERS) ==
             0)) {
            ucs_snprintf_zero(sock_name, sizeof(sock_name), "%.*s%s",
                              UCT_IBSHARE_NODE_NAME_LEN, entry->d_name,
                              UCT_IBSHARE_NODE_SOCK_SUFFIX);
            if ((unlinkat(dir_fd, sock_name, 0) == 0) && (cb != NULL)) {
                cb(dir_path, sock_name, arg);
            }
            if (unlinkat(dir_fd, entry->d_name, 0) == 0) {
                ucs_debug("removed the files of dead group %.*s in %s",
                          UCT_IBSHARE_NODE_NAME_LEN, entry->d_name, dir_path);
                if (cb != NULL) {
                    cb(dir_path, entry->d_name, arg);
                }
                ++count;
            } else {
                ucs_warn("cannot remove %s/%s of a dead group: %m", dir_path,
                         entry->d_name);
            }
        }
        close(fd);
    }
    closedir(dir);
    return count;
}

void uct_ibshare_node_sweep(int dir_fd, const char *dir_path,
                            const char *keep)
{
    uct_ibshare_node_sweep_dir(dir_fd, dir_path, keep, NULL, NULL);
}

/* For the readers of a user's groups (list, clean): 1 with the user's
 * directory open, 0 if there is none yet, -EPERM if it is refused (logged) */
static int uct_ibshare_node_dir_find(const char *runtime_dir, char *dir_path,
                                     size_t max, int *dir_fd_p)
{
    ucs_status_t status;

    status = uct_ibshare_node_dir_open(runtime_dir, 0, dir_path, max,
                                       dir_fd_p);
    if (status == UCS_ERR_NO_ELEM) {
        return 0;
    }
    return (status == UCS_OK) ? 1 : -EPERM;
}

int uct_ibshare_node_clean(const char *runtime_dir,
                           void (*cb)(const char *dir_path, const char *name,
                                      void *arg),
                           void *arg)
{
    char dir_path[PATH_MAX];
    int dir_fd, count, ret;

    ret = uct_ibshare_node_dir_find(runtime_dir, dir_path, sizeof(dir_path),
                                    &dir_fd);
    if (ret <= 0) {
        return ret;
    }

    count = uct_ibshare_node_sweep_dir(dir_fd, dir_path, NULL, cb, arg);
    close(dir_fd);
    return count;
}

/* Fills info from one lock file; 0 if the group is dead or unreadable */
static int uct_ibshare_node_read_group(int fd, const struct stat *st,
                                       const char *name,
                                       uct_ibshare_node_group_info_t *info)
{
    uct_ibshare_node_state_t header, *state;
    const uct_ibshare_node_record_t *rec;
    const char *err;
    size_t size;
    uint32_t i;
    int live = 0;

    /* Liveness from the locks only: pids in a dead group's file lie */
    if (uct_ibshare_lock_test(fd, UCT_IBSHARE_LOCK_MEMBERS) != 1) {
        return 0;
    }

    /* read, not mmap: the file may be reset under us, and a read of a
     * changing file gives odd numbers at worst, never a SIGBUS */
    if ((pread(fd, &header, sizeof(header), 0) != sizeof(header)) ||
        !uct_ibshare_node_state_valid(&header, st->st_size, &err)) {
        ucs_debug("%s: live group with an unreadable state", name);
        return 0;
    }

    size  = uct_ibshare_node_state_size(header.num_records);
    state = ucs_malloc(size, "ibshare state");
    if ((state == NULL) || (pread(fd, state, size, 0) != (ssize_t)size) ||
        !uct_ibshare_node_state_valid(state, st->st_size, &err) ||
        (state->num_records != header.num_records)) {
        ucs_free(state);
        return 0;
    }

    memset(info, 0, sizeof(*info));
    ucs_strncpy_zero(info->job_key, state->job_key, sizeof(info->job_key));
    ucs_strncpy_zero(info->dev_name, state->dev_name,
                     sizeof(info->dev_name));
    info->mode       = state->mode;
    info->group_mrs  = state->group_mrs;
    info->mrs_held   = state->group_mrs;
    info->pool_size  = state->pool_size;
    info->slice_size = state->slice_size;
    if (uct_ibshare_lock_test(fd, UCT_IBSHARE_LOCK_SERVER) == 1) {
        info->server_pid = state->server_pid;
    }

    for (i = 0; i < state->num_records; ++i) {
        rec = &state->records[i];
        if (uct_ibshare_lock_test(fd, UCT_IBSHARE_LOCK_RECORD0 + i) != 1) {
            if ((i < state->num_slices) && (rec->pid != 0) &&
                (rec->mode == UCT_IBSHARE_GROUP_SHARED)) {
                ++info->slices_retired;
            }
            continue;
        }
        if (info->num_members < UCT_IBSHARE_DESC_MAX_SLICES) {
            info->member_pids[info->num_members]   = rec->pid;
            info->member_modes[info->num_members]  = rec->mode;
            info->member_slices[info->num_members] =
                (i < state->num_slices) ? i : UCT_IBSHARE_DESC_NO_SLICE;
        }
        ++info->num_members;
        if (i < state->num_slices) {
            ++info->slices_used;
        }
        info->mrs_held     += rec->mrs_held;
        info->regs_done    += rec->regs_done;
        info->regs_avoided += rec->regs_avoided;
        live                = 1;
    }

    ucs_free(state);
    return live;
}

int uct_ibshare_node_list(const char *runtime_dir,
                          void (*cb)(const uct_ibshare_node_group_info_t *info,
                                     void *arg),
                          void *arg)
{
    uct_ibshare_node_group_info_t *info;
    char dir_path[PATH_MAX];
    struct dirent *entry;
    int dir_fd, fd, ret, count = 0;
    struct stat st;
    DIR *dir;

    ret = uct_ibshare_node_dir_find(runtime_dir, dir_path, sizeof(dir_path),
                                    &dir_fd);
    if (ret <= 0) {
        return ret;
    }

    dir = fdopendir(dir_fd);    /* the checked fd (see sweep_dir) */
    if (dir == NULL) {
        count = -errno;
        close(dir_fd);
        return count;
    }

    /* member_pids makes it large: not for the stack */
    info = ucs_malloc(sizeof(*info), "ibshare group info");
    if (info == NULL) {
        closedir(dir);
        return -ENOMEM;
    }

    while ((entry = readdir(dir)) != NULL) {
        if (!uct_ibshare_node_is_group_file(entry->d_name,
                                            UCT_IBSHARE_NODE_LOCK_SUFFIX)) {
            continue;
        }

        /* Read-only: a lister takes no lock, so it cannot disturb a group */
        fd = uct_ibshare_node_open_group(dirfd(dir), entry->d_name, O_RDONLY,
                                         &st);
        if (fd < 0) {
            continue;
        }
        if (uct_ibshare_node_read_group(fd, &st, entry->d_name, info)) {
            cb(info, arg);
            ++count;
        }
        close(fd);
    }

    ucs_free(info);
    closedir(dir);
    return count;
}
