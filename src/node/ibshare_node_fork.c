/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * A node group's fds across fork: the process's list of nodes, the lock
 * that keeps their fds still while fork copies the process, and the atfork
 * handlers by which a child lets go of every node (ibshare_node_int.h).
 */
#include "ibshare_node_int.h"

#include <ucs/debug/log_def.h>

#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>


/* Every node of this process, for the fork child handler; under the lock */
static UCS_LIST_HEAD(uct_ibshare_node_all);
static pthread_mutex_t uct_ibshare_node_fork_mutex =
    PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t uct_ibshare_node_atfork_once = PTHREAD_ONCE_INIT;
static int uct_ibshare_node_atfork_ret;


void uct_ibshare_node_fork_lock(void)
{
    pthread_mutex_lock(&uct_ibshare_node_fork_mutex);
}

void uct_ibshare_node_fork_unlock(void)
{
    pthread_mutex_unlock(&uct_ibshare_node_fork_mutex);
}

/* Taken before fork: no node's fds change while the process is copied */
static void uct_ibshare_node_atfork_prepare(void)
{
    uct_ibshare_node_fork_lock();
}

static void uct_ibshare_node_atfork_parent(void)
{
    uct_ibshare_node_fork_unlock();
}

/* close() alone: no logging in the child handler */
static void uct_ibshare_node_child_close(int *fd_p)
{
    if (*fd_p >= 0) {
        close(*fd_p);
        *fd_p = -1;
    }
}

/*
 * The child shares the open file descriptions of the parent's fds, CLOEXEC
 * acts only at exec, and OFD locks go only with the last fd (and mapping)
 * of their description: a child that kept them would keep the group's
 * locks and listening socket after its parent died, and no member could
 * take over. So the child lets go of every node: it closes what the node
 * holds of the group without unlocking or unlinking anything (the locks are
 * the parent's too) and is no member from now on. Only system calls here:
 * the child has one thread and the parent's were anywhere at fork.
 */
static void uct_ibshare_node_atfork_child(void)
{
    uct_ibshare_node_conn_t *conn;
    uct_ibshare_node_t *node;

    ucs_list_for_each(node, &uct_ibshare_node_all, list) {
        uct_ibshare_node_child_close(&node->listen_fd);
        uct_ibshare_node_child_close(&node->lock_fd);
        uct_ibshare_node_child_close(&node->cmd_fd);
        uct_ibshare_node_child_close(&node->pool_fd);
        uct_ibshare_node_child_close(&node->dir_fd);
        /* A write to the pipe would stop the parent's thread */
        uct_ibshare_node_child_close(&node->stop_pipe[0]);
        uct_ibshare_node_child_close(&node->stop_pipe[1]);
        for (conn = node->conns;
             conn < node->conns + UCT_IBSHARE_NODE_MAX_CONNS; ++conn) {
            uct_ibshare_node_child_close(&conn->fd);
        }
        /* The mapping holds the lock file's description too */
        if (node->state != NULL) {
            munmap(node->state, node->state_size);
            node->state = NULL;
        }
        node->thread_started = 0;   /* the thread is not copied */
        node->serving        = 0;
        node->record         = UCT_IBSHARE_NODE_NO_RECORD;
        node->forked         = 1;
    }

    /* Locked by the thread that forked, which is not ours any more */
    pthread_mutex_init(&uct_ibshare_node_fork_mutex, NULL);
}

static void uct_ibshare_node_atfork_register(void)
{
    uct_ibshare_node_atfork_ret =
        pthread_atfork(uct_ibshare_node_atfork_prepare,
                       uct_ibshare_node_atfork_parent,
                       uct_ibshare_node_atfork_child);
}

ucs_status_t uct_ibshare_node_fork_init(void)
{
    pthread_once(&uct_ibshare_node_atfork_once,
                 uct_ibshare_node_atfork_register);
    if (uct_ibshare_node_atfork_ret != 0) {
        ucs_error("pthread_atfork() failed: %s; without it a fork child "
                  "would keep the node group's locks",
                  strerror(uct_ibshare_node_atfork_ret));
        return UCS_ERR_NO_RESOURCE;
    }

    return UCS_OK;
}

void uct_ibshare_node_fork_track(uct_ibshare_node_t *node)
{
    uct_ibshare_node_fork_lock();
    ucs_list_add_tail(&uct_ibshare_node_all, &node->list);
    uct_ibshare_node_fork_unlock();
}

void uct_ibshare_node_fork_untrack(uct_ibshare_node_t *node)
{
    ucs_list_del(&node->list);
}
