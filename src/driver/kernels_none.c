/* Built without nvcc: no fatbin; the sim uses its own image. */
#include "driver/port.h"

const unsigned char dv__kernels_fatbin[1] = {0};
const size_t dv__kernels_fatbin_size = 0;
