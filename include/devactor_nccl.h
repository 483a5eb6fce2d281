/*
 * devactor_nccl.h -- collectives between actors: NCCL on the cuda backend,
 * host reductions in stream order on the simulated devices.
 *
 * A library actor built on the public task API (src/libs/nccl.c): every
 * collective is a dv_task on its rank's actor and stream, its buffers
 * dv_refs (plus a byte offset) checked against their blocks before
 * anything is posted and fenced like a launch's operands -- inputs read,
 * outputs written -- so a collective is ordered after the writes of other
 * streams and threads, and later uses are ordered after it, as for any
 * other operation.  Nothing is posted for a call it refuses.
 *
 * NCCL (2.7 or later) is opened at run time: $DV_NCCL_PATH when set
 * (only it), else libnccl.so.2 the usual way (LD_LIBRARY_PATH, the
 * loader's cache), else the CUDA toolkit's, else pip's nvidia/nccl/lib
 * (PyTorch's wheels bring one) under the usual python prefixes.  Where
 * none opens, creating a communicator answers DV_ENOTSUP and says what
 * it looked for.  The simulated devices need no
 * library: their collectives run on the host, between the simulated
 * devices of one process.
 *
 * Communicators.  A communicator has nranks ranks; each rank is one actor
 * (one device).  This process holds some of them, its local ranks:
 *   - dv_nccl_comm_create: all ranks, one per actor given, in this process;
 *   - dv_nccl_comm_join: some ranks of a communicator that spans processes
 *     or machines; every process joins with the same id, which one of them
 *     made with dv_nccl_id_make and gave the others (its bytes are
 *     plain data: send them over any channel; dv_nccl_id_format and
 *     dv_nccl_id_parse make them text and back).  NCCL's bootstrap and
 *     transports (NVLink, PCIe, InfiniBand, sockets) carry the rest.
 * Each local rank's NCCL communicator is made on its actor's thread, in
 * its context, all local ranks at once; creation returns when every rank
 * joined, or answers DV_ETIMEDOUT after timeout_ns (and made nothing).
 * NCCL's mode: a communicator whose ranks are all in this process
 * (dv_nccl_comm_create, or a join of every rank) runs in NCCL's blocking
 * mode, its local ranks meeting on their actors before creation as before
 * every collective, so that none of them waits inside NCCL for a rank
 * that never comes (such a creation answers DV_ETIMEDOUT, naming the
 * rank; the timeout counts from the first rank's arrival, and the call
 * returns once every rank's actor took its part).  Such creations are
 * made one at a time in the process (one that waits longer than its
 * timeout for another answers DV_ETIMEDOUT).  One that spans processes
 * runs in the non-blocking mode: creation and each enqueue are polled
 * under the timeout, so a remote rank that never comes cannot hold an
 * actor for ever, and an abort may come at any time; each enqueue then
 * costs NCCL a thread (about 150 us a collective on two H100s).  The
 * environment variable DV_NCCL_BLOCKING (1 or 0) asks for one mode for
 * every communicator (in the blocking mode a remote rank's waits in NCCL
 * are not bounded; nor is creation where NCCL predates
 * ncclCommInitRankConfig).
 *
 * Order.  Every rank must make the same collectives in the same order,
 * as NCCL requires: a rank's order is the order its actor takes its calls
 * (one thread per rank gives it; two threads posting for one rank at once
 * leave it to chance).  The local ranks meet before each collective (or
 * group holding one): a rank's call waits on its actor's thread until
 * every local rank has reached the same collective, then all of them
 * enqueue it.  So a rank whose caller never posts cannot leave the
 * others' devices waiting for ever: after the communicator's timeout the
 * call answers DV_ETIMEDOUT on every rank that came, naming the ranks
 * that did not, and enqueues nothing; the late rank's call fails the same
 * way when it comes, and the communicator stays usable.  Local ranks
 * whose calls do not agree (kind, count, type, operation, root; in a
 * group, a send to a local rank without its receive there) answer
 * DV_EINVAL, naming both, and enqueue nothing.  A rank's collective
 * refused before it was posted (a buffer too small, an unknown type...)
 * still spends that rank's step: the other local ranks' calls of it answer
 * DV_EINVAL at once, naming the refusal, and the next calls line up again
 * (in a group that was refused, each rank with a part spends one step).
 * So a collective is called on every rank, as NCCL requires; one made on
 * a rank alone leaves that rank a step ahead.  While waiting, the rank's
 * actor serves no one else: post each rank's part promptly.
 *
 * Sends and receives alone (a call, or a group of nothing else) involve
 * their two ranks, not the others: they meet no one and are enqueued at
 * once; NCCL pairs a rank's sends to a peer with the peer's receives from
 * it, in order.  A send whose receive never comes waits on the device
 * for ever, as with NCCL called directly (until the communicator is
 * aborted).  The sim pairs them the same way when the streams get there;
 * there a pair whose counts or types differ, or a wait past the timeout,
 * aborts the communicator (DV_EINVAL, DV_ETIMEDOUT), as does a
 * collective's wait past the timeout for a rank's stream that never gets
 * there.
 *
 * Threads: any thread may call these, not from inside a task.  With f
 * NULL a call returns once its collective finished on the device, which
 * needs every rank to have posted: one thread driving several ranks
 * passes futures (a blocking call there waits for the timeout).  With f
 * it returns once posted -- not once ordered, as the BLAS's _async calls
 * do: the rank's part may wait at the meeting -- and f reaches ordered
 * when the part is enqueued on its stream (after the meeting), complete
 * when it finished on the device (its status: the call's).  A handle
 * still pending is waited for, as a first use waits.  A call refused
 * before posting
 * answers its status and completes f with it.  A call with count 0 does
 * nothing: only the communicator, the rank, the type and the operation
 * are checked.
 *
 * Groups.  Between dv_nccl_group_start and dv_nccl_group_end on one
 * thread, calls are checked and kept, not posted; group_end posts each
 * rank's calls as one task that issues them inside one NCCL group (which
 * NCCL needs for send/recv pairs between ranks), and returns when every
 * rank's group finished on the device, with the first failure (so one
 * thread may drive every rank through groups).  Calls in a group take f
 * NULL, and one (communicator, rank) uses one stream in a group.  A call
 * refused in a group spoils it: group_end posts nothing and answers the
 * first refusal.
 *
 * Failure.  A communicator is aborted -- ncclCommAbort on every local
 * rank; on the sim the ranks' streams waiting at the collective are let
 * go -- when a rank's actor is LOST (DV_EDEVICE_LOST), when a rank's
 * context was rebuilt, by dv_actor_reset or after a fault (DV_ESTALE:
 * the NCCL communicator lived in the old one), or shut down
 * (DV_ESHUTDOWN); on the sim also as said above.  Collectives in flight
 * then end without a result to trust -- their futures may still complete
 * with DV_OK: look at dv_nccl_comm_status after waiting when that
 * matters --; the other ranks' actors and contexts are not harmed; every
 * later call answers the reason, with a detail naming the rank.  Destroy
 * it and make another.  dv_nccl_comm_status says which, at any time.
 */
