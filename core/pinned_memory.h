// Memory softfab registers with the device for itself (receive bounce
// buffers, send bounce slots, CM slots, credit words, datagram buffers): whole
// pages of its own, never shared with other heap data. Under libibverbs' fork
// support (ibv_fork_init, which softfab turns on where the kernel does not copy
// pinned pages at fork: backends/verbs/verbs_device.cc) a registered range is
// left out of a child page by page (MADV_DONTFORK); a buffer sharing a page
// with other data would take that data away from the child too.
#ifndef SOFTFAB_CORE_PINNED_MEMORY_H_
#define SOFTFAB_CORE_PINNED_MEMORY_H_

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>

namespace softfab::core {

// A std::allocator that gives each allocation whole pages of anonymous
// memory (zeroed by the kernel) and returns them with munmap.
template <typename T>
struct PageAllocator {
  using value_type = T;
  PageAllocator() = default;
  template <typename U>
  PageAllocator(const PageAllocator<U>&) {}  // NOLINT: rebinding

  static size_t Rounded(size_t n) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return (n * sizeof(T) + page - 1) / page * page;
  }
  T* allocate(size_t n) {
    void* p = mmap(nullptr, Rounded(n), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) { munmap(p, Rounded(n)); }
  template <typename U>
  bool operator==(const PageAllocator<U>&) const {
    return true;
  }
};

// An array of trivially copyable T on pages of its own, zeroed by the kernel
// when made (no per-element construction: filling megabytes one element at a
// time, as a std::vector with its own allocator does, costs seconds per
// endpoint in an unoptimised build under emulation). The subset of
// std::vector the core uses.
template <typename T>
class PinnedVector {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  PinnedVector() = default;
  ~PinnedVector() { Release(); }
  PinnedVector(const PinnedVector&) = delete;
  PinnedVector& operator=(const PinnedVector&) = delete;

  // Replaces the contents with n elements, all zero (fresh pages are).
  void AllocateZeroed(size_t n) {
    Release();
    if (n == 0) return;
    data_ = PageAllocator<T>().allocate(n);
    size_ = n;
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  void Release() {
    if (data_ != nullptr) PageAllocator<T>().deallocate(data_, size_);
    data_ = nullptr;
    size_ = 0;
  }
  T* data_ = nullptr;
  size_t size_ = 0;
};

// A fixed block of bytes on pages of its own (zeroed).
struct PinnedFree {
  size_t bytes = 0;
  void operator()(uint8_t* p) const {
    PageAllocator<uint8_t>().deallocate(p, bytes);
  }
};
using PinnedBlock = std::unique_ptr<uint8_t[], PinnedFree>;
inline PinnedBlock NewPinnedBlock(size_t bytes) {
  return PinnedBlock(PageAllocator<uint8_t>().allocate(bytes),
                     PinnedFree{bytes});
}

}  // namespace softfab::core

#endif  // SOFTFAB_CORE_PINNED_MEMORY_H_
