/* The FFT library actor's test on the real driver with cuFFT; skipped
 * without a device or without cuFFT. */
#define FFT_ON_CUDA 1
#include "fft.t.c"
