/*
 * A program built against an older devactor.h (tests/package/abi/first:
 * the header as it first carried the sizes, before the resource stack's
 * config fields and the memory statistics), linked with today's shared
 * library:
 * the ABI rule of devactor.h.  The library must take the old structs' sizes
 * and never write past them; structs "from a newer header" (larger, zero
 * past the library's own bytes) are taken, non-zero bytes there refused.
 *
 * Built with the old header's directory first on the include path; the
 * layouts below are the old header's.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "devactor.h"
#include "tap.h"

#define CANARY 0xc5

static bool intact(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != CANARY)
            return false;
    return true;
}

/* Each struct with canary bytes right after its (old) end. */
struct config_box {
    dv_actor_config c;
    unsigned char after[64];
};
struct future_box {
    dv_future f;
    unsigned char after[64];
};
struct stats_box {
    dv_actor_stats s;
    unsigned char after[64];
};
struct health_box {
    dv_actor_health h;
    unsigned char after[64];
};
/* A "newer" caller: a struct larger than this library's own config, with
 * fields at its end the library does not know. */
struct config_newer {
    dv_actor_config c;
    uint64_t more[64];
};
struct future_newer {
    dv_future f;
    uint64_t more[8];
};

int main(void)
{
    plan(23);
    int major = -1, minor = -1;
    sscanf(dv_version(), "%d.%d", &major, &minor);
    ok(major == DV_VERSION_MAJOR && minor >= DV_VERSION_MINOR,
       "library %s serves a program built against %d.%d.%d", dv_version(), DV_VERSION_MAJOR,
       DV_VERSION_MINOR, DV_VERSION_PATCH);
    diag("old layouts: dv_actor_config %zu, dv_future %zu, dv_actor_stats %zu, dv_actor_health %zu",
         sizeof(dv_actor_config), sizeof(dv_future), sizeof(dv_actor_stats),
         sizeof(dv_actor_health));

    struct config_box cb;
    memset(&cb, CANARY, sizeof(cb));
    dv_actor_config_init(&cb.c);
    ok(intact(cb.after, sizeof(cb.after)), "dv_actor_config_init wrote nothing past the old config");
    is_int(cb.c.size, (int)sizeof(dv_actor_config), "the config's size is the old sizeof");
    is_int((int)cb.c.streams, 4, "defaults set (streams 4)");
    cb.c.backend = DV_BACKEND_SIM;
    dv_actor *a = NULL;
    if (!is_status(dv_actor_create(&cb.c, &a), DV_OK, "an actor from the old config"))
        bail_out("no actor: %s", dv_last_error()->message);
    ok(intact(cb.after, sizeof(cb.after)), "dv_actor_create read the old config, wrote nothing past it");

    struct future_box fa, fm, fc;
    memset(&fa, CANARY, sizeof(fa));
    memset(&fm, CANARY, sizeof(fm));
    memset(&fc, CANARY, sizeof(fc));
    dv_future_init(&fa.f, 0);
    dv_future_init(&fm.f, 0);
    dv_future_init(&fc.f, 0);
    ok(intact(fa.after, 64) && intact(fm.after, 64) && intact(fc.after, 64),
       "dv_future_init wrote nothing past the old future");
    dv_ref r = DV_REF_NULL;
    unsigned char host[4096];
    memset(host, 0, sizeof(host));
    int rc = dv_alloc_async(a, sizeof(host), 0, "old", &r, &fa.f);
    rc = rc == DV_OK ? dv_memset_async(a, r, 0, 0x3c, sizeof(host), 1, &fm.f) : rc;
    rc = rc == DV_OK ? dv_copy_dtoh_async(a, host, r, 0, sizeof(host), 2, &fc.f) : rc;
    is_status(rc, DV_OK, "alloc, memset and copy posted with old futures");
    is_status(dv_future_wait(&fa.f), DV_OK, "the allocation's future");
    is_status(dv_future_wait(&fm.f), DV_OK, "the memset's future");
    is_status(dv_future_wait(&fc.f), DV_OK, "the copy's future");
    ok(host[0] == 0x3c && host[sizeof(host) - 1] == 0x3c, "the bytes came back");
    ok(intact(fa.after, 64) && intact(fm.after, 64) && intact(fc.after, 64),
       "completing them wrote nothing past the old futures");

    struct stats_box sb;
    memset(&sb, CANARY, sizeof(sb));
    is_status(dv_actor_stats_get(a, &sb.s), DV_OK, "dv_actor_stats_get into the old stats");
    ok(intact(sb.after, sizeof(sb.after)), "nothing written past the old stats");
    ok(sb.s.allocs >= 1 && sb.s.memsets >= 1 && sb.s.copies >= 1,
       "the old fields hold the counts (allocs %llu, memsets %llu, copies %llu)",
       (unsigned long long)sb.s.allocs, (unsigned long long)sb.s.memsets,
       (unsigned long long)sb.s.copies);
    struct health_box hb;
    memset(&hb, CANARY, sizeof(hb));
    is_status(dv_actor_health_get(a, &hb.h), DV_OK, "dv_actor_health_get into the old health");
    ok(intact(hb.after, sizeof(hb.after)) && hb.h.state == DV_ACTOR_RUNNING,
       "running, nothing written past the old health");
    dv_ref_release(r);
    dv_actor_destroy(a);

    /* A caller from a newer header: larger structs. */
    struct config_newer n;
    memset(&n, 0, sizeof(n));
    dv_actor_config_init_sized(&n.c, sizeof(n));
    n.c.backend = DV_BACKEND_SIM;
    a = NULL;
    is_status(dv_actor_create(&n.c, &a), DV_OK,
              "a larger config, zero past the library's fields: taken");
    struct future_newer fn;
    memset(&fn, 0xA5, sizeof(fn));
    dv_future_init_sized(&fn.f, 0, sizeof(fn));
    int fr = dv_sync_async(a, 0, &fn.f);
    fr = fr == DV_OK ? dv_future_wait(&fn.f) : fr;
    ok(fr == DV_OK && fn.more[0] == 0 && fn.more[7] == 0,
       "a larger future: init zeroes the caller's whole struct, and it serves (%s)",
       dv_err_name(fr));
    fn.more[7] = 1;
    is_status(dv_sync_async(a, 0, &fn.f), DV_EINVAL,
              "a larger future with a byte set past the library's fields: DV_EINVAL");
    diag("%s", dv_last_error()->message);
    dv_actor_destroy(a);
    n.more[63] = 1;
    a = NULL;
    is_status(dv_actor_create(&n.c, &a), DV_EINVAL,
              "a larger config that sets a field the library does not know: DV_EINVAL");
    diag("%s", dv_last_error()->message);
    dv_actor_destroy(a);
    dv_actor_config junk;
    memset(&junk, 0, sizeof(junk));
    junk.backend = DV_BACKEND_SIM;
    is_status(dv_actor_create(&junk, &a), DV_EINVAL, "a config never set up (size 0): DV_EINVAL");
    return tap_done();
}
