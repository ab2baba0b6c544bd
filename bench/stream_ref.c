/* An independent STREAM build in plain C and OpenMP, to validate
 * `zaya bench membw` (docs/bench.md, "Validation"). Written for zaya.cpp after
 * McCalpin's STREAM rules: four kernels over three double arrays, byte counts
 * 16 (copy, scale) and 24 (add, triad) per element, best of NTIMES, the first
 * pass untimed, arrays first touched by the threads that use them.
 *
 *   cc -O3 -march=native -fopenmp -o stream_ref stream_ref.c
 *   OMP_NUM_THREADS=2 ./stream_ref [elements per array] [repetitions]
 */
#include <float.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

static double now(void) { return omp_get_wtime(); }

int main(int argc, char** argv) {
  const long n = argc > 1 ? atol(argv[1]) : 20000000L;
  const int reps = argc > 2 ? atoi(argv[2]) : 10;
  double* a = aligned_alloc(64, (size_t)n * sizeof(double) + 64);
  double* b = aligned_alloc(64, (size_t)n * sizeof(double) + 64);
  double* c = aligned_alloc(64, (size_t)n * sizeof(double) + 64);
  if (!a || !b || !c) {
    fprintf(stderr, "cannot allocate 3 x %ld doubles\n", n);
    return 1;
  }
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i) {
    a[i] = 1.0;
    b[i] = 2.0;
    c[i] = 0.0;
  }
  const double s = 3.0;
  const char* names[4] = {"copy", "scale", "add", "triad"};
  const double bytes[4] = {16.0 * n, 16.0 * n, 24.0 * n, 24.0 * n};
  double best[4] = {FLT_MAX, FLT_MAX, FLT_MAX, FLT_MAX};
  for (int r = 0; r <= reps; ++r) {
    double t[4];
    t[0] = now();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i) c[i] = a[i];
    t[0] = now() - t[0];
    t[1] = now();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i) b[i] = s * c[i];
    t[1] = now() - t[1];
    t[2] = now();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i) c[i] = a[i] + b[i];
    t[2] = now() - t[2];
    t[3] = now();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
    t[3] = now() - t[3];
    if (r == 0) continue; /* the first pass is untimed */
    for (int k = 0; k < 4; ++k)
      if (t[k] < best[k]) best[k] = t[k];
  }
  /* STREAM's validation: after reps+1 rounds the arrays hold known values. */
  double ea = 1.0, eb = 2.0, ec = 0.0;
  for (int r = 0; r <= reps; ++r) {
    ec = ea;
    eb = s * ec;
    ec = ea + eb;
    ea = eb + s * ec;
  }
  long bad = 0;
  for (long i = 0; i < n; i += 4099)
    if (a[i] != ea || b[i] != eb || c[i] != ec) ++bad;
  printf("# stream_ref: %ld doubles per array (%.1f MiB each, %.1f MiB total), %d threads, best of %d\n", n,
         n * 8.0 / 1048576, 3 * n * 8.0 / 1048576, omp_get_max_threads(), reps);
  for (int k = 0; k < 4; ++k) printf("%-6s %10.2f GB/s\n", names[k], bytes[k] / best[k] / 1e9);
  printf("validation: %s\n", bad ? "FAILED" : "ok");
  free(a);
  free(b);
  free(c);
  return bad ? 1 : 0;
}
