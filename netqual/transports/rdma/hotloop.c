/* The RDMA write ping-pong's timed loop, compiled: the same rounds as pingpong.py's Python
 * loop (challenge, sequence byte, post, spin on the receive byte, reap every SIGNAL_EVERY-th
 * write; the responder answers each round listed in its marks, every round since the
 * tail-forgery fix, with its tag), with the interpreter out of the round trip. Loaded with ctypes, whose calls release the
 * GIL for the whole loop.
 *
 * Python keeps the control path: pyverbs creates and connects the QP, CQ and MR; this file
 * only receives the ibv_qp pointer, addresses and keys. ibv_post_send and ibv_poll_cq are
 * inline calls through the provider's ops table (verbs.h), so nothing links libibverbs.
 *
 * Every loop returns to Python with a status (timeout, abort, completion error) and the
 * rounds done; Python words the error exactly as for its own loop. Every SPINS_PER_CHECK
 * polls of the receive byte the loop checks its deadline, reaps completions and poll()s
 * the control socket, so a peer that stops or vanishes ends the loop as it does in Python.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define NQ_ABI 3
#define SIGNAL_EVERY 16
#define SPINS_PER_CHECK (1u << 16) /* byte polls between deadline / CQ / control checks */

enum { NQ_OK = 0, NQ_TIMEOUT = 1, NQ_ABORTED = 2, NQ_WC_ERROR = 3, NQ_POST_ERROR = 4, NQ_SIGNAL = 5 };

/* Shared with Python (ctypes Structure in hotloop.py): keep the two in step, NQ_ABI too. */
struct nq_loop {
    struct ibv_qp *qp;
    uint64_t send_addr;   /* our send area: source of the WRITE */
    uint64_t recv_addr;   /* our receive area: the peer WRITEs here */
    uint64_t remote_addr; /* the peer's receive area */
    uint32_t lkey, rkey, size, send_flags; /* send_flags: IBV_SEND_INLINE or 0 */
    uint64_t wr_id;
    int32_t abort_fd;     /* -1: none */
    int32_t signal_fd;    /* Python's signal wakeup pipe (-1: none): return so handlers run */
    int32_t wc_status;    /* out: the failed completion's status */
    uint32_t vendor_err;  /* out */
    int32_t post_errno;   /* out: what ibv_post_send returned */
    uint64_t posted;      /* in/out: WRITEs posted (every SIGNAL_EVERY-th is signalled) */
    uint64_t unreaped;    /* in/out: signalled WRITEs not yet completed */
    /* Where a loop stands, so that a call that returned NQ_SIGNAL resumes where it left:
     * rounds done, whether this round's write is out (initiator), and its t0. */
    uint32_t round;
    int32_t waiting;
    int64_t t0;
    /* Session-key tags (netqual.transports.integrity), width bytes at the head of each
     * message. Initiator: blocks = challenges (round i's at i*width), got = every reply's
     * head. Responder: blocks = its tags, got = the tagged rounds' challenges, marks = the
     * tagged rounds then a sentinel (the round count), mark = the next one's index. */
    uint64_t blocks_addr;
    uint64_t got_addr;
    uint64_t marks_addr;
    uint32_t width;
    uint32_t mark;
};

static inline int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* what Python's time.monotonic() reads */
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int post(struct nq_loop *l, uint64_t from)
{
    struct ibv_sge sge = {.addr = from, .length = l->size, .lkey = l->lkey};
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = l->wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = l->send_flags;
    wr.wr.rdma.remote_addr = l->remote_addr;
    wr.wr.rdma.rkey = l->rkey;
    l->posted++;
    int signalled = l->posted % SIGNAL_EVERY == 0;
    if (signalled)
        wr.send_flags |= IBV_SEND_SIGNALED;
    int rc = ibv_post_send(l->qp, &wr, &bad);
    if (rc) {
        l->post_errno = rc;
        return NQ_POST_ERROR;
    }
    l->unreaped += signalled;
    return NQ_OK;
}

static int reap(struct nq_loop *l)
{
    struct ibv_wc wc[SIGNAL_EVERY];
    int n = ibv_poll_cq(l->qp->send_cq, SIGNAL_EVERY, wc);
    if (n < 0) {
        l->post_errno = n;
        return NQ_POST_ERROR;
    }
    for (int i = 0; i < n; i++) {
        if (wc[i].status != IBV_WC_SUCCESS) {
            l->wc_status = wc[i].status;
            l->vendor_err = wc[i].vendor_err;
            return NQ_WC_ERROR;
        }
        l->unreaped--;
    }
    return NQ_OK;
}

static int readable(int fd)
{
    if (fd < 0)
        return 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) > 0; /* closed or hung up also reads as readable */
}

/* Spin until the receive byte equals seq. Own deadline: a dead peer writes nothing. The
 * spin itself makes no call at all: the clock is read only at a check, every
 * SPINS_PER_CHECK polls (tens of us natively, far longer than a round trip), because a
 * clock read is not always cheap: where the kernel does not trust the TSC (VMs, qemu TCG)
 * clock_gettime is a system call. */
static int wait_byte(struct nq_loop *l, volatile uint8_t *byte, uint8_t seq, int64_t deadline_ns)
{
    for (;;) {
        for (uint32_t k = 0; k < SPINS_PER_CHECK; k++)
            if (*byte == seq)
                return NQ_OK;
        if (now_ns() > deadline_ns)
            return NQ_TIMEOUT;
        if (readable(l->signal_fd))
            return NQ_SIGNAL;
        int rc = reap(l); /* a lost peer shows as IBV_WC_RETRY_EXC_ERR here */
        if (rc)
            return rc;
        if (readable(l->abort_fd))
            return NQ_ABORTED;
    }
}