#ifndef DEVACTOR_NCCL_H
#define DEVACTOR_NCCL_H

#include "devactor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dv_nccl_comm dv_nccl_comm;

/* A communicator's name across processes (NCCL's ncclUniqueId). */
#define DV_NCCL_ID_BYTES 128
typedef struct dv_nccl_id {
    unsigned char bytes[DV_NCCL_ID_BYTES];
} dv_nccl_id;

/* Element types; the values are NCCL's. */
typedef enum dv_nccl_type {
    DV_NCCL_I8 = 0,
    DV_NCCL_U8 = 1,
    DV_NCCL_I32 = 2,
    DV_NCCL_U32 = 3,
    DV_NCCL_I64 = 4,
    DV_NCCL_U64 = 5,
    DV_NCCL_F16 = 6,
    DV_NCCL_F32 = 7,
    DV_NCCL_F64 = 8,
    DV_NCCL_BF16 = 9,
} dv_nccl_type;

/* Reductions; the values are NCCL's.  AVG is the sum divided by nranks
 * (integers: truncated). */
typedef enum dv_nccl_op {
    DV_NCCL_SUM = 0,
    DV_NCCL_PROD = 1,
    DV_NCCL_MAX = 2,
    DV_NCCL_MIN = 3,
    DV_NCCL_AVG = 4,
} dv_nccl_op;

