/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The ledger of a shared-mode member's verbs objects (see ibshare_ledger.h).
 */
#include "ibshare_ledger.h"

#include <ucs/datastruct/khash.h>
#include <ucs/debug/log_def.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/compiler_def.h>
#include <ucs/sys/string.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_ioctl.h>


#define UCT_IBSHARE_LEDGER_MAGIC     0x6c646772u  /* "rgdl" */
#define UCT_IBSHARE_LEDGER_VERSION   1
#define UCT_IBSHARE_LEDGER_MAX_SIZE  (128ul * 1024)
/* A slice smaller than this spares no ledger */
#define UCT_IBSHARE_LEDGER_MIN_SLICE (1ul << 20)


typedef struct uct_ibshare_ledger_entry {
    uint32_t type;         /* uct_ibshare_obj_type_t; NONE: free */
    uint32_t handle;
} uct_ibshare_ledger_entry_t;

/* In shared memory: what a reclaimer reads, checking every field */
typedef struct uct_ibshare_ledger_shared {
    uint32_t                   magic;      /* written last; 0: empty */
    uint32_t                   version;
    uint32_t                   pid;        /* the member's */
    uint32_t                   capacity;   /* entries */
    uint32_t                   high;       /* entries at or past it are
                                              free */
    uint32_t                   unrecorded; /* objects that did not fit */
    uint64_t                   reserved;
    uct_ibshare_ledger_entry_t entries[];
} uct_ibshare_ledger_shared_t;


/* (type, handle) -> entry index */
KHASH_MAP_INIT_INT64(uct_ibshare_ledger_index, uint32_t)

struct uct_ibshare_ledger {
    pthread_mutex_t                lock;
    uct_ibshare_ledger_shared_t    *shared;
    khash_t(uct_ibshare_ledger_index) index;
    uint32_t                       *free;    /* free entries below high */
    uint32_t                       num_free;
    int                            full_warned;
};


static const char *uct_ibshare_obj_names[] = {
    [UCT_IBSHARE_OBJ_NONE] = "none",
    [UCT_IBSHARE_OBJ_QP]   = "QP",
    [UCT_IBSHARE_OBJ_AH]   = "AH",
    [UCT_IBSHARE_OBJ_MR]   = "MR",
    [UCT_IBSHARE_OBJ_SRQ]  = "SRQ",
    [UCT_IBSHARE_OBJ_CQ]   = "CQ"
};


static UCS_F_ALWAYS_INLINE uint64_t
uct_ibshare_ledger_key(uct_ibshare_obj_type_t type, uint32_t handle)
{
    return ((uint64_t)type << 32) | handle;
}

size_t uct_ibshare_ledger_size(size_t slice_size)
{
    return (slice_size < UCT_IBSHARE_LEDGER_MIN_SLICE) ? 0 :
           UCT_IBSHARE_LEDGER_MAX_SIZE;
}

static uint32_t uct_ibshare_ledger_capacity(size_t size)
{
    return (size - sizeof(uct_ibshare_ledger_shared_t)) /
           sizeof(uct_ibshare_ledger_entry_t);
}

