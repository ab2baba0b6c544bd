// MPI datatypes and reduction operations (dist/mpi_types.h).
#include "zaya/dist/mpi_types.h"

#include <algorithm>
#include <cstdint>

#include "zaya/core/bf16.h"
#include "zaya/core/error.h"

namespace zaya::mpi {
namespace {

// Element-wise reductions on 16-bit floats, which MPI has no datatype for:
// the data travels as MPI_UINT16_T and these user operations combine it.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float), int Kind>
void reduce_16bit(void* in, void* inout, int* len, MPI_Datatype*) {
  const uint16_t* a = static_cast<const uint16_t*>(in);
  uint16_t* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = ToFloat(a[i]), y = ToFloat(b[i]);
    const float r = Kind == 0 ? x + y : Kind == 1 ? x * y : Kind == 2 ? (x < y ? x : y) : (x > y ? x : y);
    b[i] = FromFloat(r);
  }
}

template <bool Max>
void reduce_u8(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint8_t*>(in);
  auto* b = static_cast<uint8_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = Max ? std::max(a[i], b[i]) : std::min(a[i], b[i]);
}

}  // namespace

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::kF32: return MPI_FLOAT;
    case DType::kF64: return MPI_DOUBLE;
    case DType::kBF16: return MPI_UINT16_T;
    case DType::kF16: return MPI_UINT16_T;
    case DType::kI32: return MPI_INT32_T;
    case DType::kI64: return MPI_INT64_T;
    case DType::kU8: return MPI_UINT8_T;
  }
  return MPI_BYTE;
}

bool is_float(DType t) { return t == DType::kF32 || t == DType::kF64 || t == DType::kBF16 || t == DType::kF16; }

MPI_Op mpi_op(DType t, ReduceOp op) {
  static MPI_Op bf16_ops[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  static MPI_Op f16_ops[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  const int kind = op == ReduceOp::kSum || op == ReduceOp::kAvg ? 0
                   : op == ReduceOp::kProd                      ? 1
                   : op == ReduceOp::kMin                       ? 2
                                                                : 3;
  if (t == DType::kBF16 || t == DType::kF16) {
    MPI_Op* ops = t == DType::kBF16 ? bf16_ops : f16_ops;
    if (ops[kind] == MPI_OP_NULL) {
      MPI_User_function* fns_bf16[4] = {
          reduce_16bit<bf16_to_float, float_to_bf16, 0>, reduce_16bit<bf16_to_float, float_to_bf16, 1>,
          reduce_16bit<bf16_to_float, float_to_bf16, 2>, reduce_16bit<bf16_to_float, float_to_bf16, 3>};
      MPI_User_function* fns_f16[4] = {
          reduce_16bit<f16_to_float, float_to_f16, 0>, reduce_16bit<f16_to_float, float_to_f16, 1>,
          reduce_16bit<f16_to_float, float_to_f16, 2>, reduce_16bit<f16_to_float, float_to_f16, 3>};
      MPI_Op_create(t == DType::kBF16 ? fns_bf16[kind] : fns_f16[kind], 1, &ops[kind]);
    }
    return ops[kind];
  }
  if (t == DType::kU8 && (kind == 2 || kind == 3)) {
    // MPICH 4.0.2 (Debian 12) compares MPI_UINT8_T and MPI_UNSIGNED_CHAR as
    // signed in MPI_MIN/MPI_MAX (max(200, 10) = 10); our own op is right everywhere.
    static MPI_Op u8_ops[2] = {MPI_OP_NULL, MPI_OP_NULL};
    if (u8_ops[kind - 2] == MPI_OP_NULL)
      MPI_Op_create(kind == 2 ? reduce_u8<false> : reduce_u8<true>, 1, &u8_ops[kind - 2]);
    return u8_ops[kind - 2];
  }
  static const MPI_Op builtin[4] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
  return builtin[kind];
}

void divide(void* buf, size_t count, DType t, int n) {
  switch (t) {
    case DType::kF32:
      for (size_t i = 0; i < count; ++i) static_cast<float*>(buf)[i] /= float(n);
      break;
    case DType::kF64:
      for (size_t i = 0; i < count; ++i) static_cast<double*>(buf)[i] /= double(n);
      break;
    case DType::kBF16: {
      uint16_t* b = static_cast<uint16_t*>(buf);
      for (size_t i = 0; i < count; ++i) b[i] = float_to_bf16(bf16_to_float(b[i]) / float(n));
      break;
    }
    case DType::kF16: {
      uint16_t* b = static_cast<uint16_t*>(buf);
      for (size_t i = 0; i < count; ++i) b[i] = float_to_f16(f16_to_float(b[i]) / float(n));
      break;
    }
    default: fail("ReduceOp avg needs a floating-point type, got {}", dtype_name(t));
  }
}

}  // namespace zaya::mpi
