/* An MPI program run unmodified on softfab through Open MPI's mtl ofi
 * (built with mpicc: tools/verbs-tests.sh runs it on rxe in the VM,
 * backends/simd/multiprocess_test.sh on the shared simulated fabric): every
 * rank passes messages of 0 B to 4 MiB around a ring, each received from
 * MPI_ANY_SOURCE after MPI_Iprobe reported its source, tag and size; then
 * an MPI_Alltoall of the same size per pair (at most 1 MiB); every byte
 * checked. Prints one line per size on rank 0 and exits non-zero on any
 * mismatch. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static unsigned char Pattern(int from, int round, size_t i) {
  return (unsigned char)(from * 37 + round * 11 + (i * 7) + (i >> 10));
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const size_t sizes[] = {0,    1,     8,      100,     4096,
                          8193, 65536, 300000, 1 << 20, 4 << 20};
  const int rounds = (int)(sizeof sizes / sizeof sizes[0]);
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  unsigned char* out = malloc(4 << 20);
  unsigned char* in = malloc(4 << 20);
  unsigned char* all_out = malloc((size_t)size << 20);
  unsigned char* all_in = malloc((size_t)size << 20);
  long errors = 0;
  for (int round = 0; round < rounds; ++round) {
    const size_t len = sizes[round];
    for (size_t i = 0; i < len; ++i) out[i] = Pattern(rank, round, i);
    MPI_Request request;
    MPI_Isend(out, (int)len, MPI_BYTE, next, round, MPI_COMM_WORLD, &request);
    /* Any source: poll with MPI_Iprobe until the message shows, then
     * receive exactly what it announced. */
    int flag = 0;
    MPI_Status status;
    long polls = 0;
    while (!flag) {
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &status);
      ++polls;
    }
    int count = -1;
    MPI_Get_count(&status, MPI_BYTE, &count);
    if (status.MPI_SOURCE != prev || status.MPI_TAG != round ||
        count != (int)len) {
      fprintf(stderr,
              "rank %d round %d: probe saw source %d tag %d count %d, "
              "expected %d %d %zu\n",
              rank, round, status.MPI_SOURCE, status.MPI_TAG, count, prev,
              round, len);
      ++errors;
    }
    MPI_Recv(in, (int)len, MPI_BYTE, MPI_ANY_SOURCE, status.MPI_TAG,
             MPI_COMM_WORLD, &status);
    for (size_t i = 0; i < len; ++i) {
      if (in[i] != Pattern(prev, round, i)) {
        fprintf(stderr, "rank %d round %d: byte %zu is %u, expected %u\n", rank,
                round, i, in[i], Pattern(prev, round, i));
        ++errors;
        break;
      }
    }
    MPI_Wait(&request, MPI_STATUS_IGNORE);

    /* All to all: block j of rank r's buffer goes to rank j. */
    const size_t block = len < ((size_t)1 << 20) ? len : ((size_t)1 << 20);
    for (int to = 0; to < size; ++to) {
      for (size_t i = 0; i < block; ++i) {
        all_out[(size_t)to * block + i] = Pattern(rank * 8 + to, round, i);
      }
    }
    MPI_Alltoall(all_out, (int)block, MPI_BYTE, all_in, (int)block, MPI_BYTE,
                 MPI_COMM_WORLD);
    for (int from = 0; from < size; ++from) {
      for (size_t i = 0; i < block; ++i) {
        if (all_in[(size_t)from * block + i] !=
            Pattern(from * 8 + rank, round, i)) {
          fprintf(stderr, "rank %d round %d: all-to-all byte %zu from %d\n",
                  rank, round, i, from);
          ++errors;
          break;
        }
      }
    }
    long total = 0;
    MPI_Allreduce(&errors, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
      printf("ring and all-to-all %zu bytes: %s (%ld probes on rank 0)\n",
             len, total ? "MISMATCH" : "every byte checked", polls);
    }
  }
  long total = 0;
  MPI_Allreduce(&errors, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("mpi_ring: %d ranks, %ld errors\n", size, total);
  free(out);
  free(in);
  free(all_out);
  free(all_in);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
