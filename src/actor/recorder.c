/*
 * The recorder (design: recorder.h).
 */
#include <stdio.h>
#include <string.h>

#include "actor/recorder.h"

int dv__rec_begin(dv_recorder *r, dv_actor *a, const dv_envelope *e, dv_chk_kind kind,
                  const char *name)
{
    DV_ASSERT_ACTOR(a);
    r->a = a;
    r->e = e;
    r->stream = e->m.stream;
    r->op = dv__msg_name(e->m.type);
    r->task = kind == DV_CHK_TASK;
    r->partial = false;
    r->nuses = 0;
    if (a->chk != NULL) {
        dv__chk_op_init(&r->chk, kind, e->m.stream, name, e->from->id, e->m.seq);
        r->chk.know = dv__know_of(a, e); /* the poster's */
    }
    return dv__check_stream(&a->env, e->m.stream, r->op);
}

dv_ref_slot *dv__rec_use(dv_recorder *r, dv_ref ref, uint64_t offset, uint64_t bytes,
                         dv_access access)
{
    dv_ref_slot *slot = dv__ref_lookup(r->a->refs, ref, r->op);
    if (slot == NULL)
        return NULL;
    uint64_t size = slot->block.requested;
    bool outside = bytes == 0 ? offset >= size : (offset > size || bytes > size - offset);
    if (outside) {
        dv__fail(DV_EINVAL, r->op,
                 "%s: range [%llu, %llu + %llu) is outside the block's %llu bytes", r->op,
                 (unsigned long long)offset, (unsigned long long)offset, (unsigned long long)bytes,
                 (unsigned long long)size);
        dv__detail()->generation = slot->block.generation;
        return NULL;
    }
    int j = 0;
    while (j < r->nuses && r->uses[j].slot != slot)
        j++;
    dv_assert(j < DV_REC_MAX_USES);
    if (j == r->nuses)
        r->uses[r->nuses++] = (dv_use){slot, 0};
    r->uses[j].access = (dv_access)(r->uses[j].access | access);
    /* A task's function sees the address: a raw pointer into the block is
     * legitimate from then on. */
    if (r->task)
        dv__ref_expose(slot->pub, slot->gen);
    /* The checker sees the range itself (no length: the whole block). */
    if (r->a->chk != NULL && r->chk.n < DV_CHK_MAX_ACCESSES) {
        dv__chk_op_add(&r->chk, bytes == 0 ? slot->block.ptr : slot->block.ptr + offset, bytes,
                       (uint8_t)access, false);
        r->chk.acc[r->chk.n - 1].base = slot->block.ptr;
    }
    return slot;
}

void dv__rec_raw(dv_recorder *r, uint64_t ptr, uint64_t bytes, uint8_t access)
{
    if (r->a->chk != NULL && r->chk.n < DV_CHK_MAX_ACCESSES) {
        dv__chk_op_add(&r->chk, ptr, bytes, access, false);
        r->chk.acc[r->chk.n - 1].raw = true;
    }
}

void dv__rec_host(dv_recorder *r, uint64_t ptr, uint64_t bytes, uint8_t access)
{
    if (r->a->chk == NULL)
        return;
    dv__chk_op_add(&r->chk, ptr, bytes, access, true);
}

