/* Plain MPI timing loops, one per collective, independent of zaya.cpp, to
 * validate the numbers of `zaya bench comm` (docs/bench.md, "Validation") and
 * to be the reference the Comm layer is held to (bench/comm_vs_mpi.sh).
 *
 * It does what nccl-tests does, in plain C: float data (sum where the
 * collective reduces), warm-up operations, a barrier, `iters` timed
 * operations on buffers rotated through one allocation of the largest size,
 * the time per operation averaged over the ranks, and the median over
 * iterations of each iteration's slowest rank (what `zaya bench comm
 * --time-stat median` reports; a shared, noisy machine disturbs it far less
 * than the mean). Sizes, counts and bus bandwidth follow zaya bench comm
 * (src/zaya/bench/comm_collectives.h): size = the larger of a rank's send and
 * receive buffers,
 *   -C all_reduce      MPI_Allreduce, count = size/4,       busbw = algbw 2(n-1)/n
 *      reduce_scatter  MPI_Reduce_scatter_block, size/4/n received per rank, (n-1)/n
 *      all_gather      MPI_Allgather, size/4/n sent per rank,               (n-1)/n
 *      broadcast       MPI_Bcast from rank 0, count = size/4,               1
 *      all_to_all_v    MPI_Alltoallv, size/4/n to every peer (a uniform matrix), (n-1)/n
 * With -I 1 every operation is the non-blocking form (MPI_Iallreduce, ...) +
 * MPI_Wait instead, which Open MPI serves with other algorithms (libnbc).
 *
 *   mpicc -O2 -o mpi_coll_loop mpi_coll_loop.c
 *   mpirun -np 2 ./mpi_coll_loop [-C collective] [-b minbytes] [-e maxbytes] [-f factor] [-n iters] [-w warmup]
 *                                [-R 0|1] [-I 0|1]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, BROADCAST, ALL_TO_ALL_V };
static const char* const kNames[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "all_to_all_v"};

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

/* One operation of `coll` on `count` elements (per rank or per peer, as above). */
static void issue(int coll, int nonblocking, float* send, float* recv, size_t count, int n, int* counts, int* displs) {
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Request* r = nonblocking ? &req : NULL;
  const int c = (int)count;
  switch (coll) {
    case ALL_REDUCE:
      if (r)
        MPI_Iallreduce(send, recv, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, r);
      else
        MPI_Allreduce(send, recv, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    case REDUCE_SCATTER:
      if (r)
        MPI_Ireduce_scatter_block(send, recv, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, r);
      else
        MPI_Reduce_scatter_block(send, recv, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    case ALL_GATHER:
      if (r)
        MPI_Iallgather(send, c, MPI_FLOAT, recv, c, MPI_FLOAT, MPI_COMM_WORLD, r);
      else
        MPI_Allgather(send, c, MPI_FLOAT, recv, c, MPI_FLOAT, MPI_COMM_WORLD);
      break;
    case BROADCAST: /* in place, as zaya's Comm::broadcast */
      if (r)
        MPI_Ibcast(recv, c, MPI_FLOAT, 0, MPI_COMM_WORLD, r);
      else
        MPI_Bcast(recv, c, MPI_FLOAT, 0, MPI_COMM_WORLD);
      break;
    case ALL_TO_ALL_V:
      for (int i = 0; i < n; ++i) {
        counts[i] = c;
        displs[i] = c * i;
      }
      if (r)
        MPI_Ialltoallv(send, counts, displs, MPI_FLOAT, recv, counts, displs, MPI_FLOAT, MPI_COMM_WORLD, r);
      else
        MPI_Alltoallv(send, counts, displs, MPI_FLOAT, recv, counts, displs, MPI_FLOAT, MPI_COMM_WORLD);
      break;
  }
  if (r) MPI_Wait(r, MPI_STATUS_IGNORE);
}

int main(int argc, char** argv) {
  size_t min_bytes = 1024, max_bytes = 1 << 26, factor = 2;
  int iters = 20, warmup = 5, rotate = 1, nonblocking = 0, coll = ALL_REDUCE, opt;
  MPI_Init(&argc, &argv);
  while ((opt = getopt(argc, argv, "C:b:e:f:n:w:R:I:")) != -1) {
    switch (opt) {
      case 'C':
        coll = -1;
        for (int i = 0; i < 5; ++i)
          if (strcmp(optarg, kNames[i]) == 0) coll = i;
        if (coll < 0) {
          fprintf(stderr,
                  "unknown collective '%s'; allowed: all_reduce, reduce_scatter, all_gather, broadcast, "
                  "all_to_all_v\n",
                  optarg);
          MPI_Abort(MPI_COMM_WORLD, 2);
        }
        break;
      case 'b': min_bytes = parse_size(optarg); break;
      case 'e': max_bytes = parse_size(optarg); break;
      case 'f': factor = (size_t)atol(optarg); break;
      case 'n': iters = atoi(optarg); break;
      case 'w': warmup = atoi(optarg); break;
      case 'R': rotate = atoi(optarg); break;
      case 'I': nonblocking = atoi(optarg); break;
      default:
        fprintf(stderr,
                "usage: %s [-C collective] [-b min] [-e max] [-f factor] [-n iters] [-w warmup] [-R rotate 0|1] "
                "[-I nonblocking 0|1]\n",
                argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (factor < 2) factor = 2;
  const size_t alloc = (max_bytes + 63) / 64 * 64 + 64;
  float* send = (float*)aligned_alloc(64, alloc);
  float* recv = (float*)aligned_alloc(64, alloc);
  int* counts = (int*)malloc(sizeof(int) * 2 * (size_t)n);
  if (!send || !recv || !counts) MPI_Abort(MPI_COMM_WORLD, 1);
  for (size_t i = 0; i < alloc / sizeof(float); ++i) {
    send[i] = (float)(rank + 1);
    recv[i] = 0.0f;
  }
  const double factor_bus = coll == ALL_REDUCE ? 2.0 * (n - 1) / n : coll == BROADCAST ? 1.0 : (double)(n - 1) / n;
  if (rank == 0) {
    printf("# plain MPI %s loop (%s): %d ranks, float, %d warm-up, %d timed iterations, rotate %d\n", kNames[coll],
           nonblocking ? "non-blocking call + MPI_Wait" : "blocking call", n, warmup, iters, rotate);
    printf("# %10s %12s %10s %8s %8s %12s\n", "size", "count", "time(us)", "algbw", "busbw", "median(us)");
  }
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= factor) {
    /* count: the operation's argument; total: floats of the larger buffer (the size column) */
    const size_t elems = bytes / sizeof(float);
    const size_t count = coll == ALL_REDUCE || coll == BROADCAST ? elems : elems / (size_t)n;
    const size_t total = coll == ALL_REDUCE || coll == BROADCAST ? count : count * (size_t)n;
    const size_t steps = total ? max_bytes / (total * sizeof(float)) : 1;
    for (int i = 0; i < warmup; ++i) issue(coll, nonblocking, send, recv, count, n, counts, counts + n);
    double* it = malloc(sizeof(double) * (size_t)iters);
    double* slowest = malloc(sizeof(double) * (size_t)iters);
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) {
      const size_t shift = rotate && steps ? total * (size_t)(i % (int)steps) : 0;
      const double ti = MPI_Wtime();
      issue(coll, nonblocking, send + shift, recv + shift, count, n, counts, counts + n);
      it[i] = MPI_Wtime() - ti;
    }
    double t = (MPI_Wtime() - t0) / iters, avg = 0;
    MPI_Allreduce(&t, &avg, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    avg /= n;
    MPI_Allreduce(it, slowest, iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    qsort(slowest, (size_t)iters, sizeof(double), cmp_double);
    const double median = slowest[(iters + 1) / 2 - 1]; /* nearest rank, as zaya's p50 */
    const double algbw = (double)(total * sizeof(float)) / 1e9 / avg;
    if (rank == 0)
      printf("%12zu %12zu %10.2f %8.3f %8.3f %12.2f\n", total * sizeof(float), count, avg * 1e6, algbw,
             algbw * factor_bus, median * 1e6);
    free(it);
    free(slowest);
    if (bytes > max_bytes / factor) break;
  }
  free(counts);
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
