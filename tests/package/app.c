/* A consumer of devactor built outside its tree: an actor on the sim, a
 * block written and read back. */
#include <stdio.h>
#include "devactor.h"
#include "devactor_blas.h"
int main(void)
{
    dv_actor_config cfg;
    dv_actor *a = NULL;
    dv_actor_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    if (dv_actor_create(&cfg, &a) != DV_OK)
        return 1;
    dv_ref r;
    int rc = dv_alloc(a, 4096, 0, "app", &r);
    rc = rc == DV_OK ? dv_memset(a, r, 0, 7, 4096, 0) : rc;
    unsigned char b[4096];
    rc = rc == DV_OK ? dv_copy_dtoh(a, b, r, 0, 4096, 0) : rc;
    printf("devactor %s: %s, byte %d\n", dv_version(), dv_err_name(rc), b[100]);
    dv_ref_release(r);
    dv_actor_destroy(a);
    return rc == DV_OK && b[100] == 7 ? 0 : 1;
}
