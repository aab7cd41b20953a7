// The data path of softfab's provider: fi_msg(3) and fi_tagged(3) calls, each
// one jump to the sf_* call of the same name. Flags, message structs,
// descriptors (an fi_mr's mem_desc is the sf_mr_desc) and addresses (the
// sf_av's indices) are sf_*'s already, so nothing is converted.
#include <rdma/fi_endpoint.h>
#include <rdma/fi_tagged.h>

#include <cstddef>

#include "api/libfabric/internal/provider_objects.h"
#include "api/softfab/fabric.h"

namespace softfab::libfabric {
namespace {

static_assert(sizeof(fi_msg) == sizeof(sf_msg) &&
                  offsetof(fi_msg, addr) == offsetof(sf_msg, addr) &&
                  offsetof(fi_msg, context) == offsetof(sf_msg, context) &&
                  offsetof(fi_msg, data) == offsetof(sf_msg, data),
              "fi_msg and sf_msg must agree");
static_assert(
    sizeof(fi_msg_tagged) == sizeof(sf_msg_tagged) &&
        offsetof(fi_msg_tagged, tag) == offsetof(sf_msg_tagged, tag) &&
        offsetof(fi_msg_tagged, ignore) == offsetof(sf_msg_tagged, ignore) &&
        offsetof(fi_msg_tagged, data) == offsetof(sf_msg_tagged, data),
    "fi_msg_tagged and sf_msg_tagged must agree");
static_assert(FI_MSG == SF_MSG && FI_TAGGED == SF_TAGGED &&
                  FI_MULTI_RECV == SF_MULTI_RECV &&
                  FI_REMOTE_CQ_DATA == SF_REMOTE_CQ_DATA &&
                  FI_PEEK == SF_PEEK && FI_CLAIM == SF_CLAIM &&
                  FI_DISCARD == SF_DISCARD && FI_COMPLETION == SF_COMPLETION &&
                  FI_INJECT == SF_INJECT && FI_MORE == SF_MORE &&
                  FI_FENCE == SF_FENCE &&
                  FI_INJECT_COMPLETE == SF_INJECT_COMPLETE &&
                  FI_TRANSMIT_COMPLETE == SF_TRANSMIT_COMPLETE &&
                  FI_DELIVERY_COMPLETE == SF_DELIVERY_COMPLETE &&
                  FI_MATCH_COMPLETE == SF_MATCH_COMPLETE &&
                  FI_ADDR_UNSPEC == SF_ADDR_UNSPEC,
              "sf_* flags have libfabric's values");

sf_ep* Sf(fid_ep* ep) { return reinterpret_cast<Ep*>(ep)->sf; }

ssize_t Recv(fid_ep* ep, void* buf, size_t len, void* desc, fi_addr_t src,
             void* context) {
  return sf_recv(Sf(ep), buf, len, desc, src, context);
}
ssize_t RecvV(fid_ep* ep, const iovec* iov, void** desc, size_t count,
              fi_addr_t src, void* context) {
  return sf_recvv(Sf(ep), iov, desc, count, src, context);
}
ssize_t RecvMsg(fid_ep* ep, const fi_msg* msg, uint64_t flags) {
  return sf_recvmsg(Sf(ep), reinterpret_cast<const sf_msg*>(msg), flags);
}
ssize_t Send(fid_ep* ep, const void* buf, size_t len, void* desc,
             fi_addr_t dest, void* context) {
  return sf_send(Sf(ep), buf, len, desc, dest, context);
}
ssize_t SendV(fid_ep* ep, const iovec* iov, void** desc, size_t count,
              fi_addr_t dest, void* context) {
  return sf_sendv(Sf(ep), iov, desc, count, dest, context);
}
ssize_t SendMsg(fid_ep* ep, const fi_msg* msg, uint64_t flags) {
  return sf_sendmsg(Sf(ep), reinterpret_cast<const sf_msg*>(msg), flags);
}
ssize_t Inject(fid_ep* ep, const void* buf, size_t len, fi_addr_t dest) {
  return sf_inject(Sf(ep), buf, len, dest);
}
ssize_t SendData(fid_ep* ep, const void* buf, size_t len, void* desc,
                 uint64_t data, fi_addr_t dest, void* context) {
  return sf_senddata(Sf(ep), buf, len, desc, data, dest, context);
}
ssize_t InjectData(fid_ep* ep, const void* buf, size_t len, uint64_t data,
                   fi_addr_t dest) {
  return sf_injectdata(Sf(ep), buf, len, data, dest);
}

ssize_t TRecv(fid_ep* ep, void* buf, size_t len, void* desc, fi_addr_t src,
              uint64_t tag, uint64_t ignore, void* context) {
  return sf_trecv(Sf(ep), buf, len, desc, src, tag, ignore, context);
}
ssize_t TRecvV(fid_ep* ep, const iovec* iov, void** desc, size_t count,
               fi_addr_t src, uint64_t tag, uint64_t ignore, void* context) {
  return sf_trecvv(Sf(ep), iov, desc, count, src, tag, ignore, context);
}
ssize_t TRecvMsg(fid_ep* ep, const fi_msg_tagged* msg, uint64_t flags) {
  return sf_trecvmsg(Sf(ep), reinterpret_cast<const sf_msg_tagged*>(msg),
                     flags);
}
ssize_t TSend(fid_ep* ep, const void* buf, size_t len, void* desc,
              fi_addr_t dest, uint64_t tag, void* context) {
  return sf_tsend(Sf(ep), buf, len, desc, dest, tag, context);
}
ssize_t TSendV(fid_ep* ep, const iovec* iov, void** desc, size_t count,
               fi_addr_t dest, uint64_t tag, void* context) {
  return sf_tsendv(Sf(ep), iov, desc, count, dest, tag, context);
}
ssize_t TSendMsg(fid_ep* ep, const fi_msg_tagged* msg, uint64_t flags) {
  return sf_tsendmsg(Sf(ep), reinterpret_cast<const sf_msg_tagged*>(msg),
                     flags);
}
ssize_t TInject(fid_ep* ep, const void* buf, size_t len, fi_addr_t dest,
                uint64_t tag) {
  return sf_tinject(Sf(ep), buf, len, dest, tag);
}
ssize_t TSendData(fid_ep* ep, const void* buf, size_t len, void* desc,
                  uint64_t data, fi_addr_t dest, uint64_t tag, void* context) {
  return sf_tsenddata(Sf(ep), buf, len, desc, data, dest, tag, context);
}
ssize_t TInjectData(fid_ep* ep, const void* buf, size_t len, uint64_t data,
                    fi_addr_t dest, uint64_t tag) {
  return sf_tinjectdata(Sf(ep), buf, len, data, dest, tag);
}

// Endpoints whose tx_attr / rx_attr op_flags hold FI_COMPLETION (Open MPI
// binds its CQ with FI_SELECTIVE_COMPLETION and asks for that) must report
// operations posted without flags: those go through the *msg call with the
// endpoint's flags. Only such endpoints take these slots (they are the
// "default flags" tables), so the others' path is unchanged.
uint64_t TxFlags(fid_ep* ep) { return reinterpret_cast<Ep*>(ep)->tx_flags; }
uint64_t RxFlags(fid_ep* ep) { return reinterpret_cast<Ep*>(ep)->rx_flags; }

ssize_t RecvF(fid_ep* ep, void* buf, size_t len, void* desc, fi_addr_t src,
              void* context) {
  iovec iov{buf, len};
  const sf_msg m{&iov, &desc, 1, src, context, 0};
  return sf_recvmsg(Sf(ep), &m, RxFlags(ep));
}
ssize_t RecvVF(fid_ep* ep, const iovec* iov, void** desc, size_t count,
               fi_addr_t src, void* context) {
  const sf_msg m{iov, desc, count, src, context, 0};
  return sf_recvmsg(Sf(ep), &m, RxFlags(ep));
}
ssize_t SendF(fid_ep* ep, const void* buf, size_t len, void* desc,
              fi_addr_t dest, void* context) {
  iovec iov{const_cast<void*>(buf), len};
  const sf_msg m{&iov, &desc, 1, dest, context, 0};
  return sf_sendmsg(Sf(ep), &m, TxFlags(ep));
}
ssize_t SendVF(fid_ep* ep, const iovec* iov, void** desc, size_t count,
               fi_addr_t dest, void* context) {
  const sf_msg m{iov, desc, count, dest, context, 0};
  return sf_sendmsg(Sf(ep), &m, TxFlags(ep));
}
ssize_t SendDataF(fid_ep* ep, const void* buf, size_t len, void* desc,
                  uint64_t data, fi_addr_t dest, void* context) {
  iovec iov{const_cast<void*>(buf), len};
  const sf_msg m{&iov, &desc, 1, dest, context, data};
  return sf_sendmsg(Sf(ep), &m, TxFlags(ep) | FI_REMOTE_CQ_DATA);
}
ssize_t TRecvF(fid_ep* ep, void* buf, size_t len, void* desc, fi_addr_t src,
               uint64_t tag, uint64_t ignore, void* context) {
  iovec iov{buf, len};
  const sf_msg_tagged m{&iov, &desc, 1, src, tag, ignore, context, 0};
  return sf_trecvmsg(Sf(ep), &m, RxFlags(ep));
}
ssize_t TRecvVF(fid_ep* ep, const iovec* iov, void** desc, size_t count,
                fi_addr_t src, uint64_t tag, uint64_t ignore, void* context) {
  const sf_msg_tagged m{iov, desc, count, src, tag, ignore, context, 0};
  return sf_trecvmsg(Sf(ep), &m, RxFlags(ep));
}
ssize_t TSendF(fid_ep* ep, const void* buf, size_t len, void* desc,
               fi_addr_t dest, uint64_t tag, void* context) {
  iovec iov{const_cast<void*>(buf), len};
  const sf_msg_tagged m{&iov, &desc, 1, dest, tag, 0, context, 0};
  return sf_tsendmsg(Sf(ep), &m, TxFlags(ep));
}
ssize_t TSendVF(fid_ep* ep, const iovec* iov, void** desc, size_t count,
                fi_addr_t dest, uint64_t tag, void* context) {
  const sf_msg_tagged m{iov, desc, count, dest, tag, 0, context, 0};
  return sf_tsendmsg(Sf(ep), &m, TxFlags(ep));
}
ssize_t TSendDataF(fid_ep* ep, const void* buf, size_t len, void* desc,
                   uint64_t data, fi_addr_t dest, uint64_t tag, void* context) {
  iovec iov{const_cast<void*>(buf), len};
  const sf_msg_tagged m{&iov, &desc, 1, dest, tag, 0, context, data};
  return sf_tsendmsg(Sf(ep), &m, TxFlags(ep) | FI_REMOTE_CQ_DATA);
}

}  // namespace

fi_ops_msg msg_ops_default_flags = {
    .size = sizeof(fi_ops_msg),
    .recv = RecvF,
    .recvv = RecvVF,
    .recvmsg = RecvMsg,
    .send = SendF,
    .sendv = SendVF,
    .sendmsg = SendMsg,
    .inject = Inject,
    .senddata = SendDataF,
    .injectdata = InjectData,
};

fi_ops_tagged tagged_ops_default_flags = {
    .size = sizeof(fi_ops_tagged),
    .recv = TRecvF,
    .recvv = TRecvVF,
    .recvmsg = TRecvMsg,
    .send = TSendF,
    .sendv = TSendVF,
    .sendmsg = TSendMsg,
    .inject = TInject,
    .senddata = TSendDataF,
    .injectdata = TInjectData,
};

fi_ops_msg msg_ops = {
    .size = sizeof(fi_ops_msg),
    .recv = Recv,
    .recvv = RecvV,
    .recvmsg = RecvMsg,
    .send = Send,
    .sendv = SendV,
    .sendmsg = SendMsg,
    .inject = Inject,
    .senddata = SendData,
    .injectdata = InjectData,
};

fi_ops_tagged tagged_ops = {
    .size = sizeof(fi_ops_tagged),
    .recv = TRecv,
    .recvv = TRecvV,
    .recvmsg = TRecvMsg,
    .send = TSend,
    .sendv = TSendV,
    .sendmsg = TSendMsg,
    .inject = TInject,
    .senddata = TSendData,
    .injectdata = TInjectData,
};

}  // namespace softfab::libfabric
