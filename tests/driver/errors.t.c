/* The error model: one list, distinct names and messages, the driver-code
 * table, and the per-thread detail. */
#include <pthread.h>

#include "driver/port.h"
#include "tap.h"

static const int codes[] = {
#define X(name, value, msg) DV_##name,
    DV_ERRNO_MAP(X)
#undef X
};
#define NCODES (int)(sizeof(codes) / sizeof(codes[0]))

static void *other_thread(void *arg)
{
    (void)arg;
    /* A fresh thread has no failure recorded. */
    return (void *)(intptr_t)dv_last_error()->status;
}

int main(void)
{
    plan(26);
    bool distinct = true, negative = true, named = true;
    for (int i = 0; i < NCODES; i++) {
        negative &= codes[i] < 0;
        named &= strncmp(dv_err_name(codes[i]), "DV_E", 4) == 0 &&
                 strcmp(dv_strerror(codes[i]), "unknown error") != 0;
        for (int j = 0; j < i; j++)
            distinct &= codes[i] != codes[j] &&
                        strcmp(dv_err_name(codes[i]), dv_err_name(codes[j])) != 0 &&
                        strcmp(dv_strerror(codes[i]), dv_strerror(codes[j])) != 0;
    }
    ok(NCODES >= 15, "%d error codes", NCODES);
    ok(negative, "every code is negative");
    ok(distinct, "codes, names and messages are distinct");
    ok(named, "every code has a DV_E name and a message");
    is_str(dv_err_name(DV_OK), "DV_OK", "DV_OK has a name");
    is_str(dv_err_name(DV_EOUT_OF_BUDGET), "DV_EOUT_OF_BUDGET", "names come from the list");
    is_str(dv_strerror(12345), "unknown error", "an unknown code has a message");
    is_str(dv_err_name(-999), "DV_UNKNOWN", "an unknown code has a name");

    is_int(dv__status_from_driver(0), DV_OK, "CUDA_SUCCESS -> DV_OK");
    is_int(dv__status_from_driver(2), DV_EDEVICE_OOM, "OUT_OF_MEMORY -> EDEVICE_OOM");
    is_int(dv__status_from_driver(100), DV_ENODEVICE, "NO_DEVICE -> ENODEVICE");
    is_int(dv__status_from_driver(700), DV_ECONTEXT_LOST, "ILLEGAL_ADDRESS -> ECONTEXT_LOST");
    is_int(dv__status_from_driver(600), DV_EAGAIN, "NOT_READY -> EAGAIN");
    is_int(dv__status_from_driver(4242), DV_EDRIVER, "an unlisted code -> EDRIVER");
    ok(dv__driver_code_is_sticky(700) && dv__driver_code_is_sticky(719) &&
           !dv__driver_code_is_sticky(2) && !dv__driver_code_is_sticky(1),
       "sticky: ILLEGAL_ADDRESS and LAUNCH_FAILED; not OOM or INVALID_VALUE");

    dv_error_clear();
    is_int(dv_last_error()->status, 0, "cleared detail reads ok");
    int rc = dv__fail(DV_EOUT_OF_BUDGET, "allocate", "asked %d", 7);
    is_int(rc, DV_EOUT_OF_BUDGET, "dv__fail returns its status");
    is_str(dv_last_error()->message, "asked 7", "detail keeps the message");
    is_str(dv_last_error()->call, "allocate", "detail keeps the call");
    rc = dv_error_set(DV_EOUT_OF_BOUNDS, "wrapper", 64, 4, "operand %s", "C");
    ok(rc == DV_EOUT_OF_BOUNDS && dv_last_error()->status == DV_EOUT_OF_BOUNDS &&
           strcmp(dv_last_error()->call, "wrapper") == 0 && dv_last_error()->requested == 64 &&
           dv_last_error()->remaining == 4 && strcmp(dv_last_error()->message, "operand C") == 0,
       "dv_error_set records status, call, bytes and message, and returns the status");
    dv_error_set(DV_EINVAL, "wrapper", 0, 0, NULL);
    is_str(dv_last_error()->message, dv_strerror(DV_EINVAL), "... without a message: the code's");
    rc = dv__fail_driver(NULL, "mem_alloc", 2);
    is_int(rc, DV_EDEVICE_OOM, "a driver failure maps through the table");
    ok(dv_last_error()->driver_code == 2 &&
           strcmp(dv_last_error()->driver_name, "CUDA_ERROR_OUT_OF_MEMORY") == 0,
       "detail keeps the raw code and its name");
    pthread_t t;
    void *res = NULL;
    pthread_create(&t, NULL, other_thread, NULL);
    pthread_join(t, &res);
    is_int((int)(intptr_t)res, 0, "detail is per thread");
    is_int(dv_last_error()->status, DV_EDEVICE_OOM, "this thread's detail is unchanged");
    char want[32];
    snprintf(want, sizeof(want), "%d.%d.%d", DV_VERSION_MAJOR, DV_VERSION_MINOR, DV_VERSION_PATCH);
    is_str(dv_version(), want, "version string: the header's DV_VERSION_*");
    return tap_done();
}
