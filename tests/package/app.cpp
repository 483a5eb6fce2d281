// A C++ consumer of devactor's public headers (-std=c++17 -Wall -Wextra
// -pedantic -Werror): an actor on the sim, a block set, copied back from
// another thread through a future, the BLAS, FFT, NCCL and resource headers
// compiled in.
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "devactor.h"
#include "devactor_blas.h"
#include "devactor_fft.h"
#include "devactor_nccl.h"
#include "devactor_resource.h"
#include "devactor_sim.h"

int main()
{
    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    dv_actor *a = nullptr;
    if (dv_actor_create(&cfg, &a) != DV_OK) {
        std::fprintf(stderr, "dv_actor_create: %s\n", dv_last_error()->message);
        return 1;
    }
    dv_ref r = DV_REF_NULL;
    int rc = dv_alloc(a, 1 << 16, 0, "app++", &r);
    if (rc == DV_OK)
        rc = dv_memset(a, r, 0, 0x5a, 1 << 16, 1);
    std::vector<unsigned char> host(1 << 16);
    int copied = DV_EINVAL;
    std::thread t([&] {
        dv_future f;
        dv_future_init(&f, 0);
        if (dv_copy_dtoh_async(a, host.data(), r, 0, host.size(), 2, &f) == DV_OK)
            copied = dv_future_wait(&f);
    });
    t.join();
    bool right = copied == DV_OK && host[0] == 0x5a && host[host.size() - 1] == 0x5a;
    std::printf("devactor %s from C++: %s, bytes %s\n", dv_version(), dv_err_name(rc ? rc : copied),
                right ? "right" : "wrong");
    dv_ref_release(r);
    dv_actor_destroy(a);
    return rc == DV_OK && right ? 0 : 1;
}
