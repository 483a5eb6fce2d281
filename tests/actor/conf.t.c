/*
 * Configuration without code: dv_actor_config_parse, and DEVACTOR_CONF for
 * the process-wide actors.
 *
 *   - every key sets its field; sizes with K/M/G/T (and KiB, MB, m), the
 *     switches' spellings, spaces and empty items;
 *   - an unknown key, a bad value, a missing colon, an absurd size: each
 *     DV_EINVAL naming the key, the config unchanged;
 *   - dv_actor_get under DEVACTOR_CONF: a bad one builds nothing and says
 *     why, a good one builds an actor that keeps the budget, the streams
 *     and the log it names ("%d" the device).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devactor.h"
#include "tap.h"

static bool unchanged(const dv_actor_config *a, const dv_actor_config *b)
{
    return memcmp(a, b, sizeof(*a)) == 0;
}

static void refused(const char *text, const char *names)
{
    dv_actor_config cfg, before;
    dv_actor_config_init(&cfg);
    cfg.budget_bytes = 777;
    before = cfg;
    int rc = dv_actor_config_parse(&cfg, text);
    ok(rc == DV_EINVAL && unchanged(&cfg, &before) && strstr(dv_last_error()->message, names),
       "\"%s\": DV_EINVAL naming \"%s\", nothing changed (%s)", text, names,
       dv_last_error()->message);
}

int main(void)
{
    plan(36);
    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    is_status(dv_actor_config_parse(&cfg,
                                    "backend:sim, streams:8,queue:4096 ,pool:0,pool_initial:2M,"
                                    "pool_max_chunk:1GiB,budget:3G,guard:on,log:/tmp/x-%d.csv,"
                                    "synchronous:false,permissive:yes,check_order:TRUE,"
                                    "host_budget:512m,staging:64MB,staging_chunk:1k,copy_threads:2,"
                                    "pool_chunks:1,pool_keep_mapped:yes,pool_alias:on"),
              DV_OK, "every key at once");
    ok(cfg.backend == DV_BACKEND_SIM && cfg.streams == 8 && cfg.queue_capacity == 4096 && !cfg.pool,
       "backend, streams, queue, pool");
    ok(cfg.pool_initial_bytes == 2u << 20 && cfg.pool_max_chunk_bytes == 1u << 30 &&
           cfg.budget_bytes == UINT64_C(3) << 30,
       "pool_initial 2M, pool_max_chunk 1GiB, budget 3G");
    ok(cfg.guard && !cfg.synchronous && cfg.permissive && cfg.check_order,
       "guard on, synchronous false, permissive yes, check_order TRUE");
    ok(cfg.host_budget_bytes == 512u << 20 && cfg.staging_bytes == 64u << 20 &&
           cfg.staging_chunk_bytes == 1024 && cfg.copy_threads == 2,
       "host_budget 512m, staging 64MB, staging_chunk 1k, copy_threads 2");
    ok(cfg.pool_chunks && cfg.pool_keep_mapped && cfg.pool_alias,
       "pool_chunks 1, pool_keep_mapped yes, pool_alias on");
    ok(cfg.log_path != NULL && strcmp(cfg.log_path, "/tmp/x-%d.csv") == 0, "log kept: %s",
       cfg.log_path ? cfg.log_path : "(null)");
    const char *kept = cfg.log_path;
    dv_actor_config other;
    dv_actor_config_init(&other);
    dv_actor_config_parse(&other, "log:/tmp/x-%d.csv");
    ok(other.log_path == kept, "one copy per distinct string");
    is_int((int)other.streams, 4, "keys not named keep what the config held");
    is_status(dv_actor_config_parse(&other, ""), DV_OK, "an empty text changes nothing");
    is_status(dv_actor_config_parse(&other, " , ,"), DV_OK, "nor does a text of empty items");
    is_status(dv_actor_config_parse(&other, "budget:0"), DV_OK, "budget:0 (no limit)");
    is_status(dv_actor_config_parse(&other, "log:"), DV_OK, "log: (none)");
    is_status(dv_actor_config_parse(&other, "staging_chunk:65536B"), DV_OK, "65536B (bytes)");
    is_int((int)other.staging_chunk_bytes, 65536, "a bare B is bytes");
    ok(other.log_path == NULL && other.budget_bytes == 0, "both taken");

    refused("budgte:1G", "budgte");
    refused("budget:1G,bogus:1", "bogus");
    refused("budget:lots", "budget");
    refused("budget:-1", "budget");
    refused("budget:1Q", "budget");
    refused("budget:99999999999T", "budget");
    refused("streams:5000000000", "streams");
    refused("guard:maybe", "guard");
    refused("backend:opencl", "backend");
    refused("streams", "not key:value");
    dv_actor_config junk;
    memset(&junk, 0, sizeof(junk));
    is_status(dv_actor_config_parse(&junk, "streams:2"), DV_EINVAL,
              "a config never set up: DV_EINVAL");
    is_status(dv_actor_config_parse(NULL, "streams:2"), DV_EINVAL, "NULL config");

    /* The process-wide actor under DEVACTOR_CONF. */
    char log[256];
    snprintf(log, sizeof(log), "/tmp/dv-conf-test-%d-%%d.csv", (int)getpid());
    char conf[512];
    setenv("DEVACTOR_CONF", "backend:sim,budget:16M,streams:3,bogus:1", 1);
    dv_actor *a = NULL;
    int rc = dv_actor_get(0, &a);
    ok(rc == DV_EINVAL && a == NULL && strstr(dv_last_error()->message, "DEVACTOR_CONF") &&
           strstr(dv_last_error()->message, "bogus"),
       "a bad DEVACTOR_CONF: DV_EINVAL, no actor (%s)", dv_last_error()->message);
    setenv("DEVACTOR_CONF", "backend:sim,a_very_long_unknown_key_name_here_and_more:1", 1);
    rc = dv_actor_get(0, &a);
    ok(rc == DV_EINVAL && strstr(dv_last_error()->message, "a_very_long") &&
           strstr(dv_last_error()->message, " copy_threads") &&
           strstr(dv_last_error()->message, "pool_alias"),
       "a long unknown key: the message names it and still lists every known key (%s)",
       dv_last_error()->message);
    setenv("DEVACTOR_CONF", "backend:sim,streams:0", 1);
    rc = dv_actor_get(0, &a);
    ok(rc == DV_EINVAL && a == NULL && strstr(dv_last_error()->message, "DEVACTOR_CONF"),
       "one the actor refuses (streams:0) says where it came from (%s)",
       dv_last_error()->message);
    snprintf(conf, sizeof(conf), "backend:sim,budget:16M,streams:3,log:%s", log);
    setenv("DEVACTOR_CONF", conf, 1);
    if (!is_status(dv_actor_get(0, &a), DV_OK, "a good one: the actor (%s)", conf))
        bail_out("no actor");
    dv_ref r = DV_REF_NULL, big = DV_REF_NULL;
    rc = dv_alloc(a, 1 << 20, 2, "ok", &r);
    dv_ref_info info;
    rc = rc == DV_OK ? dv_ref_access(r, &info) : rc;
    is_status(rc, DV_OK, "1 MiB on stream 2 of 3");
    is_status(dv_alloc(a, 1 << 20, 3, "no such stream", &big), DV_EINVAL, "stream 3: none");
    dv_alloc(a, 32u << 20, 0, "over", &big);
    is_status(dv_ref_access(big, &info), DV_EOUT_OF_BUDGET, "32 MiB: over the 16M budget");
    dv_ref_release(big);
    dv_ref_release(r);
    dv_flush(a);
    dv_actor_shutdown(a);
    char path[300];
    snprintf(path, sizeof(path), "/tmp/dv-conf-test-%d-0.csv", (int)getpid());
    FILE *f = fopen(path, "r");
    char line[512];
    int rows = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        rows += strstr(line, ",ok,") != NULL || strstr(line, ",over,") != NULL;
    if (f != NULL)
        fclose(f);
    ok(rows >= 2, "the log (%s) holds its rows (%d)", path, rows);
    unlink(path);
    return tap_done();
}
