#pragma once
// MPI datatypes and reduction operations for the library's dtypes and
// ReduceOps (dist/mpi_*.cc only: it includes mpi.h).
#include <mpi.h>

#include <cstddef>

#include "zaya/dist/comm.h"

namespace zaya::mpi {

MPI_Datatype mpi_type(DType t);
bool is_float(DType t);
// The operation for `op` on `t`: MPI's own, or ours where MPI has no datatype
// (bf16, f16) or gets it wrong (u8 min/max on MPICH).
MPI_Op mpi_op(DType t, ReduceOp op);
// x /= n on `count` elements (the second half of ReduceOp::kAvg).
void divide(void* buf, size_t count, DType t, int n);

}  // namespace zaya::mpi