ucs_status_t uct_ibshare_ledger_open(void *address, size_t size,
                                     uct_ibshare_ledger_t **ledger_p)
{
    uct_ibshare_ledger_shared_t *shared = address;
    uct_ibshare_ledger_t *ledger;

    if (size <= sizeof(*shared)) {
        return UCS_ERR_INVALID_PARAM;
    }

    ledger = ucs_calloc(1, sizeof(*ledger), "ibshare ledger");
    if (ledger == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    pthread_mutex_init(&ledger->lock, NULL);
    kh_init_inplace(uct_ibshare_ledger_index, &ledger->index);
    ledger->shared = shared;
    ledger->free   = ucs_malloc(uct_ibshare_ledger_capacity(size) *
                                sizeof(*ledger->free), "ibshare ledger free");
    if (ledger->free == NULL) {
        kh_destroy_inplace(uct_ibshare_ledger_index, &ledger->index);
        pthread_mutex_destroy(&ledger->lock);
        ucs_free(ledger);
        return UCS_ERR_NO_MEMORY;
    }

    /* Whatever a former holder of the slice left is not ours */
    __atomic_store_n(&shared->magic, 0, __ATOMIC_RELEASE);
    shared->version    = UCT_IBSHARE_LEDGER_VERSION;
    shared->pid        = getpid();
    shared->capacity   = uct_ibshare_ledger_capacity(size);
    shared->high       = 0;
    shared->unrecorded = 0;
    shared->reserved   = 0;
    __atomic_store_n(&shared->magic, UCT_IBSHARE_LEDGER_MAGIC,
                     __ATOMIC_RELEASE);

    *ledger_p = ledger;
    return UCS_OK;
}

void uct_ibshare_ledger_close(uct_ibshare_ledger_t *ledger)
{
    if (ledger == NULL) {
        return;
    }

    if (kh_size(&ledger->index) != 0) {
        /* An object not destroyed by its owner: it goes with the group */
        ucs_debug("ibshare ledger: %u objects still recorded at close",
                  kh_size(&ledger->index));
    }
    /* A fork child's close leaves the parent's ledger as it is */
    if (ledger->shared->pid == (uint32_t)getpid()) {
        __atomic_store_n(&ledger->shared->magic, 0, __ATOMIC_RELEASE);
    }
    kh_destroy_inplace(uct_ibshare_ledger_index, &ledger->index);
    pthread_mutex_destroy(&ledger->lock);
    ucs_free(ledger->free);
    ucs_free(ledger);
}

void uct_ibshare_ledger_add(uct_ibshare_ledger_t *ledger,
                            uct_ibshare_obj_type_t type, uint32_t handle)
{
    uct_ibshare_ledger_shared_t *shared;
    uct_ibshare_ledger_entry_t *entry;
    uint32_t index;
    khiter_t it;
    int ret;

    if (ledger == NULL) {
        return;
    }

    shared = ledger->shared;
    pthread_mutex_lock(&ledger->lock);
    if (ledger->num_free > 0) {
        index = ledger->free[--ledger->num_free];
    } else if (shared->high < shared->capacity) {
        index = shared->high;
    } else {
        goto unrecorded;
    }

    it = kh_put(uct_ibshare_ledger_index, &ledger->index,
                uct_ibshare_ledger_key(type, handle), &ret);
    if (ret <= 0) {
        /* No memory, or the kernel gave a handle we hold: neither can be
         * recorded right */
        if (index != shared->high) {
            ledger->free[ledger->num_free++] = index;
        }
        goto unrecorded;
    }
    kh_val(&ledger->index, it) = index;

    entry         = &shared->entries[index];
    entry->handle = handle;
    __atomic_store_n(&entry->type, type, __ATOMIC_RELEASE);
    if (index == shared->high) {
        __atomic_store_n(&shared->high, index + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&ledger->lock);
    return;

unrecorded:
    ++shared->unrecorded;
    if (!ledger->full_warned) {
        ledger->full_warned = 1;
        ucs_warn("ibshare: the ledger of this process's verbs objects is "
                 "full (%u entries): should it be killed, the objects beyond "
                 "them (%s 0x%x and later ones) outlive it until the node "
                 "group ends", shared->capacity, uct_ibshare_obj_names[type],
                 handle);
    }
    pthread_mutex_unlock(&ledger->lock);
}

void uct_ibshare_ledger_remove(uct_ibshare_ledger_t *ledger,
                               uct_ibshare_obj_type_t type, uint32_t handle)
{
    uint32_t index;
    khiter_t it;

    if (ledger == NULL) {
        return;
    }

    pthread_mutex_lock(&ledger->lock);
    it = kh_get(uct_ibshare_ledger_index, &ledger->index,
                uct_ibshare_ledger_key(type, handle));
    if (it != kh_end(&ledger->index)) {
        index = kh_val(&ledger->index, it);
        kh_del(uct_ibshare_ledger_index, &ledger->index, it);
        __atomic_store_n(&ledger->shared->entries[index].type,
                         UCT_IBSHARE_OBJ_NONE, __ATOMIC_RELEASE);
        ledger->free[ledger->num_free++] = index;
    }
    pthread_mutex_unlock(&ledger->lock);
}

/* ------------------------------------------------------------ reclaiming */

/* The largest driver id tried (enum rdma_driver_id has 22 in Linux 6.1) */
#define UCT_IBSHARE_LEDGER_MAX_DRIVER_ID 64

/*
 * The device's driver id, which the kernel wants in every ioctl (EINVAL
 * otherwise) and libibverbs keeps private: the one with which the kernel
 * answers a query of the file's PD handles (UVERBS_METHOD_INFO_HANDLES,
 * Linux >= 5.9, as the import verbs). Returns 0 or an errno.
 */
static int uct_ibshare_ledger_driver_id(int cmd_fd, uint32_t *driver_id_p)
{
    struct {
        struct ib_uverbs_ioctl_hdr hdr;
        struct ib_uverbs_attr      attrs[3];
    } cmd;
    uint32_t driver_id, total, handles[16];

    for (driver_id = 0; driver_id < UCT_IBSHARE_LEDGER_MAX_DRIVER_ID;
         ++driver_id) {
        memset(&cmd, 0, sizeof(cmd));
        cmd.hdr.length       = sizeof(cmd);
        cmd.hdr.object_id    = UVERBS_OBJECT_DEVICE;
        cmd.hdr.method_id    = UVERBS_METHOD_INFO_HANDLES;
        cmd.hdr.num_attrs    = 3;
        cmd.hdr.driver_id    = driver_id;
        cmd.attrs[0].attr_id = UVERBS_ATTR_INFO_OBJECT_ID;
        cmd.attrs[0].flags   = UVERBS_ATTR_F_MANDATORY;
        cmd.attrs[0].len     = sizeof(uint64_t);
        cmd.attrs[0].data    = UVERBS_OBJECT_PD;
        cmd.attrs[1].attr_id = UVERBS_ATTR_INFO_TOTAL_HANDLES;
        cmd.attrs[1].flags   = UVERBS_ATTR_F_MANDATORY;
        cmd.attrs[1].len     = sizeof(total);
        cmd.attrs[1].data    = (uintptr_t)&total;
        cmd.attrs[2].attr_id = UVERBS_ATTR_INFO_HANDLES_LIST;
        cmd.attrs[2].flags   = UVERBS_ATTR_F_MANDATORY;
        cmd.attrs[2].len     = sizeof(handles);
        cmd.attrs[2].data    = (uintptr_t)handles;
        if (ioctl(cmd_fd, RDMA_VERBS_IOCTL, &cmd) == 0) {
            *driver_id_p = driver_id;
            return 0;
        } else if (errno != EINVAL) {
            return errno;
        }
    }
    return EINVAL;
}

/*
 * The kernel's destroy method of an object by its handle (the ioctl
 * interface: rdma-core's cmd_*.c send the same). Returns 0 or an errno.
 */
static int uct_ibshare_ledger_destroy(int cmd_fd, uint32_t driver_id,
                                      uct_ibshare_obj_type_t type,
                                      uint32_t handle)
{
    struct {
        struct ib_uverbs_ioctl_hdr hdr;
        struct ib_uverbs_attr      attrs[2];
    } cmd;
    union {
        struct ib_uverbs_destroy_qp_resp  qp;
        struct ib_uverbs_destroy_cq_resp  cq;
        struct ib_uverbs_destroy_srq_resp srq;
    } resp;
    uint16_t handle_attr, resp_attr = 0;
    size_t resp_len                 = 0;

    memset(&cmd, 0, sizeof(cmd));
    switch (type) {
    case UCT_IBSHARE_OBJ_QP:
        cmd.hdr.object_id = UVERBS_OBJECT_QP;
        cmd.hdr.method_id = UVERBS_METHOD_QP_DESTROY;
        handle_attr       = UVERBS_ATTR_DESTROY_QP_HANDLE;
        resp_attr         = UVERBS_ATTR_DESTROY_QP_RESP;
        resp_len          = sizeof(resp.qp);
        break;
    case UCT_IBSHARE_OBJ_CQ:
        cmd.hdr.object_id = UVERBS_OBJECT_CQ;
        cmd.hdr.method_id = UVERBS_METHOD_CQ_DESTROY;
        handle_attr       = UVERBS_ATTR_DESTROY_CQ_HANDLE;
        resp_attr         = UVERBS_ATTR_DESTROY_CQ_RESP;
        resp_len          = sizeof(resp.cq);
        break;
    case UCT_IBSHARE_OBJ_SRQ:
        cmd.hdr.object_id = UVERBS_OBJECT_SRQ;
        cmd.hdr.method_id = UVERBS_METHOD_SRQ_DESTROY;
        handle_attr       = UVERBS_ATTR_DESTROY_SRQ_HANDLE;
        resp_attr         = UVERBS_ATTR_DESTROY_SRQ_RESP;
        resp_len          = sizeof(resp.srq);
        break;
    case UCT_IBSHARE_OBJ_MR:
        cmd.hdr.object_id = UVERBS_OBJECT_MR;
        cmd.hdr.method_id = UVERBS_METHOD_MR_DESTROY;
        handle_attr       = UVERBS_ATTR_DESTROY_MR_HANDLE;
        break;
    case UCT_IBSHARE_OBJ_AH:
        cmd.hdr.object_id = UVERBS_OBJECT_AH;
        cmd.hdr.method_id = UVERBS_METHOD_AH_DESTROY;
        handle_attr       = UVERBS_ATTR_DESTROY_AH_HANDLE;
        break;
    default:
        return EINVAL;
    }

    cmd.hdr.driver_id    = driver_id;
    cmd.attrs[0].attr_id = handle_attr;
    cmd.attrs[0].flags   = UVERBS_ATTR_F_MANDATORY;
    cmd.attrs[0].data    = handle;
    cmd.hdr.num_attrs    = 1;
    if (resp_len != 0) {
        cmd.attrs[1].attr_id = resp_attr;
        cmd.attrs[1].flags   = UVERBS_ATTR_F_MANDATORY;
        cmd.attrs[1].len     = resp_len;
        cmd.attrs[1].data    = (uintptr_t)&resp;
        cmd.hdr.num_attrs    = 2;
    }
    cmd.hdr.length = sizeof(cmd.hdr) +
                     (cmd.hdr.num_attrs * sizeof(cmd.attrs[0]));

    return (ioctl(cmd_fd, RDMA_VERBS_IOCTL, &cmd) == 0) ? 0 : errno;
}

ucs_status_t uct_ibshare_ledger_reclaim(int cmd_fd, int pool_fd,
                                        uint64_t offset, size_t size,
                                        pid_t pid,
                                        uct_ibshare_ledger_reclaimed_t *done)
{
    uct_ibshare_ledger_shared_t *shared;
    uct_ibshare_ledger_entry_t *entry;
    uint32_t i, high, handle, type, driver_id = 0;
    ucs_status_t status = UCS_OK;
    int err;

    memset(done, 0, sizeof(*done));
    if (size <= sizeof(*shared)) {
        return UCS_OK; /* the slice has no ledger */
    }

    shared = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, pool_fd,
                  offset);
    if (shared == MAP_FAILED) {
        ucs_error("ibshare: cannot map the ledger at offset %" PRIu64
                  " of the node pool: %m", offset);
        return UCS_ERR_IO_ERROR;
    }

    /* Not pid's ledger: it died before it wrote one, so it made nothing */
    if ((__atomic_load_n(&shared->magic, __ATOMIC_ACQUIRE) !=
         UCT_IBSHARE_LEDGER_MAGIC) ||
        (shared->version != UCT_IBSHARE_LEDGER_VERSION) ||
        (shared->pid != (uint32_t)pid)) {
        goto out;
    }

    high = ucs_min(__atomic_load_n(&shared->high, __ATOMIC_ACQUIRE),
                   uct_ibshare_ledger_capacity(size));
    done->unrecorded = shared->unrecorded;
    if (high == 0) {
        goto out_empty;
    }

    err = uct_ibshare_ledger_driver_id(cmd_fd, &driver_id);
    if (err != 0) {
        /* Nothing can be destroyed: everything stays recorded */
        done->failed      = high;
        done->first_errno = err;
        status            = UCS_ERR_UNSUPPORTED;
        goto out;
    }

    for (type = UCT_IBSHARE_OBJ_NONE + 1; type < UCT_IBSHARE_OBJ_LAST;
         ++type) {
        for (i = 0; i < high; ++i) {
            entry = &shared->entries[i];
            if (__atomic_load_n(&entry->type, __ATOMIC_ACQUIRE) != type) {
                continue;
            }

            /* Cleared first: should we die here, the next reclaimer must
             * not destroy a handle the kernel may have given anew */
            handle = entry->handle;
            __atomic_store_n(&entry->type, UCT_IBSHARE_OBJ_NONE,
                             __ATOMIC_RELEASE);
            err = uct_ibshare_ledger_destroy(cmd_fd, driver_id, type, handle);
            if (err == 0) {
                ++done->destroyed[type];
            } else if (err == EBUSY) {
                /* Still in use by an object the member did not record:
                 * alive, so its handle is still its own */
                __atomic_store_n(&entry->type, type, __ATOMIC_RELEASE);
                if (done->failed++ == 0) {
                    done->first_errno = err;
                }
                status = UCS_ERR_BUSY;
            } else {
                /* Not there (ENOENT, EINVAL): gone already */
                if (done->failed++ == 0) {
                    done->first_errno = err;
                }
            }
        }
    }

out_empty:
    if (status == UCS_OK) {
        __atomic_store_n(&shared->magic, 0, __ATOMIC_RELEASE);
    }

out:
    munmap(shared, size);
    return status;
}

const char *
uct_ibshare_ledger_reclaimed_str(const uct_ibshare_ledger_reclaimed_t *done,
                                 ucs_string_buffer_t *strb)
{
    unsigned type;

    for (type = UCT_IBSHARE_OBJ_NONE + 1; type < UCT_IBSHARE_OBJ_LAST;
         ++type) {
        if (done->destroyed[type] > 0) {
            ucs_string_buffer_appendf(strb, "%u %s%s, ", done->destroyed[type],
                                      uct_ibshare_obj_names[type],
                                      (done->destroyed[type] == 1) ? "" : "s");
        }
    }
    ucs_string_buffer_rtrim(strb, ", ");
    if (ucs_string_buffer_length(strb) == 0) {
        ucs_string_buffer_appendf(strb, "nothing");
    }
    return ucs_string_buffer_cstr(strb);
}
