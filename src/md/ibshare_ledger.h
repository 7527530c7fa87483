/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The ledger of a shared-mode member's verbs objects, and their reclamation
 * when the member dies.
 *
 * In shared mode every member creates its QPs, CQs, SRQs, AHs and MRs on the
 * group's one uverbs file (the imported context). The kernel keeps such an
 * object until it is destroyed or every holder of the file has closed it, so
 * the objects of a killed member outlive it for as long as the group lives:
 * its QPs still acknowledge RDMA, its MRs keep its pages pinned. So each
 * member writes the kernel handle of every object it creates on the shared
 * file into a ledger at the start of its slice of the node pool (shared
 * memory), and clears the entry before it destroys the object. When a member
 * dies, the server of the group reads its ledger and destroys what is left
 * through the kernel's ioctl interface on its own dup of the shared file
 * (handles belong to the file, not to a process; the write() interface
 * refuses every process but the file's opener), then frees the slice.
 *
 * An entry is set only after its object exists and cleared before the
 * object is destroyed, by the member and by the reclaimer alike, so a set
 * entry always names a live object of that member: the kernel reuses
 * handles, and a stale entry could name another member's object. A member
 * killed between a create and its entry leaks that one object; a full
 * ledger leaves the objects beyond it unrecorded, counted in the ledger and
 * warned about once.
 */
#ifndef UCT_IBSHARE_LEDGER_H_
#define UCT_IBSHARE_LEDGER_H_

#include <ucs/datastruct/string_buffer.h>
#include <ucs/sys/compiler.h> /* ucs_alloca of UCS_STRING_BUFFER_ONSTACK */
#include <ucs/type/status.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>


/* In the order a reclaimer destroys them: a QP refers to its CQs and SRQ,
 * an SRQ to its CQ */
typedef enum {
    UCT_IBSHARE_OBJ_NONE = 0,
    UCT_IBSHARE_OBJ_QP,
    UCT_IBSHARE_OBJ_AH,
    UCT_IBSHARE_OBJ_MR,
    UCT_IBSHARE_OBJ_SRQ,
    UCT_IBSHARE_OBJ_CQ,
    UCT_IBSHARE_OBJ_LAST
} uct_ibshare_obj_type_t;


/* What a reclamation did, per type (index: uct_ibshare_obj_type_t) */
typedef struct uct_ibshare_ledger_reclaimed {
    unsigned destroyed[UCT_IBSHARE_OBJ_LAST];
    unsigned failed;       /* the kernel refused (the first errno is kept) */
    int      first_errno;
    unsigned unrecorded;   /* the member's objects that did not fit */
} uct_ibshare_ledger_reclaimed_t;


typedef struct uct_ibshare_ledger uct_ibshare_ledger_t;


/* The ledger's size at the start of a slice of slice_size bytes; 0 if the
 * slice is too small to spare it (then nothing is reclaimed) */
size_t uct_ibshare_ledger_size(size_t slice_size);

/* This process's ledger in size bytes of shared memory at address */
ucs_status_t uct_ibshare_ledger_open(void *address, size_t size,
                                     uct_ibshare_ledger_t **ledger_p);

/* Every object it records must be gone (the ledger is marked empty); in a
 * fork child, only the child's memory goes */
void uct_ibshare_ledger_close(uct_ibshare_ledger_t *ledger);

/* An object this process created on the shared file; thread safe. A NULL
 * ledger (fallback or private mode: the objects die with the process)
 * records nothing. */
void uct_ibshare_ledger_add(uct_ibshare_ledger_t *ledger,
                            uct_ibshare_obj_type_t type, uint32_t handle);

/* Before the object is destroyed */
void uct_ibshare_ledger_remove(uct_ibshare_ledger_t *ledger,
                               uct_ibshare_obj_type_t type, uint32_t handle);

/*
 * A survivor's part: destroys, through cmd_fd (a dup of the group's shared
 * uverbs file), the objects left in the ledger of dead member pid, which is
 * at offset of the pool file pool_fd (size bytes). A ledger that is not
 * pid's (never written, or a former holder's) holds nothing of it. Returns
 * UCS_OK if nothing of pid is left in it, UCS_ERR_BUSY if the kernel
 * refused some (they stay recorded), UCS_ERR_UNSUPPORTED if the kernel
 * takes no such command (before Linux 5.9), another error if the ledger
 * could not be read.
 */
ucs_status_t uct_ibshare_ledger_reclaim(int cmd_fd, int pool_fd,
                                        uint64_t offset, size_t size,
                                        pid_t pid,
                                        uct_ibshare_ledger_reclaimed_t *done);

/* Appends "3 QPs, 1 SRQ, 2 CQs" (or "nothing") to strb; its string */
const char *
uct_ibshare_ledger_reclaimed_str(const uct_ibshare_ledger_reclaimed_t *done,
                                 ucs_string_buffer_t *strb);

#endif