/* A buffer: a block, and where the buffer starts in it (bytes, a multiple
 * of the element size). */
typedef struct dv_nccl_buf {
    dv_ref ref;
    uint64_t offset;
} dv_nccl_buf;

static inline dv_nccl_buf dv_nccl_at(dv_ref ref, uint64_t offset)
{
    dv_nccl_buf b = {ref, offset};
    return b;
}

/* Bytes of one element of type; 0 for a type it does not know. */
DV_EXPORT unsigned dv_nccl_type_size(dv_nccl_type type);

/* A new id for a communicator that spans processes, made for the backend
 * of actor (NCCL's ncclGetUniqueId on cuda; on the sim it names a meeting
 * place in this process).  DV_ENOTSUP when NCCL does not open. */
DV_EXPORT int dv_nccl_id_make(dv_actor *actor, dv_nccl_id *id);
/* The id as text, to pass on a command line or in the environment:
 * DV_NCCL_ID_HEX - 1 lowercase hex digits and a NUL written to out (cap
 * at least DV_NCCL_ID_HEX).  DV_EINVAL for NULL or a short cap. */
#define DV_NCCL_ID_HEX (2 * DV_NCCL_ID_BYTES + 1)
DV_EXPORT int dv_nccl_id_format(const dv_nccl_id *id, char *out, size_t cap);
/* Back: exactly DV_NCCL_ID_HEX - 1 hex digits, either case.  DV_EINVAL
 * (id unchanged) for anything else. */
DV_EXPORT int dv_nccl_id_parse(dv_nccl_id *id, const char *text);

/* A communicator over n actors of this process, rank i on actors[i] (all
 * of one backend, no actor twice, and on cuda no device twice).  timeout_ns bounds creation and
 * each meeting of the local ranks (0: 60 s).  DV_EINVAL for a NULL or repeated actor, n under 1 or
 * over DV_MAX_DEVICES; DV_ENOTSUP without NCCL; DV_ETIMEDOUT; NCCL's failure as DV_EDRIVER with its
 * message. */
DV_EXPORT int dv_nccl_comm_create(dv_actor *const *actors, int n, uint64_t timeout_ns,
                                  dv_nccl_comm **out);
/* This process's ranks ranks[0..nlocal) of a communicator of nranks ranks
 * named by id, rank ranks[i] on actors[i].  Returns when all nranks ranks
 * (every process) joined; DV_ETIMEDOUT after timeout_ns (0: 60 s). */
DV_EXPORT int dv_nccl_comm_join(dv_actor *const *actors, const int *ranks, int nlocal, int nranks,
                                const dv_nccl_id *id, uint64_t timeout_ns, dv_nccl_comm **out);
/* Wait for calls other threads posted and their actors have not finished
 * (at most twice the communicator's timeout, after which c is left
 * allocated rather than freed under them: call it once no thread posts
 * to c),
 * and for the local ranks' streams that ran collectives; destroy each
 * rank's NCCL communicator on its actor's thread (all at once), free c.
 * A rank whose actor is shut down or lost is aborted instead.  Destroy
 * c before its actors for a clean end; an actor shut down or destroyed
 * first makes c answer DV_ESHUTDOWN, and c never reads or posts to it
 * again.  Left allocated (above), call it again later.  NULL is fine.
 * Not from inside a task (it waits). */
DV_EXPORT void dv_nccl_comm_destroy(dv_nccl_comm *c);
/* DV_OK while c can be used, else why not, with a detail naming the
 * rank: DV_ESTALE (a rank's context rebuilt), DV_EDEVICE_LOST,
 * DV_ESHUTDOWN, DV_EDRIVER (a rank could not enqueue its part after the
 * others did), on the sim DV_EINVAL or DV_ETIMEDOUT (above).  Looks at
 * the actors' health first; waits only to abort c (for a rank inside
 * NCCL to come out). */
