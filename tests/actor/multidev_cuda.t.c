/*
 * Several real devices: the process-wide actors of devices 0 and 1 (one
 * shared driver), a peer copy between their blocks, verified.  Skipped
 * where fewer than two CUDA devices answer.
 */
#include <stdlib.h>

#include "devactor.h"
#include "tap.h"

int main(void)
{
    static uint32_t host[1 << 16], back[1 << 16];
    dv_actor *a = NULL, *b = NULL;
    dv_ref x, y;

    setenv("DV_BACKEND", "cuda", 1);
    int ra = dv_actor_get(0, &a);
    if (ra != DV_OK)
        skip_all("%s", dv_last_error()->message);
    int rb = dv_actor_get(1, &b);
    if (rb != DV_OK)
        skip_all("one CUDA device: %s", dv_last_error()->message);
    plan(7);
    ok(a != b, "two process-wide actors, one per device");
    for (int i = 0; i < (1 << 16); i++)
        host[i] = (uint32_t)i * 2246822519u;
    is_status(dv_alloc(a, sizeof(host), 0, "src", &x), DV_OK, "alloc on device 0");
    is_status(dv_alloc(b, sizeof(host), 1, "dst", &y), DV_OK, "alloc on device 1");
    dv_copy_htod(a, x, 0, host, sizeof(host), 1);
    is_status(dv_copy_dtod(b, y, 0, x, 0, sizeof(host), 0), DV_OK, "peer copy device 0 -> 1");
    is_status(dv_copy_dtoh(b, back, y, 0, sizeof(back), 1), DV_OK, "read back on device 1");
    ok(memcmp(host, back, sizeof(host)) == 0, "the data arrived intact");
    is_status(dv_memset(a, y, 0, 0, 4, 0), DV_EINVAL, "device 1's handle at device 0's actor");
    dv_ref_release(x);
    dv_ref_release(y);
    return tap_done(); /* the registry stops both actors at exit */
}