int dv__rec_args(dv_recorder *r, const dv_arg *args, unsigned nargs, uint64_t *values,
                 bool allow_raw)
{
    for (unsigned i = 0; i < nargs; i++) {
        const dv_arg *arg = &args[i];
        switch (arg->kind) {
        case DV_ARG_VALUE:
            if (arg->size != 1 && arg->size != 2 && arg->size != 4 && arg->size != 8)
                return dv__fail(DV_EINVAL, r->op,
                                "%s: argument %u is a value of %u bytes (1, 2, "
                                "4 or 8; larger ones with dv_arg_bytes)",
                                r->op, i, arg->size);
            values[i] = arg->u.value;
            break;
        case DV_ARG_BYTES:
            if (arg->u.bytes == NULL || arg->size == 0 || arg->size > DV_ARG_MAX_BYTES)
                return dv__fail(
                    DV_EINVAL, r->op, "%s: argument %u: by-value bytes%s of %u bytes (1..%d)",
                    r->op, i, arg->u.bytes == NULL ? " at NULL" : "", arg->size, DV_ARG_MAX_BYTES);
            values[i] = (uint64_t)(uintptr_t)arg->u.bytes;
            break;
        case DV_ARG_PTR:
            if (!allow_raw)
                return dv__fail(DV_ESTREAM_MISUSE, r->op,
                                "%s: argument %u is a raw device pointer, which a strict actor "
                                "does not accept (it cannot fence it); pass a handle",
                                r->op, i);
            values[i] = arg->u.ptr;
            dv__rec_raw(r, arg->u.ptr, arg->bytes, arg->access);
            break;
        case DV_ARG_REF: {
            if (arg->access < DV_READ || arg->access > DV_READ_WRITE)
                return dv__fail(DV_EINVAL, r->op, "%s: argument %u has access %u", r->op, i,
                                arg->access);
            dv_ref_slot *slot =
                dv__rec_use(r, arg->u.ref, arg->offset, arg->bytes, (dv_access)arg->access);
            if (slot == NULL) {
                dv_error_detail *d = dv__detail();
                char msg[sizeof(d->message)];
                snprintf(msg, sizeof(msg), "argument %u: %.200s", i, d->message);
                memcpy(d->message, msg, sizeof(msg));
                return d->status;
            }
            values[i] = slot->block.ptr + arg->offset;
            break;
        }
        default:
            return dv__fail(DV_EINVAL, r->op, "%s: argument %u has kind %u", r->op, i, arg->kind);
        }
    }
    return DV_OK;
}

/* Synchronous debug mode: wait for the operation just enqueued, so a
 * fault is pinned on exactly this message.  Its status, or DV_OK. */
static int sync_debug(dv_recorder *r)
{
    if (!r->a->cfg.synchronous)
        return DV_OK;
    int rc = dv__drv_stream_sync(r->a->env.streams[r->stream]);
    if (rc == DV_ECONTEXT_LOST)
        dv__on_fault(r->a, rc, r->stream, r->e);
    /* Any other failure of the sync says nothing of the operation, which
     * is enqueued and may still run (into a host buffer the caller would
     * free once answered): it completes the usual way. */
    return rc == DV_ECONTEXT_LOST ? rc : DV_OK;
}

/* A copy refused part way: the steps it enqueued use the block and the
 * staging's chunks, never the caller's buffer (whose pumps stopped), which
 * the caller may use again at once. */
static void forget_host(dv_chk_op *op)
{
    unsigned k = 0;
    for (unsigned i = 0; i < op->n; i++)
        if (!op->acc[i].host)
            op->acc[k++] = op->acc[i];
    op->n = k;
}

static void finish(dv_recorder *r)
{
    for (int i = 0; i < r->nuses; i++) {
        dv_use *u = &r->uses[i];
        (void)dv__res_finish_block_use(r->a->stack, dv__block_id_of(&u->slot->block), r->stream,
                                       u->access);
        if (u->access != DV_ACCESS_READ)
            dv__ref_set_last_write(u->slot, r->stream);
    }
}

int dv__rec_run(dv_recorder *r, int (*enqueue)(dv_recorder *r, void *arg), void *arg)
{
    dv_actor *a = r->a;
    int rc;

    if (r->nuses > 0 && !dv__res_supports_block_use_tracking(a->stack))
        return dv__res_no_tracking(a->stack, r->op);
    for (int i = 0; i < r->nuses; i++) {
        dv_use *u = &r->uses[i];
        rc = dv__res_prepare_block_use(a->stack, dv__block_id_of(&u->slot->block), r->stream,
                                       u->access);
        if (rc != DV_OK)
            return dv__enqueue_failed(a, rc, r->stream, r->e);
    }
    if (a->chk != NULL && (rc = dv__checked(a, dv__checker_check(a->chk, &r->chk))) != DV_OK)
        return rc;
    rc = enqueue(r, arg);
    if (rc != DV_OK && !r->task && !r->partial)
        return dv__enqueue_failed(a, rc, r->stream, r->e);
    finish(r);
    /* A task is recorded even when it failed (it may have enqueued work),
     * but not when the checker dropped its captured work whole: then none
     * of it ran, and its declared accesses happened nowhere.  (A refusal
     * of one access leaves what else it enqueued running, and on the sim
     * nothing is captured: recorded.) */
    if (a->chk != NULL && rc != DV_OK && r->partial)
        forget_host(&r->chk);
    if (a->chk != NULL && !(r->task && a->task_dropped))
        dv__checker_commit(a->chk, &r->chk);
    if (rc != DV_OK)
        return r->task ? rc : dv__enqueue_failed(a, rc, r->stream, r->e);
    return sync_debug(r);
}
