// The slots softfab's provider does not serve: RMA, atomics, collectives and
// the fid operations no softfab object has. libfabric's inline fi_* calls
// jump through the ops tables without checking for NULL, so each slot points
// at a function that answers -FI_ENOSYS (fi_endpoint(3): "not supported").
#include <rdma/fi_atomic.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "api/libfabric/internal/provider_objects.h"

namespace softfab::libfabric {
namespace {

// One function per signature shape is enough: every argument is ignored.
ssize_t RmaRw(fid_ep*, void*, size_t, void*, fi_addr_t, uint64_t, uint64_t,
              void*) {
  return -FI_ENOSYS;
}
ssize_t RmaRwV(fid_ep*, const iovec*, void**, size_t, fi_addr_t, uint64_t,
               uint64_t, void*) {
  return -FI_ENOSYS;
}
ssize_t RmaMsg(fid_ep*, const fi_msg_rma*, uint64_t) { return -FI_ENOSYS; }
ssize_t RmaWrite(fid_ep*, const void*, size_t, void*, fi_addr_t, uint64_t,
                 uint64_t, void*) {
  return -FI_ENOSYS;
}
ssize_t RmaInject(fid_ep*, const void*, size_t, fi_addr_t, uint64_t, uint64_t) {
  return -FI_ENOSYS;
}
ssize_t RmaWriteData(fid_ep*, const void*, size_t, void*, uint64_t, fi_addr_t,
                     uint64_t, uint64_t, void*) {
  return -FI_ENOSYS;
}
ssize_t RmaInjectData(fid_ep*, const void*, size_t, uint64_t, fi_addr_t,
                      uint64_t, uint64_t) {
  return -FI_ENOSYS;
}

ssize_t AtomicWrite(fid_ep*, const void*, size_t, void*, fi_addr_t, uint64_t,
                    uint64_t, fi_datatype, fi_op, void*) {
  return -FI_ENOSYS;
}
ssize_t AtomicWriteV(fid_ep*, const fi_ioc*, void**, size_t, fi_addr_t,
                     uint64_t, uint64_t, fi_datatype, fi_op, void*) {
  return -FI_ENOSYS;
}
ssize_t AtomicWriteMsg(fid_ep*, const fi_msg_atomic*, uint64_t) {
  return -FI_ENOSYS;
}
ssize_t AtomicInject(fid_ep*, const void*, size_t, fi_addr_t, uint64_t,
                     uint64_t, fi_datatype, fi_op) {
  return -FI_ENOSYS;
}
ssize_t AtomicReadWrite(fid_ep*, const void*, size_t, void*, void*, void*,
                        fi_addr_t, uint64_t, uint64_t, fi_datatype, fi_op,
                        void*) {
  return -FI_ENOSYS;
}
ssize_t AtomicReadWriteV(fid_ep*, const fi_ioc*, void**, size_t, fi_ioc*,
                         void**, size_t, fi_addr_t, uint64_t, uint64_t,
                         fi_datatype, fi_op, void*) {
  return -FI_ENOSYS;
}
ssize_t AtomicReadWriteMsg(fid_ep*, const fi_msg_atomic*, fi_ioc*, void**,
                           size_t, uint64_t) {
  return -FI_ENOSYS;
}
ssize_t AtomicCompWrite(fid_ep*, const void*, size_t, void*, const void*, void*,
                        void*, void*, fi_addr_t, uint64_t, uint64_t,
                        fi_datatype, fi_op, void*) {
  return -FI_ENOSYS;
}
ssize_t AtomicCompWriteV(fid_ep*, const fi_ioc*, void**, size_t, const fi_ioc*,
                         void**, size_t, fi_ioc*, void**, size_t, fi_addr_t,
                         uint64_t, uint64_t, fi_datatype, fi_op, void*) {
  return -FI_ENOSYS;
}
ssize_t AtomicCompWriteMsg(fid_ep*, const fi_msg_atomic*, const fi_ioc*, void**,
                           size_t, fi_ioc*, void**, size_t, uint64_t) {
  return -FI_ENOSYS;
}
int AtomicValid(fid_ep*, fi_datatype, fi_op, size_t*) { return -FI_ENOSYS; }

ssize_t CollBarrier(fid_ep*, fi_addr_t, void*) { return -FI_ENOSYS; }
ssize_t CollBroadcast(fid_ep*, void*, size_t, void*, fi_addr_t, fi_addr_t,
                      fi_datatype, uint64_t, void*) {
  return -FI_ENOSYS;
}
ssize_t CollAllToAll(fid_ep*, const void*, size_t, void*, void*, void*,
                     fi_addr_t, fi_datatype, uint64_t, void*) {
  return -FI_ENOSYS;
}
ssize_t CollReduceOp(fid_ep*, const void*, size_t, void*, void*, void*,
                     fi_addr_t, fi_datatype, fi_op, uint64_t, void*) {
  return -FI_ENOSYS;
}
ssize_t CollReduce(fid_ep*, const void*, size_t, void*, void*, void*, fi_addr_t,
                   fi_addr_t, fi_datatype, fi_op, uint64_t, void*) {
  return -FI_ENOSYS;
}
ssize_t CollRooted(fid_ep*, const void*, size_t, void*, void*, void*, fi_addr_t,
                   fi_addr_t, fi_datatype, uint64_t, void*) {
  return -FI_ENOSYS;
}
ssize_t CollMsg(fid_ep*, const fi_msg_collective*, fi_ioc*, void**, size_t,
                uint64_t) {
  return -FI_ENOSYS;
}
ssize_t CollBarrier2(fid_ep*, fi_addr_t, uint64_t, void*) { return -FI_ENOSYS; }

}  // namespace

fi_ops_rma unsupported_rma = {
    .size = sizeof(fi_ops_rma),
    .read = RmaRw,
    .readv = RmaRwV,
    .readmsg = RmaMsg,
    .write = RmaWrite,
    .writev = RmaRwV,
    .writemsg = RmaMsg,
    .inject = RmaInject,
    .writedata = RmaWriteData,
    .injectdata = RmaInjectData,
};

fi_ops_atomic unsupported_atomic = {
    .size = sizeof(fi_ops_atomic),
    .write = AtomicWrite,
    .writev = AtomicWriteV,
    .writemsg = AtomicWriteMsg,
    .inject = AtomicInject,
    .readwrite = AtomicReadWrite,
    .readwritev = AtomicReadWriteV,
    .readwritemsg = AtomicReadWriteMsg,
    .compwrite = AtomicCompWrite,
    .compwritev = AtomicCompWriteV,
    .compwritemsg = AtomicCompWriteMsg,
    .writevalid = AtomicValid,
    .readwritevalid = AtomicValid,
    .compwritevalid = AtomicValid,
};

fi_ops_collective unsupported_collective = {
    .size = sizeof(fi_ops_collective),
    .barrier = CollBarrier,
    .broadcast = CollBroadcast,
    .alltoall = CollAllToAll,
    .allreduce = CollReduceOp,
    .allgather = CollAllToAll,
    .reduce_scatter = CollReduceOp,
    .reduce = CollReduce,
    .scatter = CollRooted,
    .gather = CollRooted,
    .msg = CollMsg,
    .barrier2 = CollBarrier2,
};

int NoBind(fid*, fid*, uint64_t) { return -FI_ENOSYS; }
int NoControl(fid*, int, void*) { return -FI_ENOSYS; }
int NoOpsOpen(fid*, const char*, uint64_t, void**, void*) { return -FI_ENOSYS; }
int NoToStr(const fid*, char*, size_t) { return -FI_ENOSYS; }
int NoOpsSet(fid*, const char*, uint64_t, void*, void*) { return -FI_ENOSYS; }
ssize_t NoCancel(fid*, void*) { return -FI_ENOSYS; }
int NoGetOpt(fid*, int, int, void*, size_t*) { return -FI_ENOPROTOOPT; }
int NoSetOpt(fid*, int, int, const void*, size_t) { return -FI_ENOPROTOOPT; }
int NoTxCtx(fid_ep*, int, fi_tx_attr*, fid_ep**, void*) { return -FI_ENOSYS; }
int NoRxCtx(fid_ep*, int, fi_rx_attr*, fid_ep**, void*) { return -FI_ENOSYS; }
ssize_t NoSizeLeft(fid_ep*) { return -FI_ENOSYS; }

}  // namespace softfab::libfabric