DV_EXPORT int dv_nccl_comm_status(dv_nccl_comm *c);
/* Ranks in all (nranks); -1 for NULL. */
DV_EXPORT int dv_nccl_comm_size(const dv_nccl_comm *c);
/* The actor of a local rank, NULL when rank is not local. */
DV_EXPORT dv_actor *dv_nccl_comm_actor(const dv_nccl_comm *c, int rank);
/* What runs the collectives ("NCCL 2.28.9 (path)",
 * "sim (host reductions in stream order)"). */
DV_EXPORT const char *dv_nccl_library(const dv_nccl_comm *c);

/*
 * Collectives, posted for one local rank on a stream of its actor.  count
 * is in elements of type; a call with count 0 does nothing (DV_OK).
 * Buffers are checked against their blocks: a null, stale or released
 * handle answers its own error (DV_EINVAL, DV_ESTALE), a block of
 * another actor than the rank's DV_EINVAL, one that reaches past its
 * block DV_EOUT_OF_BOUNDS naming it (detail.requested: the bytes it
 * needs, detail.remaining: the bytes it has).  send and recv may be
 * the same bytes (in place) or not share any; any other overlap answers
 * DV_EINVAL.  On ranks other than the root, a buffer the call does not
 * use (broadcast's send, reduce's recv) may be DV_REF_NULL.
 */
/* recv := op over every rank's send (count elements each). */
DV_EXPORT int dv_nccl_all_reduce(dv_nccl_comm *c, int rank, dv_stream stream, dv_nccl_buf send,
                                 dv_nccl_buf recv, uint64_t count, dv_nccl_type type, dv_nccl_op op,
                                 dv_future *f);
/* recv on root := op over every rank's send. */
DV_EXPORT int dv_nccl_reduce(dv_nccl_comm *c, int rank, dv_stream stream, dv_nccl_buf send,
                             dv_nccl_buf recv, uint64_t count, dv_nccl_type type, dv_nccl_op op,
                             int root, dv_future *f);
/* recv on every rank := root's send. */
DV_EXPORT int dv_nccl_broadcast(dv_nccl_comm *c, int rank, dv_stream stream, dv_nccl_buf send,
                                dv_nccl_buf recv, uint64_t count, dv_nccl_type type, int root,
                                dv_future *f);
/* recv (nranks * count elements) := every rank's send (count), in rank
 * order.  In place: send is recv's part of this rank. */
DV_EXPORT int dv_nccl_all_gather(dv_nccl_comm *c, int rank, dv_stream stream, dv_nccl_buf send,
                                 dv_nccl_buf recv, uint64_t count, dv_nccl_type type, dv_future *f);
/* recv (count) := op over every rank's part `rank` of send (nranks *
 * count).  In place: recv is send's part of this rank. */
DV_EXPORT int dv_nccl_reduce_scatter(dv_nccl_comm *c, int rank, dv_stream stream, dv_nccl_buf send,
                                     dv_nccl_buf recv, uint64_t count, dv_nccl_type type,
                                     dv_nccl_op op, dv_future *f);
/* Point to point: count elements from rank to peer, which receives them
 * with dv_nccl_recv.  A pair whose two ranks each send before they
 * receive belongs in a group. */
DV_EXPORT int dv_nccl_send(dv_nccl_comm *c, int rank, dv_stream stream, dv_nccl_buf send,
                           uint64_t count, dv_nccl_type type, int peer, dv_future *f);
DV_EXPORT int dv_nccl_recv(dv_nccl_comm *c, int rank, dv_stream stream, dv_nccl_buf recv,
                           uint64_t count, dv_nccl_type type, int peer, dv_future *f);

/* Groups of calls on this thread (above).  Groups nest; the outermost end
 * posts.  group_end without a start: DV_EINVAL. */
DV_EXPORT int dv_nccl_group_start(void);
DV_EXPORT int dv_nccl_group_end(void);

#ifdef __cplusplus
}
#endif

#endif
