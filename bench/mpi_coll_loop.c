/* A plain MPI_Allreduce timing loop, independent of zaya.cpp, to validate the
 * numbers of `zaya bench comm all_reduce` (docs/bench.md, "Validation").
 *
 * It does what nccl-tests does for the out-of-place column, in plain C:
 * float sum, warm-up operations, a barrier, `iters` timed operations on
 * buffers rotated through one allocation of the largest size, the time per
 * operation averaged over the ranks, busbw = algbw * 2(n-1)/n. It also
 * prints the median over iterations of each iteration's slowest rank (what
 * `zaya bench comm --time-stat median` reports), which a shared, noisy
 * machine disturbs far less than the mean.
 *
 * With -I 1 every operation is MPI_Iallreduce + MPI_Wait, which is how zaya's
 * Comm layer issues its collectives (src/zaya/dist/mpi_comm.cc: non-blocking
 * calls so that a deadline can stop a hang); Open MPI serves the two forms
 * with different algorithms (tuned vs libnbc), so small messages differ.
 *
 *   mpicc -O2 -o mpi_allreduce_loop mpi_allreduce_loop.c
 *   mpirun -np 2 ./mpi_allreduce_loop [-b minbytes] [-e maxbytes] [-f factor] [-n iters] [-w warmup] [-R 0|1] [-I 0|1]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cmp_double(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static size_t parse_size(const char* s) {
  char* end = NULL;
  double v = strtod(s, &end);
  switch (*end) {
    case 'K':
    case 'k': v *= 1024.0; break;
    case 'M':
    case 'm': v *= 1048576.0; break;
    case 'G':
    case 'g': v *= 1073741824.0; break;
    default: break;
  }
  return (size_t)v;
}

int main(int argc, char** argv) {
  size_t min_bytes = 1024, max_bytes = 1 << 26, factor = 2;
  int iters = 20, warmup = 5, rotate = 1, nonblocking = 0, opt;
  MPI_Init(&argc, &argv);
  while ((opt = getopt(argc, argv, "b:e:f:n:w:R:I:")) != -1) {
    switch (opt) {
      case 'b': min_bytes = parse_size(optarg); break;
      case 'e': max_bytes = parse_size(optarg); break;
      case 'f': factor = (size_t)atol(optarg); break;
      case 'n': iters = atoi(optarg); break;
      case 'w': warmup = atoi(optarg); break;
      case 'R': rotate = atoi(optarg); break;
      case 'I': nonblocking = atoi(optarg); break;
      default:
        fprintf(stderr,
                "usage: %s [-b min] [-e max] [-f factor] [-n iters] [-w warmup] [-R rotate 0|1] [-I nonblocking 0|1]\n",
                argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (factor < 2) factor = 2;
  float* send = (float*)aligned_alloc(64, (max_bytes + 63) / 64 * 64 + 64);
  float* recv = (float*)aligned_alloc(64, (max_bytes + 63) / 64 * 64 + 64);
  if (!send || !recv) MPI_Abort(MPI_COMM_WORLD, 1);
  for (size_t i = 0; i < max_bytes / sizeof(float); ++i) {
    send[i] = (float)(rank + 1);
    recv[i] = 0.0f;
  }
  if (rank == 0) {
    printf("# plain %s loop: %d ranks, float sum, %d warm-up, %d timed iterations, rotate %d\n",
           nonblocking ? "MPI_Iallreduce + MPI_Wait" : "MPI_Allreduce", size, warmup, iters, rotate);
    printf("# %10s %12s %10s %8s %8s %12s\n", "size", "count", "time(us)", "algbw", "busbw", "median(us)");
  }
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= factor) {
    const size_t count = bytes / sizeof(float);
    const size_t steps = count ? max_bytes / (count * sizeof(float)) : 1;
    for (int i = 0; i < warmup; ++i) MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double* it = malloc(sizeof(double) * (size_t)iters);
    double* slowest = malloc(sizeof(double) * (size_t)iters);
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) {
      const size_t shift = rotate ? count * (size_t)(i % (int)steps) : 0;
      const double ti = MPI_Wtime();
      if (nonblocking) {
        MPI_Request req;
        MPI_Iallreduce(send + shift, recv + shift, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
      } else {
        MPI_Allreduce(send + shift, recv + shift, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      }
      it[i] = MPI_Wtime() - ti;
    }
    double t = (MPI_Wtime() - t0) / iters, avg = 0;
    MPI_Allreduce(&t, &avg, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    avg /= size;
    MPI_Allreduce(it, slowest, iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    qsort(slowest, (size_t)iters, sizeof(double), cmp_double);
    const double median = slowest[(iters + 1) / 2 - 1]; /* nearest rank, as zaya's p50 */
    const double algbw = (double)(count * sizeof(float)) / 1e9 / avg;
    if (rank == 0)
      printf("%12zu %12zu %10.2f %8.3f %8.3f %12.2f\n", count * sizeof(float), count, avg * 1e6, algbw,
             algbw * 2.0 * (size - 1) / size, median * 1e6);
    free(it);
    free(slowest);
    if (bytes > max_bytes / factor) break;
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