/* warmup + iterations round trips from l->round on; samples[iterations] gets the kept full
 * RTTs (ns). *done: rounds completed (also l->round). */
int nq_initiate(struct nq_loop *l, uint32_t warmup, uint32_t iterations, int64_t deadline_ns,
                int64_t *samples, uint32_t *done)
{
    volatile uint8_t *send_byte = (volatile uint8_t *)(uintptr_t)(l->send_addr + l->size - 1);
    volatile uint8_t *recv_byte = (volatile uint8_t *)(uintptr_t)(l->recv_addr + l->size - 1);
    uint8_t *blocks = (uint8_t *)(uintptr_t)l->blocks_addr, *got = (uint8_t *)(uintptr_t)l->got_addr;
    uint32_t total = warmup + iterations, w = l->width;
    int rc = NQ_OK;
    for (uint32_t i = l->round; i < total; i++) {
        uint8_t seq = (uint8_t)(i + 1); /* consecutive rounds always differ: wrap-around is safe */
        if (!l->waiting) {
            memcpy((void *)(uintptr_t)l->send_addr, blocks + (size_t)i * w, w); /* challenge */
            *send_byte = seq;
            l->t0 = now_ns();
            if ((rc = post(l, l->send_addr)))
                break;
            l->waiting = 1;
        }
        rc = wait_byte(l, recv_byte, seq, deadline_ns);
        int64_t t1 = now_ns();
        if (rc)
            break; /* NQ_SIGNAL: the write is out, the next call goes on waiting */
        __atomic_thread_fence(__ATOMIC_ACQUIRE); /* the head landed before the last byte */
        memcpy(got + (size_t)i * w, (const void *)(uintptr_t)l->recv_addr, w);
        l->waiting = 0;
        if (i >= warmup)
            samples[i - warmup] = t1 - l->t0;
        if (l->unreaped && (rc = reap(l)))
            break;
        l->round = i + 1;
    }
    *done = l->round;
    return rc;
}

/* Answer pings from l->round on: wait for the ping's byte, then write ours back. */
int nq_respond(struct nq_loop *l, uint32_t rounds, int64_t deadline_ns, uint32_t *done)
{
    volatile uint8_t *send_byte = (volatile uint8_t *)(uintptr_t)(l->send_addr + l->size - 1);
    volatile uint8_t *recv_byte = (volatile uint8_t *)(uintptr_t)(l->recv_addr + l->size - 1);
    uint8_t *blocks = (uint8_t *)(uintptr_t)l->blocks_addr, *got = (uint8_t *)(uintptr_t)l->got_addr;
    const uint32_t *marks = (const uint32_t *)(uintptr_t)l->marks_addr;
    uint32_t w = l->width;
    int rc = NQ_OK;
    for (uint32_t i = l->round; i < rounds; i++) {
        uint8_t seq = (uint8_t)(i + 1);
        if ((rc = wait_byte(l, recv_byte, seq, deadline_ns)))
            break;
        if (i == marks[l->mark]) { /* a tagged round (every round): answer with our tag */
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
            memcpy(got + (size_t)l->mark * w, (const void *)(uintptr_t)l->recv_addr, w);
            memcpy((void *)(uintptr_t)l->send_addr, blocks + (size_t)i * w, w);
            *send_byte = seq;
            if ((rc = post(l, l->send_addr)))
                break;
            l->mark++;
        } else if ((rc = post(l, l->recv_addr))) { /* the ping as it landed: no copy */
            break;
        }
        if (l->unreaped && (rc = reap(l)))
            break;
        l->round = i + 1;
    }
    *done = l->round;
    return rc;
}

/* Read a struct ibv_qp at an address we were told about, without trusting it: a wrong
 * address gives EFAULT here instead of a crash. Returns 0 when it looks like an RC QP with
 * this number whose send CQ and context are set. */
int nq_check_qp(uint64_t addr, uint32_t qp_num)
{
    struct ibv_qp qp;
    struct iovec local = {.iov_base = &qp, .iov_len = sizeof(qp)};
    struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = sizeof(qp)};
    if (addr == 0 || addr % sizeof(void *))
        return -1;
    if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)sizeof(qp))
        return -2;
    if (qp.qp_num != qp_num || qp.qp_type != IBV_QPT_RC)
        return -3;
    if (qp.context == NULL || qp.send_cq == NULL)
        return -4;
    return 0;
}

/* The layout Python relies on: the ABI version, sizeof(struct nq_loop), and the offsets a
 * test needs to build a stand-in device (ibv_context's post_send and poll_cq slots). */
int nq_layout(int64_t *out, int n)
{
    int64_t v[] = {
        NQ_ABI,
        sizeof(struct nq_loop),
        SIGNAL_EVERY,
        offsetof(struct ibv_context, ops) + offsetof(struct ibv_context_ops, post_send),
        offsetof(struct ibv_context, ops) + offsetof(struct ibv_context_ops, poll_cq),
        sizeof(struct ibv_context),
        offsetof(struct ibv_qp, send_cq),
        offsetof(struct ibv_qp, qp_num),
        offsetof(struct ibv_qp, qp_type),
        sizeof(struct ibv_qp),
        sizeof(struct ibv_cq),
        sizeof(struct ibv_send_wr),
        sizeof(struct ibv_wc),
    };
    int count = (int)(sizeof(v) / sizeof(v[0]));
    for (int i = 0; i < n && i < count; i++)
        out[i] = v[i];
    return count;
}
